"""The web console: its static files at ``/console/`` and the redirect from ``/`` to them.

The console loads only its own files and talks only to this server (its ``Content-Security-
Policy``); it signs in with a bearer token, so its files need none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.staticfiles import StaticFiles

__all__ = ["CONSOLE", "ConsoleFiles", "home"]

#: where the console's files are
CONSOLE = Path(__file__).resolve().parent.parent / "console"
_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


async def home(request: Request) -> Response:
    # A path (where the app is mounted, then console/), never an absolute URL built from the
    # request's Host header: a forged Host cannot send a browser elsewhere.
    return RedirectResponse(request.scope.get("root_path", "") + "/console/")


class ConsoleFiles(StaticFiles):
    """The console's files (``ConsoleFiles(directory=CONSOLE, html=True)``), each with the
    console's security headers."""

    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers.update(_HEADERS)
        return response
