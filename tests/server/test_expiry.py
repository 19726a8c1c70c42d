"""The server settles expired pauses by itself: an inbox never keeps a pause nobody can answer."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import BaseModel
from starlette.applications import Starlette
from starlette.routing import Mount

from pausepoint import AgentFinishReason, ModelRequest, Pausepoint
from pausepoint.client import Client
from pausepoint.errors import InterruptExpired
from pausepoint.server import BearerTokens, create_app
from pausepoint.testing import ScriptedModel, Step, tool_call
from tests.server.harness import TOKENS, serve_in_thread


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


class Question(BaseModel):
    question: str


def expiring_app(clock: Clock) -> Starlette:
    ai = Pausepoint(clock=clock)
    ask = ai.define_interrupt(name="ask", description="Ask a person.", input_schema=Question, ttl=timedelta(minutes=5))
    model = ScriptedModel([[tool_call("ask", {"question": "deploy?"})], "Nobody answered, so I did not deploy."])
    ai.define_agent(name="deployer", model=model, tools=[ask])
    # Mounted, as users do: sub-app lifespans do not run, so the sweep starts with the first request.
    app = create_app(ai, auth=BearerTokens(TOKENS), expiry_interval=0.05)
    return Starlette(routes=[Mount("/pp", app)])


async def test_an_expired_pause_is_settled_without_anyone_touching_the_session():
    clock = Clock()
    with serve_in_thread(lambda: expiring_app(clock)) as url:
        async with Client(url + "/pp", token="alice-token") as client:
            agent = client.agent("deployer")
            chat = agent.chat()
            res = await chat.send("Deploy the release.")
            assert res.finish_reason == AgentFinishReason.INTERRUPTED
            assert [s.session_id for s in await agent.list_sessions(has_pending=True)] == [res.session_id]

            clock.now += timedelta(minutes=6)
            for _ in range(200):  # the sweep runs every 0.05 s; allow it up to 10 s on a loaded machine
                if not await chat.interrupts():
                    break
                await asyncio.sleep(0.05)
            assert await chat.interrupts() == []
            assert await agent.list_sessions(has_pending=True) == []
            sent, entry = await chat.audit_trail()
            assert (sent.decision, sent.principal, sent.via) == ("message", "alice", "http")
            assert (entry.decision, entry.via) == ("expire", "expiry")
            last = await chat.last_response()
            assert last is not None and last.text == "Nobody answered, so I did not deploy."
            # Answered after the sweep settled it: refused as expired, as it was before the sweep ran.
            with pytest.raises(InterruptExpired, match="expired at 2026-05-01T12:05:00"):
                await chat.resume(respond=[res.interrupts[0].respond("yes")])


async def test_the_sweep_can_be_turned_off():
    clock = Clock()

    def app() -> Starlette:
        ai = Pausepoint(clock=clock)
        ask = ai.define_interrupt(name="ask", description="Ask.", input_schema=Question, ttl=timedelta(minutes=5))
        ai.define_agent(name="deployer", model=ScriptedModel([[tool_call("ask", {"question": "?"})]]), tools=[ask])
        return create_app(ai, auth=BearerTokens(TOKENS), expiry_interval=None)

    with serve_in_thread(app) as url:
        async with Client(url, token="alice-token") as client:
            chat = client.agent("deployer").chat()
            await chat.send("go")
            clock.now += timedelta(hours=1)
            await asyncio.sleep(0.3)
            assert len(await chat.interrupts()) == 1  # expired, but settling is someone else's job


async def test_a_pause_is_settled_when_it_runs_out_not_at_the_next_sweep():
    """Between a pause running out and the sweep, every surface listed a pause no answer could
    reach any more (found by two probes, for up to ``expiry_interval``, 30 s by default). The
    sweep now also wakes when the next pause runs out — one recorded after it looked too."""
    ai = Pausepoint()
    ask = ai.define_interrupt(name="ask", description="Ask.", input_schema=Question, ttl=timedelta(seconds=1))
    model = ScriptedModel([[tool_call("ask", {"question": "deploy?"})], "Not deployed."])
    ai.define_agent(name="deployer", model=model, tools=[ask])
    with serve_in_thread(lambda: create_app(ai, auth=BearerTokens(TOKENS), expiry_interval=30)) as url:
        async with Client(url, token="alice-token") as client:
            await client.agents()  # the sweep starts, and finds nothing due
            await asyncio.sleep(0.5)
            chat = client.agent("deployer").chat()
            assert (await chat.send("Deploy the release.")).finish_reason == AgentFinishReason.INTERRUPTED
            for _ in range(100):  # ten seconds at most: a third of the interval
                if not await chat.interrupts():
                    break
                await asyncio.sleep(0.1)
            assert await chat.interrupts() == []
            assert [e.decision for e in await chat.audit_trail()] == ["message", "expire"]
            assert (await chat.last_response()).text == "Not deployed."


async def test_a_session_that_cannot_be_settled_holds_up_no_other_sessions_or_agents():
    """One agent's store fails every write (and another agent's expiry policy raises): the sweep
    logs that session and settles every other one, by each agent's policy (found by a probe: one
    agent's raising policy stopped settling for the whole server)."""
    from pausepoint.errors import StoreError
    from pausepoint.stores import InMemorySessionStore

    class Broken(InMemorySessionStore):
        failing = False

        async def append(self, *args, **kwargs):
            if self.failing:
                raise StoreError("the database is unreachable")
            return await super().append(*args, **kwargs)

    clock, broken = Clock(), Broken()
    ai = Pausepoint(clock=clock)
    ask = ai.define_interrupt(name="ask", description="Ask a person.", input_schema=Question, ttl=timedelta(minutes=5))

    def raising(interrupt):
        raise RuntimeError("policy down")

    for name, options in (("first", {"store": broken}), ("raising", {"on_expiry": raising}), ("last", {})):
        model = ScriptedModel([[tool_call("ask", {"question": "deploy?"})], "Settled."])
        ai.define_agent(name=name, model=model, tools=[ask], **options)

    async def pending(client: Client) -> list[int]:
        names = ("first", "raising", "last")
        return [len(await client.agent(name).list_sessions(has_pending=True)) for name in names]

    with serve_in_thread(lambda: create_app(ai, auth=BearerTokens(TOKENS), expiry_interval=0.05)) as url:
        async with Client(url, token="alice-token") as client:
            chats = [client.agent(name).chat() for name in ("first", "raising", "last")]
            for chat in chats:
                await chat.send("Deploy.")
            broken.failing = True
            clock.now += timedelta(minutes=6)
            for _ in range(200):  # the sweep runs every 0.05 s; allow it up to 10 s on a loaded machine
                if await pending(client) == [1, 0, 0]:
                    break
                await asyncio.sleep(0.05)
            assert await pending(client) == [1, 0, 0]
            told = await chats[1].last_response()
            assert told is not None and told.text == "Settled."
            broken.failing = False
            for _ in range(200):  # the failing session is tried again, and settled once it can be
                if await pending(client) == [0, 0, 0]:
                    break
                await asyncio.sleep(0.05)
            assert await pending(client) == [0, 0, 0]


async def test_an_answer_on_the_genkit_wire_to_a_pause_the_sweep_settled_says_it_expired():
    """``remote_agent`` answers with the snapshot id it holds, which the sweep's turn made old:
    the answer is refused as expired, as by session id and on REST (found by a probe:
    ``stale_snapshot``, which says nothing of what happened)."""
    import httpx

    clock = Clock()
    with serve_in_thread(lambda: expiring_app(clock)) as url:
        wire = url + "/pp/agents/deployer"
        async with httpx.AsyncClient(timeout=30, headers={"Authorization": "Bearer alice-token"}) as http:
            asked = {"data": {"message": {"role": "user", "content": [{"text": "Deploy the release."}]}}}
            paused = (await http.post(wire, json=asked)).json()["result"]
            ref = paused["message"]["content"][0]["toolRequest"]["ref"]
            clock.now += timedelta(minutes=6)
            session = f"{url}/pp/v1/agents/deployer/sessions/{paused['sessionId']}/interrupts"
            for _ in range(200):  # the sweep runs every 0.05 s; allow it up to 10 s on a loaded machine
                if (await http.get(session)).json()["interrupts"] == []:
                    break
                await asyncio.sleep(0.05)
            answer = {"toolResponse": {"ref": ref, "name": "ask", "output": "yes"}}
            late = await http.post(
                wire, json={"data": {"resume": {"respond": [answer]}}, "init": {"snapshotId": paused["snapshotId"]}}
            )
    assert late.status_code == 409, late.text
    assert late.json()["error"]["code"] == "interrupt_expired" and "expired at 2026-05-01T12:05:00" in late.text


async def test_a_store_down_when_the_sweep_starts_does_not_stop_it(tmp_path):
    """Found by a probe: a store that did not answer yet when the sweep started (a database still
    starting, which ``serve`` supports) ended the sweep on its first read; expired pauses then
    waited for the next request to that server, and shutting it down failed with the error."""
    from pausepoint.errors import StoreError
    from pausepoint.stores import SqliteSessionStore

    class StartingStore(SqliteSessionStore):
        down = 2  # its first reads of the event log fail

        async def last_event(self) -> int:
            if self.down:
                self.down -= 1
                raise StoreError("the database is starting up")
            return await super().last_event()

    clock, path = Clock(), tmp_path / "sessions.db"

    def deployer(ai: Pausepoint, store: SqliteSessionStore) -> None:
        ask = ai.define_interrupt(name="ask", description="Ask.", input_schema=Question, ttl=timedelta(minutes=5))

        def script(request: ModelRequest) -> Step:  # the same in both processes: asks, then says it did not
            return "Not deployed." if request.messages[-1].role == "tool" else [tool_call("ask", {"question": "?"})]

        ai.define_agent(name="deployer", model=ScriptedModel(script), tools=[ask], store=store)

    def app() -> Starlette:
        ai = Pausepoint(clock=clock)
        deployer(ai, StartingStore(path))
        return create_app(ai, auth=BearerTokens(TOKENS), expiry_interval=0.05)

    elsewhere = Pausepoint(clock=clock)  # another process, writing to the same file
    deployer(elsewhere, SqliteSessionStore(path))
    with serve_in_thread(app) as url:
        async with Client(url, token="alice-token") as client:
            await client.agents()  # the one request: the sweep starts, on a store that does not answer yet
        chat = elsewhere.agents["deployer"].chat(principal="alice")
        assert (await chat.send("Deploy the release.")).finish_reason == AgentFinishReason.INTERRUPTED
        clock.now += timedelta(minutes=6)
        for _ in range(200):  # no request reaches the server meanwhile: its sweep alone settles it
            if not await chat.interrupts():
                break
            await asyncio.sleep(0.05)
        assert await chat.interrupts() == []
        assert [e.decision for e in await chat.audit_trail()] == ["message", "expire"]
