"""One benchmark server process: an ASGI app under uvicorn on a listening socket it inherited.

Both kinds of server the driver (``server.py``) starts use it: pausepoint's (``server.py
--serve``) and the reference's (``_genkit_server.py``, which runs under the genkit venv's Python
and imports this file by path), so it needs only the standard library and uvicorn. The process
prints ``ready`` once it accepts connections, serves until SIGTERM, then prints the line
``farewell()`` returns — what it counted, for the driver to read.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Coroutine
from typing import Any

__all__ = ["LOOPS", "loop_in_use", "run_on", "serve_inherited"]

LOOPS = ("auto", "asyncio", "uvloop")


def loop_in_use(loop: str) -> str:
    """The event loop ``loop`` names here: ``auto`` is uvloop when it is installed, as for
    ``pausepoint serve`` (and uvicorn's own default), and asyncio's loop otherwise."""
    if loop != "auto":
        return loop
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return "asyncio"
    return "uvloop"


def run_on(loop: str, main: Coroutine[Any, Any, None]) -> None:
    """Run ``main`` on the event loop ``loop`` names (one of ``LOOPS``)."""
    if loop_in_use(loop) == "uvloop":
        import uvloop

        uvloop.run(main)
    else:
        asyncio.run(main)


async def serve_inherited(app: Any, sock: socket.socket, farewell: Callable[[], str]) -> None:
    """Serve ``app`` on ``sock`` until SIGTERM (see the module docstring)."""
    import uvicorn

    class Server(uvicorn.Server):  # type: ignore[misc, unused-ignore]
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            print("ready", flush=True)

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            await super().shutdown(sockets)
            # Here, not after serve(): uvicorn re-raises the SIGTERM once serve() returns.
            print(farewell(), flush=True)

    config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False, backlog=2048)
    await Server(config).serve(sockets=[sock])
