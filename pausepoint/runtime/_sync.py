"""``SyncChat``: a chat driven without ``await`` — for notebooks, scripts and synchronous code.

``asyncio.run`` cannot be called where an event loop already runs in the thread (a Jupyter
cell), and a fresh loop per call would break what lives on a loop between calls: the agent's
per-session locks, a store's connections (asyncpg, redis), a provider's client, a streamed or
detached turn still running in the background. So every synchronous call runs on one event
loop that pausepoint keeps for the process, in a daemon thread of its own, and the caller's
thread waits for the result. That works the same whether or not a loop runs in the caller's
thread (the notebook's loop simply waits with it), and everything the synchronous calls touch
stays on that one loop from call to call.

Drive one agent either synchronously or with ``await``, not both at once from two loops: the
agent's session cache and the stores' connections belong to one loop at a time.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import threading
from collections.abc import Awaitable, Coroutine, Iterator, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ..content._messages import Message, Part
from ..session._grants import Grant, GrantInfo
from ..session._interrupts import AuditEntry, PendingInterrupt, ToolResponse, ToolRestart
from ..session._response import AgentResponse
from ..turn._streaming import TurnChunk, TurnStream
from ._detach import TurnStatus

if TYPE_CHECKING:
    from ._chat import Chat

__all__ = ["SyncChat", "SyncTurnStream", "run_sync"]

T = TypeVar("T")


class _Portal:
    """One event loop in a daemon thread, started on first use (and again in a forked child)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = 0

    def loop(self) -> asyncio.AbstractEventLoop:
        with self._guard:
            alive = self._thread is not None and self._thread.is_alive() and self._pid == os.getpid()
            if not alive or self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()
                thread = threading.Thread(target=self._serve, args=(loop, ready), name="pausepoint-sync", daemon=True)
                thread.start()
                ready.wait()
                self._loop, self._thread, self._pid = loop, thread, os.getpid()
            return self._loop

    @staticmethod
    def _serve(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        loop.run_forever()

    def in_loop_thread(self) -> bool:
        return self._thread is not None and threading.current_thread() is self._thread

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        if self.in_loop_thread():
            coroutine.close()
            raise RuntimeError(
                "a synchronous pausepoint call cannot be made from code running on pausepoint's own "
                "event loop (an async tool, say): await the async method instead"
            )
        future: Future[T] = asyncio.run_coroutine_threadsafe(coroutine, self.loop())
        try:
            return future.result()
        except KeyboardInterrupt:  # Ctrl+C (a notebook's "interrupt"): stop the call, as a cancelled await would
            future.cancel()
            raise


_PORTAL = _Portal()


def run_sync(awaitable: Awaitable[T]) -> T:
    """Run ``awaitable`` to completion on pausepoint's event loop and return its result.

    Works where an event loop already runs in this thread (a notebook cell) and where none
    does; raises what the awaitable raises. Everything run this way shares one loop, so state
    kept between calls (a store's connections, a turn running in the background) stays usable.
    Raises ``RuntimeError`` when called from code running on that loop itself (await instead).
    """

    if inspect.iscoroutine(awaitable):  # run as it is (closed unawaited if refused)
        return _PORTAL.run(cast("Coroutine[Any, Any, T]", awaitable))

    async def wrapper() -> T:
        return await awaitable

    return _PORTAL.run(wrapper())


class SyncChat:
    """A ``Chat`` without ``await``: the same calls, arguments, results and errors, blocking.

    Get one with ``agent.chat().sync`` (or ``chat.sync`` for an existing chat). Each call runs
    the chat's async method on pausepoint's event loop (see ``run_sync``) and returns its
    result; every error the async method raises is raised here, unchanged. ``detach`` has no
    twin: ``run_sync(chat.detach(...))`` starts one, and its ``DetachedTurn`` is awaited the
    same way (``run_sync(turn.wait())``).
    """

    def __init__(self, chat: Chat) -> None:
        #: the async chat this one drives (same session)
        self.chat = chat

    def __repr__(self) -> str:
        return f"<SyncChat {self.chat.agent.name} session={self.chat.session_id}>"

    @property
    def session_id(self) -> str:
        """The session's id (``Chat.session_id``)."""
        return self.chat.session_id

    def send(
        self, message: str | Message | Sequence[Part], *, principal: str | None = None, via: str = "python"
    ) -> AgentResponse:
        """``Chat.send``, blocking: the user message is sent and the turn runs until it answers or pauses."""
        return _PORTAL.run(self.chat.send(message, principal=principal, via=via))

    def resume(
        self,
        *,
        respond: Sequence[ToolResponse] = (),
        restart: Sequence[ToolRestart] = (),
        metadata: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        principal: str | None = None,
        via: str = "python",
    ) -> AgentResponse:
        """``Chat.resume``, blocking: answer paused calls (refusals raise ``ResumeRefused`` subclasses)."""
        return _PORTAL.run(
            self.chat.resume(
                respond=respond,
                restart=restart,
                metadata=metadata,
                idempotency_key=idempotency_key,
                principal=principal,
                via=via,
            )
        )

    def send_stream(
        self, message: str | Message | Sequence[Part], *, principal: str | None = None, via: str = "python"
    ) -> SyncTurnStream:
        """``Chat.send_stream``, blocking: iterate the returned stream for chunks; ``.response()`` for the outcome."""

        async def start() -> TurnStream:
            return self.chat.send_stream(message, principal=principal, via=via)

        return SyncTurnStream(_PORTAL.run(start()))

    def resume_stream(
        self,
        *,
        respond: Sequence[ToolResponse] = (),
        restart: Sequence[ToolRestart] = (),
        metadata: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        principal: str | None = None,
        via: str = "python",
    ) -> SyncTurnStream:
        """``Chat.resume_stream``, blocking (see ``send_stream``)."""

        async def start() -> TurnStream:
            return self.chat.resume_stream(
                respond=respond,
                restart=restart,
                metadata=metadata,
                idempotency_key=idempotency_key,
                principal=principal,
                via=via,
            )

        return SyncTurnStream(_PORTAL.run(start()))

    def approve(
        self,
        ref: str,
        *,
        replace_input: Any = ...,
        grant: Grant | None = None,
        pause_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        principal: str | None = None,
        via: str = "python",
    ) -> AgentResponse:
        """``Chat.approve``, blocking: approve the paused call ``ref`` as the console does, in one call."""
        return _PORTAL.run(
            self.chat.approve(
                ref,
                replace_input=replace_input,
                grant=grant,
                pause_id=pause_id,
                metadata=metadata,
                idempotency_key=idempotency_key,
                principal=principal,
                via=via,
            )
        )

    def approve_stream(
        self,
        ref: str,
        *,
        replace_input: Any = ...,
        grant: Grant | None = None,
        pause_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        principal: str | None = None,
        via: str = "python",
    ) -> SyncTurnStream:
        """``Chat.approve_stream``, blocking (see ``send_stream``)."""

        async def start() -> TurnStream:
            return self.chat.approve_stream(
                ref,
                replace_input=replace_input,
                grant=grant,
                pause_id=pause_id,
                metadata=metadata,
                idempotency_key=idempotency_key,
                principal=principal,
                via=via,
            )

        return SyncTurnStream(_PORTAL.run(start()))

    def cancel_pending(self, reason: str, *, principal: str | None = None, via: str = "python") -> AgentResponse:
        """``Chat.cancel_pending``, blocking: resolve every paused call as cancelled."""
        return _PORTAL.run(self.chat.cancel_pending(reason, principal=principal, via=via))

    def abort(self, *, principal: str | None = None, via: str = "python") -> TurnStatus | None:
        """``Chat.abort``, blocking: stop the session's detached turn; its status before the call."""
        return _PORTAL.run(self.chat.abort(principal=principal, via=via))

    def settle_expired(self) -> AgentResponse | None:
        """``Chat.settle_expired``, blocking: resolve this session's expired pauses by the expiry policy."""
        return _PORTAL.run(self.chat.settle_expired())

    def interrupts(self) -> list[PendingInterrupt]:
        """``Chat.interrupts``, blocking: the calls paused now."""
        return _PORTAL.run(self.chat.interrupts())

    def grants(self) -> list[GrantInfo]:
        """``Chat.grants``, blocking: the grants given in this session."""
        return _PORTAL.run(self.chat.grants())

    def revoke_grant(
        self, grant_id: str, *, reason: str = "", principal: str | None = None, via: str = "python"
    ) -> GrantInfo:
        """``Chat.revoke_grant``, blocking: the grant approves nothing more; returns it as it now stands."""
        return _PORTAL.run(self.chat.revoke_grant(grant_id, reason=reason, principal=principal, via=via))

    def history(self) -> list[Message]:
        """``Chat.history``, blocking: the conversation as the model sees it."""
        return _PORTAL.run(self.chat.history())

    def audit_trail(self) -> list[AuditEntry]:
        """``Chat.audit_trail``, blocking: every answer given and every user message sent."""
        return _PORTAL.run(self.chat.audit_trail())

    def last_response(self) -> AgentResponse | None:
        """``Chat.last_response``, blocking: the latest call's response, rebuilt from the log."""
        return _PORTAL.run(self.chat.last_response())


class SyncTurnStream:
    """A streamed turn read without ``await``: iterate it for its chunks; ``response()`` gives the outcome.

    As with ``TurnStream``, the turn runs to its end (on pausepoint's loop) whether or not the
    chunks are read; a turn that fails raises its error from the iteration and from ``response()``.
    """

    def __init__(self, stream: TurnStream) -> None:
        self._stream = stream

    def __iter__(self) -> Iterator[TurnChunk]:
        return self

    def __next__(self) -> TurnChunk:
        async def step() -> TurnChunk | None:
            try:
                return await self._stream.__anext__()
            except StopAsyncIteration:
                return None

        chunk = _PORTAL.run(step())
        if chunk is None:
            raise StopIteration
        return chunk

    def response(self) -> AgentResponse:
        """The turn's response, once it ended (reading the chunks is not required)."""

        async def wait() -> AgentResponse:
            return await self._stream.response

        return _PORTAL.run(wait())
