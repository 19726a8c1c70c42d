"""One verb surface: ``pausepoint.client``'s ``RemoteChat`` / ``RemoteAgent`` over real HTTP, a
local ``Chat`` and its ``chat.sync`` refuse the same misuse with the same class, words and
details, at the same moment (found by a probe: the client raised pydantic's and ``quote``'s own
errors, other classes without details, "no such route" for a ref holding a slash, and checked
a streamed verb's arguments at the call where a local chat checked them when its stream was
read; a new remote chat had no session id; a negative ``limit`` listed differently per store)."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from examples import banking
from pausepoint import PendingInterrupt, SyncTurnStream, TurnStream
from pausepoint.client import Client
from pausepoint.errors import InvalidRequest, NotFound, PausepointError, SessionNotFound
from pausepoint.stores import InMemorySessionStore, SqliteSessionStore

Said = tuple[type[BaseException], str | None, str, dict[str, Any]]


async def refusal(call: Awaitable[Any]) -> BaseException:
    """What ``call`` raises (it must raise)."""
    try:
        await call
    except Exception as exc:
        return exc
    raise AssertionError("not refused")


def said(error: BaseException, *named: str) -> Said:
    """``error`` as a caller tells it apart — class, code, words, details — with the ids in
    ``named`` (a session's, a pause's ref: each surface has its own) written as placeholders."""

    def plain(text: str) -> str:
        for number, name in enumerate(named):
            text = text.replace(name, f"<id{number}>")
        return text

    details = getattr(error, "details", {})
    return (
        type(error),
        getattr(error, "code", None),
        plain(str(error)),
        {key: plain(value) if isinstance(value, str) else value for key, value in details.items()},
    )


async def paused_chats(client: Client) -> tuple[Any, PendingInterrupt, Any, PendingInterrupt]:
    """A local chat and a remote one, each with a transfer paused for approval."""
    _, agent = banking.build(InMemorySessionStore(), [])
    here, there = agent.chat(), client.agent("bankingAgent").chat()
    [here_pause] = (await here.send("Transfer $1 to x.")).interrupts
    [there_pause] = (await there.send("Transfer $1 to x.")).interrupts
    return here, here_pause, there, there_pause


#: bad arguments a local chat refuses before anything is recorded
MISUSES: list[tuple[str, Callable[[Any, PendingInterrupt], Awaitable[Any]]]] = [
    ("cancel_pending(None)", lambda chat, pause: chat.cancel_pending(None)),
    ("revoke_grant(5)", lambda chat, pause: chat.revoke_grant(5)),
    ("revoke_grant(reason=5)", lambda chat, pause: chat.revoke_grant("g", reason=5)),
    ("resume(metadata='x')", lambda c, p: c.resume(respond=[p.respond({"approved": True})], metadata="x")),
    ("resume(respond=[deny(5)])", lambda chat, pause: chat.resume(respond=[pause.deny(5)])),
    ("resume(respond='x')", lambda chat, pause: chat.resume(respond="x")),
    ("approve(metadata='x')", lambda chat, pause: chat.approve(pause.ref, metadata="x")),
    ("approve(pause_id=5)", lambda chat, pause: chat.approve(pause.ref, pause_id=5)),
    ("approve(grant='x')", lambda chat, pause: chat.approve(pause.ref, grant="x")),
    ("approve(key='é')", lambda chat, pause: chat.approve(pause.ref, idempotency_key="é")),
    ("send(5)", lambda chat, pause: chat.send(5)),
    ("send(key='é')", lambda chat, pause: chat.send("hi", idempotency_key="é")),
]


async def test_bad_arguments_are_refused_by_the_client_as_by_a_local_chat(served):
    async with Client(served.bank, token="alice-token") as client:
        here, here_pause, there, there_pause = await paused_chats(client)
        for label, misuse in MISUSES:
            at_home = said(await refusal(misuse(here, here_pause)), here.session_id, here_pause.ref)
            remotely = said(await refusal(misuse(there, there_pause)), there.session_id, there_pause.ref)
            assert remotely == at_home, label
            assert issubclass(at_home[0], PausepointError) or label == "resume(respond='x')", label
            assert "pydantic" not in at_home[2], label
        assert [e.decision for e in await there.audit_trail()] == ["message"]  # nothing recorded
        assert [p.ref for p in await there.interrupts()] == [there_pause.ref]


async def test_a_ref_or_grant_id_no_path_can_carry_is_refused_as_by_a_local_chat(served):
    """Not "no such route": ``UnknownInterrupt`` / ``GrantNotFound`` naming it, as a local chat
    says; and on a chat whose session is not made, ``SessionNotFound`` first, as there."""
    async with Client(served.bank, token="alice-token") as client:
        here, _, there, there_pause = await paused_chats(client)
        calls = [
            *(lambda chat, ref=ref: chat.approve(ref) for ref in ("a/b", "..", ".", "")),
            *(lambda chat, ref=ref: chat.revoke_grant(ref) for ref in ("a/b", "..", "\ud800")),
        ]
        _, agent = banking.build(InMemorySessionStore(), [])
        new_here, new_there = agent.chat(), client.agent("bankingAgent").chat()
        for call in calls:
            at_home = said(await refusal(call(here)), here.session_id)
            assert said(await refusal(call(there)), there.session_id) == at_home
            assert at_home[1] in ("unknown_interrupt", "grant_not_found")
            at_home = said(await refusal(call(new_here)), new_here.session_id)
            assert said(await refusal(call(new_there)), new_there.session_id) == at_home
            assert at_home[0] is SessionNotFound
        assert [p.ref for p in await there.interrupts()] == [there_pause.ref]


async def test_a_new_remote_chat_names_its_session_when_made_as_a_local_chat_does(served):
    _, agent = banking.build(InMemorySessionStore(), [])
    async with Client(served.bank, token="alice-token") as client:
        here, there = agent.chat(), client.agent("bankingAgent").chat()
        named = there.session_id
        assert isinstance(named, str) and len(named) == len(here.session_id) == 32
        verbs: list[Callable[[Any], Awaitable[Any]]] = [
            lambda chat: chat.resume(),
            lambda chat: chat.cancel_pending("x"),
            lambda chat: chat.approve("0123456789abcdef01234567"),
            lambda chat: chat.revoke_grant("g1"),
        ]
        for verb in verbs:
            at_home = said(await refusal(verb(here)), here.session_id)
            assert said(await refusal(verb(there)), there.session_id) == at_home
            assert at_home[0] is SessionNotFound and at_home[3] == {"session_id": "<id0>"}
        assert await there.history() == []  # it reads as empty until a send makes it
        assert (await there.send("hello")).session_id == named == there.session_id


#: streamed verbs with an argument no session takes: refused when called, before any stream
STREAMED: list[tuple[str, Callable[[Any, PendingInterrupt], Any]]] = [
    ("send_stream(5)", lambda chat, pause: chat.send_stream(5)),
    ("resume_stream(respond='x')", lambda chat, pause: chat.resume_stream(respond="x")),
    ("resume_stream(metadata='x')", lambda c, p: c.resume_stream(respond=[p.respond({"approved": 1})], metadata="x")),
    ("resume_stream(key='é')", lambda c, p: c.resume_stream(respond=[p.respond({"ok": 1})], idempotency_key="é")),
    ("approve_stream(grant='x')", lambda chat, pause: chat.approve_stream(pause.ref, grant="x")),
    ("approve_stream(pause_id=5)", lambda chat, pause: chat.approve_stream(pause.ref, pause_id=5)),
    ("approve_stream(metadata=[])", lambda chat, pause: chat.approve_stream(pause.ref, metadata=[])),
]


async def refused_when_called(start: Callable[[Any, PendingInterrupt], Any], chat: Any, pause: Any) -> BaseException:
    """What ``start(chat, pause)`` raises as it is called; a stream it returns instead is read to
    its end (nothing left running) and the test fails."""
    try:
        stream = start(chat, pause)
    except Exception as exc:
        return exc
    with contextlib.suppress(Exception):
        if isinstance(stream, TurnStream):
            await stream.response
        elif isinstance(stream, SyncTurnStream):
            stream.response()
    raise AssertionError("a stream was started: the refusal waited for its reading")


async def test_streamed_verbs_refuse_bad_arguments_when_called_on_every_surface(served):
    async with Client(served.bank, token="alice-token") as client:
        here, here_pause, there, there_pause = await paused_chats(client)
        _, sync_agent = banking.build(InMemorySessionStore(), [])  # driven from pausepoint's loop alone
        blocking = sync_agent.chat().sync
        [blocking_pause] = blocking.send("Transfer $1 to x.").interrupts
        for label, start in STREAMED:
            at_home = said(await refused_when_called(start, here, here_pause), here.session_id, here_pause.ref)
            remotely = await refused_when_called(start, there, there_pause)
            without_await = await refused_when_called(start, blocking, blocking_pause)
            assert said(remotely, there.session_id, there_pause.ref) == at_home, label
            assert said(without_await, blocking.session_id, blocking_pause.ref) == at_home, label
        assert [e.decision for e in await there.audit_trail()] == ["message"]


async def test_list_sessions_refuses_what_stores_read_apart_in_the_same_words_everywhere(served, tmp_path: Path):
    """A negative limit was read by one store as "all but the last", by another as no limit; a
    fraction crashed both. Every surface now refuses it, in one sentence, before a store is asked;
    the client sends what passes as an encoded query."""
    stores = [InMemorySessionStore(), SqliteSessionStore(tmp_path / "s.db")]
    agents = [banking.build(store, [])[1] for store in stores]
    for agent in agents:
        await agent.chat().send("hello")
    async with Client(served.bank, token="alice-token") as client:
        remote = client.agent("bankingAgent")
        paused = await remote.chat().send("Transfer $2 to y.")
        await remote.chat().send("hello")
        for bad in ({"limit": -1}, {"offset": -1}, {"limit": 2.5}, {"limit": True}, {"has_pending": "yes"}):
            refusals = [await refusal(lister.list_sessions(**bad)) for lister in (*agents, remote)]
            assert [said(r) for r in refusals] == [said(refusals[0])] * 3, bad
            assert isinstance(refusals[0], InvalidRequest), bad
        with pytest.raises(InvalidRequest):
            await remote.list_sessions(limit="5&pending=false")  # type: ignore[arg-type]
        with pytest.raises(NotFound):  # the name is one path segment, never a query of its own
            await client.agent("bankingAgent?pending=false").list_sessions()
        assert [s.session_id for s in await remote.list_sessions(has_pending=True)] == [paused.session_id]
        assert paused.session_id not in [s.session_id for s in await remote.list_sessions(has_pending=False)]
        for empty in ({"limit": 0}, {"offset": 2_000_000_000}):  # a page that holds nothing, everywhere
            assert [await lister.list_sessions(**empty) for lister in (*agents, remote)] == [[], [], []], empty
    await stores[1].close()
