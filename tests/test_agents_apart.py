"""Two agents on one store: a session is its agent's. Another agent's chat on its id reads
nothing and writes nothing (``SessionNotFound``, as the REST API's 404), and a message never
makes it that agent's (found by a probe: ``pausepoint chat other:agent --session ID`` and
``other.chat(session_id=ID).send(...)`` continued the session with the other agent's model)."""

from __future__ import annotations

import pytest

from pausepoint import Pausepoint
from pausepoint.errors import SessionNotFound
from pausepoint.testing import ScriptedModel, tool_call


def two_agents(store):
    ai = Pausepoint()

    @ai.tool(requires_approval=True)
    async def transfer(amount: int) -> str:
        """Move money."""
        return f"moved {amount}"

    first = ai.define_agent(name="first", model=ScriptedModel([[tool_call("transfer", {"amount": 5})], "done"]),
                            tools=[transfer], store=store)  # fmt: skip
    second = ai.define_agent(name="second", model=ScriptedModel(["the second agent"]), tools=[transfer], store=store)
    return first, second


async def test_another_agents_session_is_not_this_agents(store):
    first, second = two_agents(store)
    asked = await first.chat().send("pay 5")
    [pause] = asked.interrupts
    session = asked.session_id
    before = await first.chat(session).history()

    other = second.chat(session)
    for call in (
        other.history(),
        other.interrupts(),
        other.audit_trail(),
        other.last_response(),
        other.send("hello"),
        other.approve(pause.ref),
        other.cancel_pending("no"),
    ):
        with pytest.raises(SessionNotFound) as refused:
            await call
        # said as the REST API's 404 says it: whose session the id names (found by a probe: "no
        # session 'x'", from an exception whose class printed as a private name)
        assert type(refused.value) is SessionNotFound
        assert str(refused.value).startswith(
            f"no session {session!r} of agent 'second': the id names a session of agent 'first'"
        )
        assert refused.value.details == {"session_id": session, "agent": "first"}
    assert [s.session_id for s in await second.list_sessions()] == []
    assert await first.chat(session).history() == before
    assert (await first.chat(session).approve(pause.ref)).text == "done"  # still the first agent's to go on
