"""Running pausepoint's coroutines without ``await``: one event loop, kept for the process in a
daemon thread of its own (the portal), that every blocking call runs on.

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
import atexit
import contextlib
import functools
import inspect
import os
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from concurrent.futures import Future
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar, cast

from ..session._response import AgentResponse
from ..turn._streaming import TurnChunk, TurnStream

__all__ = ["SyncTurnStream", "blocking", "blocking_stream", "run_sync"]

T = TypeVar("T")
P = ParamSpec("P")
A = TypeVar("A")
A_co = TypeVar("A_co", covariant=True)

_STOP_SECONDS = 5.0  # how long the exit waits for cancelled calls to record their end


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
                atexit.register(self._stop, loop, os.getpid())
            return self._loop

    @staticmethod
    def _stop(loop: asyncio.AbstractEventLoop, pid: int) -> None:
        """At the interpreter's exit: cancel what still runs on the loop (a detached turn, a turn
        streamed to a consumer that stopped reading) and give it a few seconds to record how it
        was cut short, as ``asyncio.run`` does for its own tasks — a daemon thread would
        otherwise stop mid-call, leaving its session waiting ``abandon_after`` for it. Nothing
        in a process forked from the one whose loop it is: the loop's thread is not there (the
        child waited out the seconds for it)."""
        if pid != os.getpid() or loop.is_closed() or not loop.is_running():
            return

        async def cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                # Not one cancelled already (a call stopped by Ctrl+C, ``run`` below): it is
                # recording how it was cut short, and a second cancel would cut that write off
                # (found by a probe: its session then waited ``abandon_after`` with no turn end).
                if not task.cancelling():
                    task.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=_STOP_SECONDS)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(cancel_all(), loop).result(_STOP_SECONDS + 1)

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


class Wraps(Protocol[A_co]):
    """A blocking twin of an async object: what it wraps."""

    @property
    def wrapped(self) -> A_co: ...


def blocking(verb: Callable[Concatenate[A, P], Awaitable[T]]) -> Callable[Concatenate[Wraps[A], P], T]:
    """The blocking twin of the async method ``verb``: the same parameters, result and errors,
    run on the portal's loop (for a class whose ``wrapped`` is an object ``verb`` belongs to)."""

    def run(self: Wraps[A], /, *args: P.args, **kwargs: P.kwargs) -> T:
        async def call() -> T:
            return await verb(self.wrapped, *args, **kwargs)

        return _PORTAL.run(call())

    functools.update_wrapper(run, verb)  # its name, docstring and signature
    return run


def blocking_stream(
    verb: Callable[Concatenate[A, P], TurnStream],
) -> Callable[Concatenate[Wraps[A], P], SyncTurnStream]:
    """The blocking twin of a streamed verb: the stream started on the portal's loop, read
    without ``await`` (``SyncTurnStream``)."""

    def run(self: Wraps[A], /, *args: P.args, **kwargs: P.kwargs) -> SyncTurnStream:
        async def start() -> TurnStream:
            return verb(self.wrapped, *args, **kwargs)

        return SyncTurnStream(_PORTAL.run(start()))

    functools.update_wrapper(run, verb)  # its name and parameters
    # What it returns is a SyncTurnStream, read without await: said so to inspect, typing and the
    # reference docs (in a copy of the annotations: update_wrapper shares verb's own dict).
    run.__annotations__ = {**verb.__annotations__, "return": SyncTurnStream}
    run.__signature__ = inspect.signature(verb).replace(return_annotation=SyncTurnStream)  # type: ignore[attr-defined]
    run.__doc__ = (
        f"``{verb.__name__}`` without ``await``: returns a ``SyncTurnStream`` — iterate it for the "
        "turn's chunks; ``stream.response()`` gives its outcome, once it ended (reading the chunks "
        f"is not required). Arguments and errors are ``{verb.__qualname__}``'s."
    )
    return run


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

    @property
    def stream(self) -> SyncTurnStream:
        """The chunks (Genkit's ``turn.stream``): iterating this object is the same."""
        return self

    def abort(self) -> None:
        """Stop listening: the chunks end here, and the turn goes on (``TurnStream.abort``)."""
        _PORTAL.run(self._stream.abort())
