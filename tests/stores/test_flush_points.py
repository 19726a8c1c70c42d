"""When a turn writes, on every backend: as few appends as the promises allow, durable where needed.

The banking cycle (send → pause → approve → transfer → final text) makes four appends: the send's
end (durable: the caller is told of the pause), the resume's claim (not durable: only the model
runs before the next durable append), the model's call of ``transfer_money`` (durable, before the
tool starts: it must not run twice), and the end (durable). The store here is the real backend;
``Recorder`` only notes what each append carried, and the tool looks at those notes when it runs.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import BaseModel

from pausepoint import AgentFinishReason, Interrupt, Pausepoint, ToolRunContext
from pausepoint.errors import ModelError
from pausepoint.stores import SessionStore
from pausepoint.testing import ScriptedModel, tool_call

from .backends import Backend


class Ask(BaseModel):
    what: str = "pay"


@dataclass
class Append:
    durable: bool
    kinds: list[str]
    version: int  # the session's version after it
    session: str = ""


@dataclass
class Recorder:
    """Notes each append of a real store: whether it was asked to be durable, what it held."""

    store: SessionStore
    appends: list[Append] = field(default_factory=list)

    def __post_init__(self) -> None:
        inner = self.store.append

        async def append(session_id: str, expected: int, entries: Any, summary: Any, events: Any = (), *,
                         durable: bool = True) -> int:  # fmt: skip
            version = await inner(session_id, expected, entries, summary, events, durable=durable)
            self.appends.append(Append(durable, [e.kind for e in entries], version, session_id))
            return version

        self.store.append = append  # type: ignore[method-assign]

    def durable_version(self) -> int:
        """The session's version as of its latest durable append (what survives any crash)."""
        return max((a.version for a in self.appends if a.durable), default=0)


async def test_a_cycle_makes_four_appends_three_of_them_durable(backend: Backend):
    from examples.banking import build

    store = await backend.open()
    recorder = Recorder(store)
    ledger: list[str] = []
    _, agent = build(store, ledger)
    try:
        chat = agent.chat()
        res = await chat.send("Transfer $500 to savings.")
        assert res.finish_reason == AgentFinishReason.INTERRUPTED
        res = await chat.resume(respond=[res.interrupts[0].respond({"approved": True})])
        assert res.text == "Transferred $500 to savings." and ledger == ["500->savings"]
        assert [(a.durable, a.kinds) for a in recorder.appends] == [
            # userApproval's pause offers a grant (issue 13), so it is an approval_paused; the yes
            # records the grant with the answer, and the grant's decision to let transfer_money
            # run is durable with the model's message, before the tool runs.
            (True, ["session_started", "message", "message", "approval_paused", "turn_ended"]),
            (False, ["call_answered", "grant_added"]),
            (True, ["message", "call_decided"]),
            (True, ["call_completed", "message", "turn_ended"]),
        ]
    finally:
        await store.close()


class HandsOn:
    """A store of one's own that wraps a real one and hands every argument of ``append`` on
    (``*args, **kwargs``), as a metrics or tracing wrapper would."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.durable: list[bool] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def append(self, *args: Any, **kwargs: Any) -> int:
        self.durable.append(kwargs.get("durable", True))
        return await self.store.append(*args, **kwargs)


async def test_a_store_that_hands_appends_on_gets_the_events_and_hints_of_the_one_it_wraps(backend: Backend):
    """Found by a probe: a wrapper whose ``append`` takes ``(*args, **kwargs)`` was taken for a
    store of the protocol before events, so it got no events (no webhook or feed heard of a
    pause) and every append was durable."""
    from examples.banking import build

    store = await backend.open()
    wrapper = HandsOn(store)
    recorder = Recorder(store)
    try:
        for through in (store, wrapper):
            _, agent = build(through, [])  # type: ignore[arg-type]
            chat = agent.chat()
            res = await chat.send("Transfer $500 to savings.")
            await chat.resume(respond=[res.interrupts[0].respond({"approved": True})])
        events = [(event.session_id, event.kind) for event in await store.read_events(0)]
        plain, wrapped = ([kind for session, kind in events if session == chat_id] for chat_id in sessions(recorder))
        assert "pause" in plain and wrapped == plain
        assert wrapper.durable == [a.durable for a in recorder.appends[:4]] == [True, False, True, True]
    finally:
        await store.close()


def sessions(recorder: Recorder) -> list[str]:
    """The sessions ``recorder``'s appends went to, in the order they began."""
    return list(dict.fromkeys(a.session for a in recorder.appends))


async def test_a_tool_that_must_not_run_twice_starts_only_once_its_call_is_durable(backend: Backend):
    store = await backend.open()
    recorder = Recorder(store)
    ai = Pausepoint()
    seen: list[tuple[int, int]] = []  # (durable version when the tool started, the call's version)

    @ai.tool()
    async def pay(amount: int) -> str:
        """Pay (not idempotent)."""
        log = await store.read(chat.session_id)
        assert log is not None
        asked = max(e.version for e in log.entries if e.kind == "message")
        seen.append((recorder.durable_version(), asked))
        return f"paid {amount}"

    @ai.tool(idempotent=True)
    async def quote(amount: int) -> str:
        """A price (idempotent)."""
        return f"{amount} is fine"

    approve = ai.define_interrupt(name="approve", description="Ask first.", input_schema=Ask)
    model = ScriptedModel(
        [
            [tool_call("approve", {})],
            [tool_call("quote", {"amount": 3})],  # idempotent: no append before it runs
            [tool_call("pay", {"amount": 3})],
            [tool_call("pay", {"amount": 4}), tool_call("quote", {"amount": 4})],
            "done",
        ]
    )
    agent = ai.define_agent(name="payer", model=model, tools=[approve, pay, quote], store=store)
    try:
        chat = agent.chat()
        res = await chat.send("pay twice")
        res = await chat.resume(respond=[res.interrupts[0].respond({"ok": True})])
        assert res.text == "done"
        assert len(seen) == 2 and all(durable >= asked for durable, asked in seen), seen
        claim = recorder.appends[1]
        assert (claim.durable, claim.kinds) == (False, ["call_answered"])
        # The quote's result rode with the append made before the first payment.
        assert recorder.appends[2].kinds == ["message", "call_completed", "message"]
        assert len(recorder.appends) == 5
    finally:
        await store.close()


async def test_a_restart_of_a_tool_that_must_not_run_twice_claims_durably(backend: Backend):
    store = await backend.open()
    recorder = Recorder(store)
    ai = Pausepoint()
    runs: list[int] = []

    @ai.tool()
    async def wire(amount: int, ctx: ToolRunContext) -> str:
        """Wire money after a check (not idempotent)."""
        if not (ctx.resumed_metadata or {}).get("ok"):
            raise Interrupt({"why": "check"})
        runs.append(recorder.durable_version())
        return "wired"

    model = ScriptedModel([[tool_call("wire", {"amount": 1})], "ok"])
    agent = ai.define_agent(name="wirer", model=model, tools=[wire], store=store)
    try:
        chat = agent.chat()
        res = await chat.send("wire")
        (pause,) = res.interrupts
        before = len(recorder.appends)
        res = await chat.resume(restart=[pause.restart(resumed_metadata={"ok": True})])
        assert res.text == "ok" and len(runs) == 1
        claim = recorder.appends[before]
        assert claim.kinds == ["call_answered"] and claim.durable
        assert runs[0] >= claim.version  # the restart ran once its claim was durable
    finally:
        await store.close()


async def test_results_of_a_batch_are_kept_when_the_next_model_call_fails(backend: Backend):
    """A batch's results ride with the next append; a model failure writes them, and the turn
    ends ``failed`` (the call's response says so: the tool ran, and sending again would run it
    again)."""
    store = await backend.open()
    ai = Pausepoint()
    made: list[int] = []

    @ai.tool()
    async def book(seat: int) -> str:
        """Book a seat (not idempotent)."""
        made.append(seat)
        return f"seat {seat}"

    model = ScriptedModel([[tool_call("book", {"seat": 7})], ModelError("the provider is down"), "booked"])
    agent = ai.define_agent(name="booker", model=model, tools=[book], store=store)
    try:
        chat = agent.chat()
        failed = await chat.send("book it")
        assert (failed.finish_reason, failed.error) == (AgentFinishReason.FAILED, "ModelError: the provider is down")
        # Another process (a fresh agent on the same store) sees the result and goes on.
        other = Pausepoint().define_agent(name="booker", model=model, tools=[book], store=store)
        history = await other.chat(chat.session_id).history()
        assert [m.role for m in history] == ["user", "model", "tool"]
        assert history[-1].tool_responses[0].output == "seat 7"
        res = await other.chat(chat.session_id).resume()
        assert (res.finish_reason, res.text, made) == (AgentFinishReason.STOP, "booked", [7])
    finally:
        await store.close()


async def test_results_of_a_batch_are_kept_when_the_next_model_call_is_cancelled(backend: Backend):
    store = await backend.open()
    ai = Pausepoint()
    calling = asyncio.Event()

    @ai.tool(idempotent=True)
    async def look(item: str) -> str:
        """Look something up."""
        return f"{item}: in stock"

    first = ScriptedModel(lambda request: [tool_call("look", {"item": "tea"})])

    async def generate(request: Any, on_chunk: Any = None) -> Any:
        if request.messages[-1].role == "tool":
            calling.set()
            await asyncio.Event().wait()  # the model call after the batch never returns
        return await first.generate(request, on_chunk)

    model = ai.define_model(name="hanging", fn=generate)
    agent = ai.define_agent(name="looker", model=model, tools=[look], store=store)
    try:
        chat = agent.chat()
        task = asyncio.ensure_future(chat.send("tea?"))
        await calling.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        other = Pausepoint().define_agent(name="looker", model=model, tools=[look], store=store)
        history = await other.chat(chat.session_id).history()
        assert [m.role for m in history] == ["user", "model", "tool"]
        assert history[-1].tool_responses[0].output == "tea: in stock"
    finally:
        await store.close()
