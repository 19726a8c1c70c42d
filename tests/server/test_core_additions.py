"""The two small core additions the server relies on, and the server's public surface."""

from __future__ import annotations

import pausepoint.errors
import pausepoint.server
from examples import banking
from pausepoint.stores import InMemorySessionStore


async def test_response_version_names_the_turn_end_and_survives_replays():
    _, agent = banking.build(InMemorySessionStore())
    chat = agent.chat(principal="alice")
    paused = await chat.send("Transfer $5 to bob.")
    summary = await agent.store.get_summary(chat.session_id)
    assert paused.version == summary.version  # the pause is the session's latest turn end
    assert paused.interrupts[0].ref == paused.message.tool_requests[0].ref  # one ref per call
    answer = paused.interrupts[0].respond({"approved": True})
    done = await chat.resume(respond=[answer], idempotency_key="k")
    assert done.version > paused.version
    await chat.send("hello")  # the keyed end is no longer the latest...
    assert (await chat.resume(respond=[answer], idempotency_key="k")).version == done.version  # ...yet named
    assert (await chat.last_response()).version == (await agent.store.get_summary(chat.session_id)).version


def test_server_public_surface():
    assert sorted(pausepoint.server.__all__) == [
        "AccessPolicy", "Authenticator", "BearerTokens", "FirstOf", "Identity", "Limits", "OidcBearer",
        "OidcSettings", "OwnerPolicy", "WebhookSender", "create_app", "current_identity", "token_roles",
    ]  # fmt: skip
    codes = [getattr(pausepoint.errors, n).code for n in pausepoint.errors.__all__]
    assert len(codes) == len(set(codes))
