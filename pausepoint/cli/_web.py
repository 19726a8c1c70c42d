"""Building the HTTP app for ``demo`` and ``serve``: the server with its console, and the banner."""

from __future__ import annotations

import os
import sys
import webbrowser
from typing import Any

from ..runtime._app import Pausepoint
from ._errors import CliError

__all__ = ["base_url", "http_app", "need_mcp", "open_browser"]


def base_url(host: str, port: int) -> str:
    """The URL the banner shows and the browser opens: an IPv6 address in brackets
    (``http://[::1]:8000``), as a URL names one (found by a probe: ``http://::1:8000``)."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _server() -> Any:
    try:
        from .. import server
    except ImportError as exc:
        raise CliError(f"serving needs the server extra: pip install 'pausepoint[server]' ({exc})") from exc
    return server


def http_app(
    ai: Pausepoint,
    tokens: dict[str, str],
    *,
    console: bool = True,
    metrics: bool = False,
    operators: list[str] | None = None,
    approvers: set[str] | None = None,
    mcp: bool = False,
) -> Any:
    """``create_app(ai)`` with bearer ``tokens`` (token -> principal), with or without the console
    and metrics; ``operators`` may see webhook deliveries; ``approvers`` see every session and
    answer its pauses (``OwnerPolicy(approvers)``); ``mcp`` serves the agents over MCP at /mcp."""
    server = _server()
    if metrics:
        try:
            import prometheus_client  # noqa: F401
        except ImportError as exc:
            raise CliError("--metrics needs prometheus-client: pip install 'pausepoint[metrics]'") from exc
    if mcp:
        need_mcp()
    return server.create_app(
        ai,
        auth=server.BearerTokens(tokens),
        policy=server.OwnerPolicy(approvers or set()),
        console=console,
        metrics=metrics,
        operators=operators or (),
        mcp=mcp,
    )


def need_mcp() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise CliError("--mcp needs the MCP SDK: pip install 'pausepoint[mcp]'") from exc


def open_browser(url: str) -> bool:
    """Open ``url`` in a graphical browser; False (nothing opened) where there is none.

    Without a display, Python's ``webbrowser`` would start a text browser in this very
    terminal, so on Linux it is used only when a display is set.
    """
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        return False
    try:
        return webbrowser.open(url)
    except webbrowser.Error:
        return False
