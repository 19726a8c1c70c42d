"""The feed sees every process: a pause made through one server process appears in another's feed
(PostgreSQL LISTEN/NOTIFY, Redis pub/sub, SQLite's change counter), and a reconnect with
``Last-Event-ID`` gets exactly the events it missed."""

from __future__ import annotations

import itertools

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


async def pause_by(http: httpx.AsyncClient, base: str, headers: dict[str, str]) -> dict:
    reply = await http.post(
        base + "/v1/agents/bankingAgent/sessions", json={"message": "Transfer $9 to r."}, headers=headers
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
                # the id another process sent reads back here: sealed with the store's secret
                async with FeedReader(one, ALICE, last_event_id=pause_id) as resumed:
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


async def test_a_last_event_id_the_feed_never_sent_is_refused_and_ids_count_nothing(served, http):
    """An id is a store position sealed with the store's secret: a made-up one is refused as one
    the feed never sent, whatever it is — past the newest event or not, so that no answer tells
    how many events the store holds (found by a probe: "past the newest" let a tenant find every
    tenant's event count in 20 tries, and the ids' gaps counted them)."""
    async with FeedReader(served.bank, ALICE) as feed:
        for amount in (1, 2):
            await pause(http, served.bank, amount)
        await pause_by(http, served.bank, BOB)  # events alice cannot see, between hers
        await pause(http, served.bank, 3)
        events = await feed.wait_for(6)
    ids = [event_id for event_id, _, _ in events]
    assert all(len(i) == 16 and int(i, 16) > 1 << 32 for i in ids)  # no position as it is
    assert len(set(ids)) == 6
    # nor do the events' own ids (a process's counter, as it was): one process made them all
    bodies = [data["id"] for _, _, data in events]
    assert len({b[:16] for b in bodies}) == 1
    assert all(abs(int(b[16:], 16) - int(a[16:], 16)) > 1 << 16 for a, b in itertools.pairwise(bodies))
    said = set()
    for made_up in ("not-an-id", "9223372036854775807", "1", "0000000000000001", "ffffffffffffffff", ids[0][::-1]):
        reply = await http.get(served.bank + "/v1/feed", headers={**ALICE, "Last-Event-ID": made_up})
        assert reply.status_code == 400 and reply.json()["error"]["code"] == "invalid_request"
        said.add(reply.json()["error"]["message"].replace(repr(made_up), "ID"))
    assert said == {"Last-Event-ID ID is no id this feed has sent: reconnect without it to follow from now"}
    async with FeedReader(served.bank, ALICE, last_event_id=ids[1]) as resumed:
        assert [i for i, _, _ in await resumed.wait_for(4)] == ids[2:]
