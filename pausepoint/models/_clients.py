"""One lifecycle for every provider's SDK client: made lazily, one per event loop, closed by ``aclose``.

An SDK's async client keeps connections that belong to the event loop that opened them: used
from another loop they fail or hang. A plugin may serve several loops in one process (an
``asyncio.run`` per script step, a notebook's loop and a loop run in another thread), so each
loop gets a client of its own, made on its first call. A client the caller gave is used on
every loop as it is, and never closed here: it is the caller's.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

__all__ = ["LoopClients"]

C = TypeVar("C")


class LoopClients(Generic[C]):
    """The SDK clients of one plugin: ``get()`` for the running loop, ``aclose()`` to close them.

    ``make()`` builds a client (and raises ``ModelAuthError`` when credentials are missing);
    ``close(client)`` releases its connections. ``given`` is a client of the caller's, used
    instead of making any.
    """

    def __init__(self, make: Callable[[], C], close: Callable[[C], Awaitable[None]], given: C | None = None) -> None:
        self._make = make
        self._close = close
        self._given = given
        self._spare: C | None = None
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, C] = weakref.WeakKeyDictionary()

    def prepare(self) -> C:
        """A client made now (or the given one), so that configuration errors surface at once;
        the first loop to call ``get()`` takes it (a client opens connections only when first used)."""
        if self._given is not None:
            return self._given
        if self._spare is None:
            self._spare = self._make()
        return self._spare

    def get(self) -> C:
        """The client for the running event loop, made on first use."""
        if self._given is not None:
            return self._given
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client, self._spare = (self._spare, None) if self._spare is not None else (self._make(), None)
            self._clients[loop] = client
        return client

    async def aclose(self) -> None:
        """Close every client made here: the running loop's at once, another running loop's on
        that loop (waiting for it); clients of loops that no longer run are dropped (their
        connections went with their loop). The plugin makes new clients if used again."""
        clients, self._clients = list(self._clients.items()), weakref.WeakKeyDictionary()
        self._spare = None
        current = asyncio.get_running_loop()
        for loop, client in clients:
            if loop is current:
                await self._close(client)
            elif loop.is_running() and not loop.is_closed():
                await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(_closing(self._close, client), loop))


async def _closing(close: Callable[[C], Awaitable[None]], client: C) -> None:
    await close(client)
