"""The chat without ``await`` (``chat.sync``): outside any event loop, inside a running one in the
same thread (as a Jupyter cell runs), from other threads; the same results and errors as the
async API; and what lives on a loop between calls (a PostgreSQL pool, a streamed turn still
running) stays usable, because every synchronous call runs on one loop."""

from __future__ import annotations

import asyncio
import inspect
import subprocess
import sys
import threading
import typing
from pathlib import Path

import pytest

from pausepoint import (
    AgentFinishReason,
    Chat,
    Pausepoint,
    SyncChat,
    SyncTurnStream,
    ToolRunContext,
    TurnStream,
    run_sync,
)
from pausepoint.errors import NothingToResume, PendingInterrupts, UnknownInterrupt, UsageError
from pausepoint.stores import InMemorySessionStore, PostgresSessionStore, SessionStore, SqliteSessionStore
from pausepoint.testing import ScriptedModel, last_tool_results, tool_call

from .helpers import approvals_agent
from .stores.backends import PostgresBackend, service_url

STEPS = [[tool_call("ask", {"question": "pay 5?"})], [tool_call("pay", {"amount": 5})], "Paid 5."]


def approve_and_pay(chat: SyncChat, ledger: list[str]) -> None:
    """The whole pause → approve → tool → answer cycle, without an await."""
    res = chat.send("Pay 5, please.")
    assert res.finish_reason == AgentFinishReason.INTERRUPTED
    (pause,) = res.interrupts
    assert [p.ref for p in chat.interrupts()] == [pause.ref]
    res = chat.resume(respond=[pause.respond({"approved": True})], principal="alice")
    assert res.finish_reason == AgentFinishReason.STOP
    assert res.text == "Paid 5."
    assert ledger == ["pay:5"]
    assert chat.interrupts() == []
    assert [m.role for m in chat.history()] == ["user", "model", "tool", "model", "tool", "model"]
    assert [(e.decision, e.principal) for e in chat.audit_trail()] == [("message", None), ("respond", "alice")]
    last = chat.last_response()
    assert last is not None and last.text == "Paid 5."


def test_outside_an_event_loop(tmp_path: Path) -> None:
    ledger: list[str] = []
    agent, _ = approvals_agent(SqliteSessionStore(tmp_path / "s.db"), STEPS, ledger=ledger)
    chat = agent.chat().sync
    approve_and_pay(chat, ledger)
    # the session is the async chat's: the same id, readable with await as well
    again = agent.chat(session_id=chat.session_id)
    assert [m.role for m in asyncio.run(again.history())][-1] == "model"


async def test_inside_a_running_loop_in_the_same_thread(tmp_path: Path) -> None:
    """A Jupyter cell: code running in the thread whose event loop is running calls the sync API."""
    loop = asyncio.get_running_loop()
    pending = asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="cannot be called from a running event loop"):
        asyncio.run(pending)  # what the README's asyncio.run does in a notebook
    pending.close()
    ledger: list[str] = []
    agent, _ = approvals_agent(SqliteSessionStore(tmp_path / "s.db"), STEPS, ledger=ledger)
    approve_and_pay(agent.chat().sync, ledger)
    assert asyncio.get_running_loop() is loop  # the caller's loop is left as it was


def test_errors_are_the_async_apis(tmp_path: Path) -> None:
    ask = [tool_call("ask", {"question": "pay 5?"})]
    agent, _ = approvals_agent(SqliteSessionStore(tmp_path / "s.db"), [ask, ask])
    sync_chat = agent.chat().sync
    async_chat = agent.chat()
    sync_chat.send("Pay 5, please.")
    own = run_sync(async_chat.send("Pay 5, please.")).interrupts[0]
    foreign = sync_chat.interrupts()[0]  # a pause of another session: refused as unknown there

    with pytest.raises(UnknownInterrupt) as async_error:
        asyncio.run(async_chat.resume(respond=[foreign.respond({"approved": True})]))
    with pytest.raises(UnknownInterrupt) as sync_error:
        agent.chat(session_id=async_chat.session_id).sync.resume(respond=[foreign.respond({"approved": True})])
    assert sync_error.value.code == async_error.value.code == "unknown_interrupt"
    assert str(sync_error.value) == str(async_error.value)
    with pytest.raises(PendingInterrupts) as pending:
        sync_chat.send("And 6?")
    assert pending.value.code == "pending_interrupts"
    with pytest.raises(NothingToResume) as empty:  # a detached resume that answers nothing, as resume()
        run_sync(async_chat.detach())
    assert empty.value.code == "nothing_to_resume" and empty.value.details["refs"] == [own.ref]
    with pytest.raises(UsageError, match="not both"):
        run_sync(async_chat.detach("And 6?", respond=[foreign.respond({"approved": True})]))


async def test_state_on_the_loop_lasts_from_call_to_call(tmp_path: Path) -> None:
    """An asyncpg pool belongs to the loop that opened it: every sync call, from the main thread
    inside a running loop, outside one in another thread, uses the same pool."""
    backend = PostgresBackend(service_url("postgres"))
    store: SessionStore = PostgresSessionStore(backend.url, schema=backend.schema)
    try:
        ledger: list[str] = []
        agent, _ = approvals_agent(store, STEPS, ledger=ledger)
        chat = agent.chat().sync
        res = chat.send("Pay 5, please.")  # opens the pool, on pausepoint's loop

        answered: list[str] = []

        def elsewhere() -> None:  # a thread with no loop of its own
            answered.append(chat.resume(respond=[res.interrupts[0].respond({"approved": True})]).text)

        worker = threading.Thread(target=elsewhere)
        worker.start()
        await asyncio.to_thread(worker.join)
        assert answered == ["Paid 5."]
        assert ledger == ["pay:5"]
        assert [e.decision for e in chat.audit_trail()] == ["message", "respond"]
    finally:
        run_sync(store.close())
        await backend.cleanup()


def test_a_stream_read_in_part_finishes_on_the_loop(tmp_path: Path) -> None:
    """A streamed turn is a task on pausepoint's loop: it runs to its end between calls, whether
    or not its chunks are read, and the next call sees it recorded."""
    ledger: list[str] = []
    agent, _ = approvals_agent(
        SqliteSessionStore(tmp_path / "s.db"), [[tool_call("pay", {"amount": 7})], "Paid 7 in full."], ledger=ledger
    )
    chat = agent.chat().sync
    stream = chat.send_stream("Pay 7.")
    first = next(iter(stream))
    assert first.kind in ("tool_call_delta", "tool_request")
    response = stream.response()
    assert response.text == "Paid 7 in full."
    assert ledger == ["pay:7"]
    assert chat.last_response() == response


def test_a_sync_stream_has_the_async_streams_stream_and_abort(tmp_path: Path) -> None:
    """``turn.stream`` is the chunks, and ``abort()`` stops listening while the turn goes on."""
    ledger: list[str] = []
    agent, _ = approvals_agent(
        SqliteSessionStore(tmp_path / "s.db"), [[tool_call("pay", {"amount": 7})], "Paid 7 in full."], ledger=ledger
    )
    chat = agent.chat().sync
    turn = chat.send_stream("Pay 7.")
    assert turn.stream is turn
    next(iter(turn.stream))
    turn.abort()
    assert list(turn) == []  # nothing more is heard
    assert turn.response().text == "Paid 7 in full." and ledger == ["pay:7"]


def test_the_stream_yields_the_async_streams_chunks(tmp_path: Path) -> None:
    agent, _ = approvals_agent(SqliteSessionStore(tmp_path / "s.db"), STEPS)
    chat = agent.chat().sync
    chunks = list(chat.send_stream("Pay 5, please."))
    kinds = [c.kind for c in chunks]
    assert kinds[-1] == "turn_end"
    assert "interrupt" in kinds
    (pause,) = chat.interrupts()
    resumed = chat.resume_stream(respond=[pause.respond({"approved": True})])
    text = "".join(c.text for c in resumed if c.kind == "text")
    assert text == "Paid 5."
    assert resumed.response().text == "Paid 5."


def test_a_sync_call_on_pausepoints_own_loop_is_refused() -> None:
    """Blocking pausepoint's loop on itself would hang for ever: it is refused instead."""

    async def inner() -> None:
        run_sync(asyncio.sleep(0))

    with pytest.raises(RuntimeError, match="await the async method instead"):
        run_sync(inner())


def test_the_sync_chat_mirrors_the_async_chat() -> None:
    """Every call of ``Chat`` a caller makes without a background task has its blocking twin,
    with the same parameters."""
    skipped = {"detach", "sync"}
    public = {name for name, _ in inspect.getmembers(Chat) if not name.startswith("_")} - skipped - {"session_id"}
    methods = {name for name in public if callable(getattr(Chat, name))}
    assert methods <= set(dir(SyncChat))
    for name in methods:
        async_params = list(inspect.signature(getattr(Chat, name)).parameters.values())
        sync_params = list(inspect.signature(getattr(SyncChat, name)).parameters.values())
        assert [(p.name, p.kind, p.default) for p in sync_params] == [
            (p.name, p.kind, p.default) for p in async_params
        ], name
    # and its properties (found by a probe: agent and principal were missing)
    properties = {name for name in public if isinstance(inspect.getattr_static(Chat, name), property)}
    assert properties == {"agent", "principal"}
    assert all(isinstance(inspect.getattr_static(SyncChat, name), property) for name in properties)
    agent, _ = approvals_agent(InMemorySessionStore(), STEPS)
    chat = agent.chat(principal="alice")
    assert (chat.sync.agent, chat.sync.principal, chat.sync.session_id) == (agent, "alice", chat.session_id)


def test_the_sync_chats_streamed_verbs_say_they_return_a_sync_turn_stream() -> None:
    """Found by a probe: ``inspect`` (and so the reference docs) said a ``TurnStream`` whose
    ``response`` is awaited, where what comes back is a ``SyncTurnStream`` read with
    ``response()``. The async verbs keep their own."""
    for name in ("send_stream", "resume_stream", "approve_stream"):
        verb = getattr(SyncChat, name)
        assert inspect.signature(verb).return_annotation is SyncTurnStream, name
        assert typing.get_type_hints(verb)["return"] is SyncTurnStream, name
        said = verb.__doc__ or ""
        assert "``stream.response()``" in said and "``await stream.response``" not in said, name
        assert typing.get_type_hints(getattr(Chat, name))["return"] is TurnStream, name


def test_a_detached_turn_runs_on_between_calls(tmp_path: Path) -> None:
    """``detach`` has no blocking twin: ``run_sync`` starts one, and its turn runs on pausepoint's
    loop between calls until ``run_sync(turn.wait())`` gives its response."""
    ledger: list[str] = []
    agent, _ = approvals_agent(
        SqliteSessionStore(tmp_path / "s.db"), [[tool_call("pay", {"amount": 9})], "Paid 9."], ledger=ledger
    )
    chat = agent.chat()
    turn = run_sync(chat.detach("Pay 9."))
    response = run_sync(turn.wait())
    assert response.text == "Paid 9."
    assert ledger == ["pay:9"]
    assert chat.sync.last_response() == response


def test_a_process_forked_after_a_blocking_call_exits_without_waiting_for_its_parents_loop(tmp_path: Path) -> None:
    """Found by a probe: the exit hook of the blocking API's loop ran in a forked child too, and
    waited its five seconds (and one) for a loop whose thread the child does not have."""
    script = tmp_path / "fork.py"
    script.write_text(
        "import os, sys, time\n"
        "from pausepoint import run_sync\n"
        "async def one():\n"
        "    return 1\n"
        "run_sync(one())\n"  # the loop starts, and its exit hook is registered
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    sys.exit(0)\n"  # the child ends as a script does: exit hooks run
        "began = time.monotonic()\n"
        "os.waitpid(pid, 0)\n"
        "print(round(time.monotonic() - began, 1))\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=True)
    assert float(done.stdout) < 3.0, done.stdout  # the hook's wait is 5 s, then 1 s more for its result


def test_a_tool_that_sends_on_its_own_session_is_told_the_turn_holds_it_not_left_waiting(tmp_path):
    """Found by a probe: an async tool awaiting ``chat.send`` on its own session, or a plain one
    calling ``chat.sync.send``, waited for ever for the lock its own turn held (no error); from
    another process the same send is ``TurnInProgress`` at once. Here too now: the tool's error
    result names it, and the turn ends."""
    ai = Pausepoint()
    agents: dict[str, typing.Any] = {}

    @ai.tool()
    async def note_async(ctx: ToolRunContext) -> str:
        """Add a note to this conversation (await the async verb)."""
        return str((await agents["a"].chat(ctx.session_id).send("note")).text)

    @ai.tool()
    def note_sync(ctx: ToolRunContext) -> str:
        """Add a note to this conversation (the blocking verb, from a plain function)."""
        return str(agents["a"].chat(ctx.session_id).sync.send("note").text)

    def script(request: typing.Any) -> typing.Any:
        last = request.messages[-1]
        if last.role == "user":
            return [tool_call(last.text, {})] if last.text.startswith("note_") else "noted"
        return f"Done: {last_tool_results(request)}"

    store = SqliteSessionStore(tmp_path / "notes.db")
    agents["a"] = ai.define_agent(name="notes", model=ScriptedModel(script), tools=[note_async, note_sync], store=store)
    for which in ("note_async", "note_sync"):
        done: list[typing.Any] = []
        chat = agents["a"].chat().sync
        thread = threading.Thread(target=lambda c=chat, w=which, d=done: d.append(c.send(w)), daemon=True)
        thread.start()
        thread.join(30)
        assert done, f"{which}: still waiting after 30 s"
        assert done[0].finish_reason == AgentFinishReason.STOP
        assert "TurnInProgress: this call was made inside a turn of session" in done[0].text, done[0].text
