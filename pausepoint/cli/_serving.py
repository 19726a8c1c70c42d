"""Running an ASGI app with uvicorn on a socket of our own (so the URL is known before serving)."""

from __future__ import annotations

import argparse
import asyncio
import gc
import signal
import socket
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from ._errors import CliError
from ._http_guard import HEAD_BYTES

__all__ = [
    "guarded_protocol",
    "listen",
    "port_number",
    "run_event_loop",
    "serve",
    "serve_until_stopped",
    "tune_garbage_collector",
]

T = TypeVar("T")

# A server's collections of generation 1 between full ones (Python's default: 10).
_FULL_COLLECTION_EVERY = 100


def port_number(text: str) -> int:
    """``--port``'s type: a TCP port, 0 to 65535 (argparse reports anything else as bad usage)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port: use 1-65535, or 0 to pick a free one")
    return port


def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (0: a free port). Raises ``CliError`` if it is taken,
    or not a port (the OS would silently take it modulo 65536)."""
    if not 0 <= port <= 65535:
        raise CliError(f"{port} is not a port: use 1-65535, or 0 to pick a free one")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise CliError(f"cannot resolve host {host!r}: {exc}") from exc
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit it; without it every keep-alive reply waits for a delayed ACK.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise CliError(f"cannot listen on {host}:{port}: {exc.strerror} (pick another with --port)") from exc
    sock.listen(128)
    return sock


async def serve(app: Any, sock: socket.socket, on_ready: Callable[[], None], log_level: str = "warning") -> None:
    """Serve ``app`` on ``sock`` until SIGINT/SIGTERM; ``on_ready()`` runs once it accepts requests.

    Logging is set up by the caller (``_logging.configure``): uvicorn keeps its hands off it,
    and its access log (which prints query strings) stays off.
    """
    import uvicorn

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if not self.should_exit:
                on_ready()

    # No uvicorn access log: it writes each request's query string, and a token someone put in
    # a URL (``?token=...``) must never reach a log. (Credentials travel in the Authorization
    # header; pausepoint reads none from a query string; its own request log never writes one.)
    # A bounded request head, sent in time, and a body that keeps coming (``_http_guard``).
    config = uvicorn.Config(
        app,
        log_level=log_level,
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=3,
        http=guarded_protocol() or "auto",
        h11_max_incomplete_event_size=HEAD_BYTES,
    )
    tune_garbage_collector()
    await Server(config).serve(sockets=[sock])


def guarded_protocol() -> type[asyncio.Protocol] | None:
    """uvicorn's httptools protocol with ``_http_guard``'s limits, or None without httptools."""
    try:
        from ._guarded import GuardedProtocol
    except ImportError:  # no httptools: uvicorn's h11 (bounded by h11_max_incomplete_event_size)
        return None
    return GuardedProtocol


def tune_garbage_collector() -> None:
    """Set Python's garbage collector for a server, whose full collections pause the event loop
    for every object they walk (docs/server.md, "Latency: the garbage collector").

    - What is alive now (modules, the app, its agents: all of it lives as long as the server) is
      frozen: full collections no longer walk it.
    - A full collection runs at most once per 100 collections of generation 1 instead of 10.
      Young garbage is still collected as often; cycles that lived long enough to reach the
      oldest generation wait longer.

    The figures measured with each are in that section of the docs.
    """
    gc.collect()  # what is garbage now would never be collected once frozen
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, _FULL_COLLECTION_EVERY)


def run_event_loop(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` on uvloop when it is installed (the ``server`` extra brings it), as uvicorn's
    own ``loop="auto"`` would; on asyncio's loop otherwise. uvloop saves the server about a twentieth
    of its CPU per approval cycle (benchmarks/server.py, S1 against ``--loop asyncio``)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)


def serve_until_stopped(app: Any, sock: socket.socket, on_ready: Callable[[], None], log_level: str = "warning") -> int:
    """Serve ``app`` on ``sock`` until Ctrl+C or SIGTERM, then close it; the exit status (0).

    uvicorn raises the signal that stopped it again once it has stopped serving, with the
    handler that was there before; SIGTERM's default would end the process there, before what
    the caller does after serving (sending the spans still waiting), and with status 143. So
    SIGTERM is taken here while serving: uvicorn handles it, and its echo is let go.
    """
    previous = signal.signal(signal.SIGTERM, lambda *_: None) if _main_thread() else None
    try:
        run_event_loop(serve(app, sock, on_ready, log_level))
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    print("stopped", flush=True)
    return 0


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()
