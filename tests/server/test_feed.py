"""The SSE feed: new pauses and answers, for the sessions the subscriber may see."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from typing import Any

import httpx

from examples import banking
from pausepoint import ApprovalPolicy, Interrupt, Pausepoint
from pausepoint.errors import Unauthenticated
from pausepoint.server import BearerTokens, create_app
from pausepoint.stores import SqliteSessionStore
from pausepoint.testing import ScriptedModel, tool_call
from tests.server.conftest import ALICE, BOB
from tests.server.feed_client import FeedReader
from tests.server.harness import TOKENS, serve_in_thread


async def read_events(http, url, headers, count, into, connected):
    """Read ``count`` events into ``into``; ``connected`` is set once the feed has fixed its
    starting point (its ``: connected`` comment): every event written after that is sent."""
    async with http.stream("GET", url, headers=headers) as reply:
        assert reply.status_code == 200
        name = None
        async for line in reply.aiter_lines():
            if line == ": connected":
                connected.set()
            elif line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                into.append((name, json.loads(line[5:])))
                if len(into) >= count:
                    return


def asking_app(path):
    """An app whose agent ``ops`` pauses each message on a question, on the SQLite file ``path``
    (two of them on one file: two processes)."""
    ai = Pausepoint()

    @ai.tool()
    async def ask(question: str) -> str:
        """Asks a person."""
        raise Interrupt({"question": question})

    model = ScriptedModel([[tool_call("ask", {"question": "?"})]] * 2)
    return ai, ai.define_agent(name="ops", model=model, tools=[ask], store=SqliteSessionStore(path))


async def test_feed_announces_pauses_and_answers_to_the_owner_only(served, http):
    alice_events: list = []
    bob_events: list = []
    alice_connected, bob_connected = asyncio.Event(), asyncio.Event()
    alice = asyncio.create_task(read_events(http, served.bank + "/v1/feed", ALICE, 6, alice_events, alice_connected))
    bob = asyncio.create_task(read_events(http, served.bank + "/v1/feed", BOB, 1, bob_events, bob_connected))
    await asyncio.wait_for(asyncio.gather(alice_connected.wait(), bob_connected.wait()), 10)
    reply = await http.post(served.bank + "/v1/agents/bankingAgent/sessions", json={"message": "Transfer $3 to q."},
                            headers=ALICE)  # fmt: skip
    body = reply.json()
    ref = body["interrupts"][0]["ref"]
    base = f"{served.bank}/v1/agents/bankingAgent/sessions/{body['session_id']}"
    await http.post(base + f"/interrupts/{ref}/respond", json={"output": {"approved": True}}, headers=ALICE)
    await asyncio.wait_for(alice, 10)
    # the yes grants the transfer it asked about; the grant approves it (the policy's decision)
    assert [name for name, _ in alice_events] == ["pause", "turn_end", "answer", "grant", "decision", "turn_end"]
    assert alice_events[0][1]["interrupt"]["ref"] == ref and alice_events[0][1]["session_id"] == body["session_id"]
    assert alice_events[1][1]["finish_reason"] == "interrupted" and alice_events[1][1]["open_refs"] == [ref]
    assert alice_events[2][1]["entry"]["principal"] == "alice"
    # the feed shows a pause as the REST API does: with its view, and an answer with what it decided on
    assert alice_events[0][1]["interrupt"]["view"]["title"] == "Transfer $3 to q"
    assert alice_events[2][1]["entry"]["ref"] == ref and alice_events[2][1]["entry"]["input"]["details"]
    assert alice_events[2][1]["entry"]["view"]["title"] == "Transfer $3 to q"
    assert alice_events[3][1]["entry"]["grant"] == alice_events[4][1]["entry"]["grant"]
    assert alice_events[4][1]["entry"]["view"]["title"] == "Transfer $3.00 to q"
    assert alice_events[5][1]["finish_reason"] == "stop"
    # The feed is ordered: once Bob's own pause reaches him, nothing of Alice's came before it.
    reply = await http.post(served.bank + "/v1/agents/bankingAgent/sessions", json={"message": "Transfer $4 to r."},
                            headers=BOB)  # fmt: skip
    await asyncio.wait_for(bob, 10)
    assert [(name, data["session_id"]) for name, data in bob_events] == [("pause", reply.json()["session_id"])]


async def test_the_feed_tells_the_story_the_audit_trail_tells(served, http):
    """Each answer and decision the feed announces is the audit trail's own entry: an approval
    reads ``approve`` (not the restart that carried it), a grant's decision names who granted."""
    for app, message, count in ((served.bank, "Transfer $3 to q.", 6), (served.shell, "Run: rm -rf ./build", 4)):
        agent = "bankingAgent" if app == served.bank else "shellAgent"
        seen: list = []
        connected = asyncio.Event()
        reader = asyncio.create_task(read_events(http, app + "/v1/feed", ALICE, count, seen, connected))
        await asyncio.wait_for(connected.wait(), 10)
        body = (await http.post(f"{app}/v1/agents/{agent}/sessions", json={"message": message}, headers=ALICE)).json()
        base = f"{app}/v1/agents/{agent}/sessions/{body['session_id']}"
        await http.post(base + f"/interrupts/{body['interrupts'][0]['ref']}/approve", json={}, headers=ALICE)
        await asyncio.wait_for(reader, 10)
        told = [{k: v for k, v in data["entry"].items() if k != "view"} for _, data in seen if "entry" in data]
        trail = (await http.get(base + "/audit", headers=ALICE)).json()["entries"]
        assert told and told == [{k: v for k, v in e.items() if k != "view"} for e in trail[1:]]
    assert told[-1]["decision"] == "approve"  # the shell's approved restart


async def test_an_approval_one_approver_is_enough_for_reads_one_of_one_in_the_feed_as_in_the_audit(tmp_path, http):
    """A call paused for approval (``requires_approval``, one approval needed), approved: the
    feed's entry says ``1`` of ``1``, as the audit trail does (found by a probe: it said 0)."""
    ai = Pausepoint()

    @ai.tool(requires_approval=True)
    async def deploy(env: str) -> str:
        """Deploy."""
        return f"deployed {env}"

    steps = [[tool_call("deploy", {"env": "prod"})], "Deployed."]
    ai.define_agent(name="ops", model=ScriptedModel(steps), tools=[deploy], store=SqliteSessionStore(tmp_path / "f.db"))
    tokens = BearerTokens({"alice-token": "alice"})
    with serve_in_thread(lambda: create_app(ai, auth=tokens, feed_interval=0.05)) as url:
        seen: list = []
        connected = asyncio.Event()
        reader = asyncio.create_task(read_events(http, url + "/v1/feed", ALICE, 3, seen, connected))
        await asyncio.wait_for(connected.wait(), 10)
        body = (await http.post(url + "/v1/agents/ops/sessions", json={"message": "go"}, headers=ALICE)).json()
        base = f"{url}/v1/agents/ops/sessions/{body['session_id']}"
        await http.post(base + f"/interrupts/{body['interrupts'][0]['ref']}/approve", json={}, headers=ALICE)
        await asyncio.wait_for(reader, 10)
        [told] = [data["entry"] for _, data in seen if "entry" in data]
        trail = (await http.get(base + "/audit", headers=ALICE)).json()["entries"]
    assert (told["decision"], told["approvals"], told["required"]) == ("approve", 1, 1)
    # one way to write a time in a body: the event's own as its entry's (found by a probe: +00:00 beside Z)
    [event] = [data for _, data in seen if "entry" in data]
    assert event["at"].endswith("Z") and told["at"].endswith("Z")
    assert {k: v for k, v in told.items() if k != "view"} == {k: v for k, v in trail[-1].items() if k != "view"}


async def test_a_grants_revocation_reads_in_the_feed_as_in_the_audit(tmp_path, http):
    """A revocation names the tool of the grant it revokes, in the feed as in the trail (found
    by a probe: the feed's entry, and so webhooks' and Slack's, had an empty name)."""
    ai = Pausepoint()

    @ai.tool(requires_approval=True)
    async def refund(amount: int) -> str:
        """Refund."""
        return f"refunded {amount}"

    steps = [[tool_call("refund", {"amount": 5})], "Refunded."]
    policy = ApprovalPolicy(grantable=["refund"])
    store = SqliteSessionStore(tmp_path / "f.db")
    ai.define_agent(name="shop", model=ScriptedModel(steps), tools=[refund], store=store, approval=policy)
    tokens = BearerTokens({"alice-token": "alice"})
    with serve_in_thread(lambda: create_app(ai, auth=tokens, feed_interval=0.05)) as url:
        seen: list = []
        connected = asyncio.Event()
        reader = asyncio.create_task(read_events(http, url + "/v1/feed", ALICE, 6, seen, connected))
        await asyncio.wait_for(connected.wait(), 10)
        body = (await http.post(url + "/v1/agents/shop/sessions", json={"message": "refund"}, headers=ALICE)).json()
        base = f"{url}/v1/agents/shop/sessions/{body['session_id']}"
        approve = base + f"/interrupts/{body['interrupts'][0]['ref']}/approve"
        assert (await http.post(approve, json={"grant": {"uses": 3}}, headers=ALICE)).status_code == 200
        [grant] = (await http.get(base + "/grants", headers=ALICE)).json()["grants"]
        revoked = await http.post(base + f"/grants/{grant['id']}/revoke", json={"reason": "stop"}, headers=ALICE)
        assert revoked.status_code == 200
        await asyncio.wait_for(reader, 10)
        trail = (await http.get(base + "/audit", headers=ALICE)).json()["entries"]
    [told] = [data["entry"] for _, data in seen if data.get("entry", {}).get("decision") == "revoke"]
    [kept] = [entry for entry in trail if entry["decision"] == "revoke"]
    assert told["name"] == kept["name"] == "refund"
    assert {k: v for k, v in told.items() if k != "view"} == {k: v for k, v in kept.items() if k != "view"}


async def test_agents_with_store_objects_of_their_own_on_one_file_feed_each_event_once(tmp_path, http):
    """Two agents, each given its own ``SqliteSessionStore`` of one file: one event stream, so
    one connection to the feed gets every event once."""

    def app():  # built in the server's loop
        ai = Pausepoint()

        @ai.tool()
        async def ask(question: str) -> str:
            """Asks a person."""
            raise Interrupt({"question": question})

        for name, path in (("first", tmp_path / "shared.db"), ("second", tmp_path / "." / "shared.db")):
            model = ScriptedModel([[tool_call("ask", {"question": "?"})]] * 4)
            ai.define_agent(name=name, model=model, tools=[ask], store=SqliteSessionStore(str(path)))
        return create_app(ai, auth=BearerTokens({"alice-token": "alice"}), feed_interval=0.05)

    with serve_in_thread(app) as url:
        events: list = []
        connected = asyncio.Event()
        reader = asyncio.create_task(read_events(http, url + "/v1/feed", ALICE, 4, events, connected))
        await asyncio.wait_for(connected.wait(), 10)
        sessions = []
        for agent in ("first", "second"):
            reply = await http.post(f"{url}/v1/agents/{agent}/sessions", json={"message": "go"}, headers=ALICE)
            sessions.append(reply.json()["session_id"])
        await asyncio.wait_for(reader, 10)
        assert [(name, data["session_id"]) for name, data in events] == [
            ("pause", sessions[0]),
            ("turn_end", sessions[0]),
            ("pause", sessions[1]),
            ("turn_end", sessions[1]),
        ]


async def test_a_feed_whose_token_is_no_longer_accepted_ends_with_an_error_and_sends_nothing_more(tmp_path, http):
    """The credentials are checked again while the feed is open (found by a probe: an expired
    JWT kept receiving its tenant's pauses for as long as the connection stayed up)."""
    revoked: set[str] = set()

    def tokens(request) -> str | None:  # an Authenticator: alice's token, until it is revoked
        token = request.headers.get("authorization", "").removeprefix("Bearer ")
        if token in revoked:
            raise Unauthenticated("the token was revoked")
        return "alice" if token == "alice-token" else None

    path = tmp_path / "feed.db"
    with serve_in_thread(lambda: create_app(asking_app(path)[0], auth=tokens, feed_interval=0.05)) as url:
        seen: list = []
        connected = asyncio.Event()
        reader = asyncio.create_task(read_events(http, url + "/v1/feed", ALICE, 10, seen, connected))
        await asyncio.wait_for(connected.wait(), 10)
        await http.post(url + "/v1/agents/ops/sessions", json={"message": "first"}, headers=ALICE)
        for _ in range(200):  # its pause and its turn's end
            if [name for name, _ in seen] == ["pause", "turn_end"]:
                break
            await asyncio.sleep(0.05)
        revoked.add("alice-token")
        await asyncio.sleep(1.2)  # past the second a check of the credentials holds for
        _, elsewhere = asking_app(path)  # another process on the store: alice's session pauses there
        await elsewhere.chat(principal="alice").send("second")
        await asyncio.wait_for(reader, 10)  # the stream ended
    assert [name for name, _ in seen] == ["pause", "turn_end", "error"]
    assert seen[-1][1]["error"]["code"] == "unauthenticated"


async def test_a_feed_whose_store_fails_ends_with_the_stores_error_and_resumes_from_its_last_id(tmp_path, http):
    """The store fails while a feed is open (its events table gone, as a database restarted
    without it): the stream ends with an ``error`` event holding the 503's body, not a cut
    connection and a traceback (found by a probe); once the store is back, a reconnect with the
    last id it got gets exactly what came since."""

    path = tmp_path / "feed.db"
    tokens = BearerTokens({"alice-token": "alice"})
    with serve_in_thread(lambda: create_app(asking_app(path)[0], auth=tokens, feed_interval=0.05)) as url:
        async with FeedReader(url, ALICE) as feed:
            await http.post(url + "/v1/agents/ops/sessions", json={"message": "first"}, headers=ALICE)
            await feed.wait_for(2)  # its pause and its turn's end
            with contextlib.closing(sqlite3.connect(path)) as db:
                db.execute("ALTER TABLE pausepoint_events RENAME TO held_aside")  # the store loses its events
                db.commit()
                await feed.ended(10)  # the server ended the stream
                ended = feed.events
                db.execute("ALTER TABLE held_aside RENAME TO pausepoint_events")  # the store is back
                db.commit()
        assert [name for _, name, _ in ended] == ["pause", "turn_end", "error"]
        assert ended[-1][2]["error"]["code"] == "store_error"
        _, elsewhere = asking_app(path)  # another process on the store: a second pause
        await elsewhere.chat(principal="alice").send("second")
        async with FeedReader(url, ALICE, last_event_id=ended[1][0]) as again:
            missed = await again.wait_for(2, 10)
        assert [name for _, name, _ in missed] == ["pause", "turn_end"]
        assert missed[0][2]["session_id"] != ended[0][2]["session_id"]


async def test_a_session_made_again_under_its_id_by_someone_else_feeds_its_new_owner_not_the_old(tmp_path, http):
    """Another process deletes alice's session and bob makes a new one under the same id: its
    events go to bob's feed, not to alice's (found by a probe: the feed judged them by the owner
    it had read first for that id); alice's later events, and her feed read again from her first
    event's id, pass over bob's."""
    path = tmp_path / "feed.db"
    ai, _ = banking.build(SqliteSessionStore(path))
    with serve_in_thread(lambda: create_app(ai, auth=BearerTokens(TOKENS), feed_interval=0.05)) as url:
        sessions = url + "/v1/agents/bankingAgent/sessions/"
        async with FeedReader(url, ALICE) as alices, FeedReader(url, BOB) as bobs:
            sent = await http.post(sessions + "conv-1/messages", json={"message": "Transfer $5 to a."}, headers=ALICE)
            assert sent.is_success
            await alices.wait_for(2)
            elsewhere = SqliteSessionStore(path)  # an admin's script, in a process of its own
            assert await elsewhere.delete("conv-1")
            await elsewhere.close()
            sent = await http.post(sessions + "conv-1/messages", json={"message": "Transfer $9 to b."}, headers=BOB)
            assert sent.is_success
            bobs_events = await bobs.wait_for(2)
            sent = await http.post(sessions + "conv-2/messages", json={"message": "Transfer $7 to c."}, headers=ALICE)
            assert sent.is_success
            alices_events = await alices.wait_for(4)  # after bob's, in the store's order
            async with FeedReader(url, ALICE, last_event_id=alices.events[0][0]) as again:
                replayed = await again.wait_for(3)
    assert [(name, data["owner"]) for _, name, data in bobs_events] == [("pause", "bob"), ("turn_end", "bob")]
    assert [(data["session_id"], data["owner"]) for _, _, data in alices_events] == [
        ("conv-1", "alice"), ("conv-1", "alice"), ("conv-2", "alice"), ("conv-2", "alice")
    ]  # fmt: skip
    assert [data["owner"] for _, _, data in replayed] == ["alice"] * 3


async def test_idle_feeds_ask_the_store_once_for_all_of_them(tmp_path, http):
    """Many open feeds, nothing happening: the store is asked for news once for all of them, not
    once per feed (found by a probe: 500 idle feeds took a sixth of a core, 2,000 more than half),
    and each still gets the event that comes."""
    asked: list[float] = []

    class Counted(SqliteSessionStore):  # the real store; its waits for news are counted
        async def wait_for_events(self, after: int, max_wait: float) -> None:
            asked.append(max_wait)
            await super().wait_for_events(after, max_wait)

    def app():
        ai = Pausepoint()

        @ai.tool()
        async def ask(question: str) -> str:
            """Asks a person."""
            raise Interrupt({"question": question})

        model = ScriptedModel([[tool_call("ask", {"question": "?"})]])
        ai.define_agent(name="ops", model=model, tools=[ask], store=Counted(tmp_path / "idle.db"))
        return create_app(ai, auth=BearerTokens({"alice-token": "alice"}), feed_interval=0.5, expiry_interval=None)

    with serve_in_thread(app) as url:
        readers, seen = [], [[] for _ in range(20)]
        connected = [asyncio.Event() for _ in range(20)]
        for i in range(20):
            readers.append(asyncio.create_task(read_events(http, url + "/v1/feed", ALICE, 1, seen[i], connected[i])))
        await asyncio.wait_for(asyncio.gather(*(c.wait() for c in connected)), 10)
        before = len(asked)
        await asyncio.sleep(2.0)  # twenty feeds, idle
        idle = len(asked) - before
        await http.post(url + "/v1/agents/ops/sessions", json={"message": "go"}, headers=ALICE)
        await asyncio.wait_for(asyncio.gather(*readers), 10)
    assert idle <= 10, idle  # about one wait each half second, for all twenty (not twenty each)
    assert all([name for name, _ in s] == ["pause"] for s in seen)


async def test_a_head_request_for_the_feed_answers_its_head_and_ends(served, http):
    """HEAD says what the feed is and ends (found by a probe: it held the connection open with
    no body until the client gave up); without a token it is refused as a GET is."""
    reply = await asyncio.wait_for(http.head(served.bank + "/v1/feed", headers=ALICE), 10)
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/event-stream")
    refused = await asyncio.wait_for(http.head(served.bank + "/v1/feed"), 10)
    assert refused.status_code == 401


async def test_many_feeds_cost_the_store_what_one_does(tmp_path):
    """Every connection read the store for every event, and the session's summary too: 1,500
    feeds made each event 1,500 queries and every turn on the server 30 times slower (found by a
    probe). Woken together, the followers share one read of each page, one summary of each
    session and one body of each event."""
    counted = {"read_events": 0, "get_summary": 0}

    class Counted(SqliteSessionStore):
        async def read_events(self, after: int = 0, limit: int = 100):  # type: ignore[no-untyped-def]
            counted["read_events"] += 1
            return await super().read_events(after, limit)

        async def get_summary(self, session_id: str):  # type: ignore[no-untyped-def]
            counted["get_summary"] += 1
            return await super().get_summary(session_id)

    ai = Pausepoint()

    @ai.tool()
    async def pay(amount: int) -> str:
        """Pay."""
        raise Interrupt({"amount": amount})

    ai.define_agent(name="a", model=ScriptedModel([[tool_call("pay", {"amount": 5})]]), tools=[pay],
                    store=Counted(tmp_path / "s.db"))  # fmt: skip
    feeds = 40
    with serve_in_thread(lambda: create_app(ai, auth=BearerTokens({"alice-token": "alice"}), feed_interval=0.2)) as url:
        async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=feeds + 5)) as http:
            got: list[list[Any]] = [[] for _ in range(feeds)]
            connected = [asyncio.Event() for _ in range(feeds)]
            readers = [
                asyncio.create_task(read_events(http, url + "/v1/feed", ALICE, 1, got[i], connected[i]))
                for i in range(feeds)
            ]
            await asyncio.gather(*(c.wait() for c in connected))
            before = dict(counted)
            reply = await http.post(url + "/v1/agents/a/sessions", json={"message": "pay"}, headers=ALICE)
            assert reply.json()["finish_reason"] == "interrupted"
            await asyncio.wait_for(asyncio.gather(*readers), 30)
    assert all(events[0][0] == "pause" for events in got)
    assert counted["get_summary"] - before["get_summary"] <= 3  # the send's own, and one for the feeds
    assert counted["read_events"] - before["read_events"] <= 5, counted  # not one for each of the 40


async def test_a_follower_leaving_during_a_shared_read_stops_no_other(tmp_path):
    """The read of a page is shared by the followers asking for it at once: it belongs to none of
    them, so one whose client is gone (its task cancelled) leaves the others theirs."""
    from pausepoint.server._watch import StoreWatch

    gate = asyncio.Event()

    class Slow(SqliteSessionStore):
        async def read_events(self, after: int = 0, limit: int = 100):  # type: ignore[no-untyped-def]
            await gate.wait()
            return await super().read_events(after, limit)

    store = Slow(tmp_path / "s.db")
    watch = StoreWatch(store, 0.2)
    leaving, staying = (asyncio.create_task(watch.read(0, 10)) for _ in range(2))
    await asyncio.sleep(0.05)  # both wait on the one read
    leaving.cancel()
    await asyncio.sleep(0)
    gate.set()
    assert await asyncio.wait_for(staying, 5) == []
    await store.close()
