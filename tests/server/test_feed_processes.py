"""The feed sees every process: a pause made through one server process appears in another's feed
(PostgreSQL LISTEN/NOTIFY, Redis pub/sub, SQLite's change counter), and a reconnect with
``Last-Event-ID`` gets exactly the events it missed."""

from __future__ import annotations

import httpx
import pytest

from tests.server.conftest import ALICE, BOB
from tests.server.feed_client import FeedReader
from tests.server.ops_harness import serve_ops_process, until_up
from tests.stores.backends import make_backend

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

# Longer than the test may take: only the store's own notification can wake the feed in time.
SLOW_POLL = 120.0


async def pause(http: httpx.AsyncClient, base: str, amount: int) -> dict:
    reply = await http.post(
        base + "/v1/agents/bankingAgent/sessions", json={"message": f"Transfer ${amount} to q."}, headers=ALICE
    )
    assert reply.status_code == 200, reply.text
    return reply.json()


@pytest.mark.parametrize("backend_name", ["postgres", "redis", "sqlite"])
async def test_a_pause_in_one_process_is_in_the_feed_of_another_and_resumes_by_id(backend_name, tmp_path):
    backend = make_backend(backend_name, tmp_path)
    config = {"store": backend.spec(), "webhooks": False, "feed_interval": SLOW_POLL}
    try:
        with serve_ops_process(config) as (one, _), serve_ops_process(config) as (two, _):
            await until_up(one)
            await until_up(two)
            async with httpx.AsyncClient(timeout=30) as http:
                async with FeedReader(two, ALICE) as feed, FeedReader(two, BOB) as bobs:
                    first = await pause(http, one, 1)
                    (pause_id, name, data), _ = await feed.wait_for(2)
                assert (name, data["interrupt"]["ref"]) == ("pause", first["interrupts"][0]["ref"])
                assert bobs.events == []  # alice's session is not bob's to see

                second = await pause(http, one, 2)
                async with FeedReader(two, ALICE, last_event_id=pause_id) as resumed:
                    missed = await resumed.wait_for(3)
                    third = await pause(http, one, 3)
                    after = await resumed.wait_for(5)
    finally:
        await backend.cleanup()

    assert [(n, d["session_id"]) for _, n, d in missed] == [
        ("turn_end", first["session_id"]),
        ("pause", second["session_id"]),
        ("turn_end", second["session_id"]),
    ]
    assert missed[0][0] == feed.events[1][0]  # the same event, the same id
    assert [(n, d["session_id"]) for _, n, d in after[3:]] == [
        ("pause", third["session_id"]),
        ("turn_end", third["session_id"]),
    ]  # nothing repeated
    ids = [i for i, _, _ in after]
    assert len(set(ids)) == 5


async def test_a_last_event_id_the_feed_never_sent_is_refused(served, http):
    reply = await http.get(served.bank + "/v1/feed", headers={**ALICE, "Last-Event-ID": "not-an-id"})
    assert reply.status_code == 400 and reply.json()["error"]["code"] == "invalid_request"
    # Past the newest event (another store's id, or one from before a reset): refused, not followed
    # silently for ever (found by a probe).
    reply = await http.get(served.bank + "/v1/feed", headers={**ALICE, "Last-Event-ID": "9223372036854775807"})
    assert reply.status_code == 400 and "past the newest event" in reply.json()["error"]["message"]
