"""The web console: its static files at ``/console/`` and the redirect from ``/`` to them.

The console loads only its own files and talks only to this server (its ``Content-Security-
Policy``) — and, when it signs people in through an OpenID Connect provider, to that provider's
token endpoint, where it exchanges the code (the one origin added to ``connect-src``). It signs
in with a bearer token, so its files need none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from ..errors import IdentityProviderUnavailable
from ._oidc import OidcBearer

__all__ = ["CONSOLE", "ConsoleFiles", "home"]

#: where the console's files are
CONSOLE = Path(__file__).resolve().parent.parent / "console"
_CSP = (
    "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
_HEADERS = {
    "Content-Security-Policy": _CSP,
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
    console's security headers (its policy naming the provider's token endpoint, when the app
    signs people in through one: ``Service.sign_in``)."""

    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers.update(_HEADERS)
        return response

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        service = getattr(getattr(scope.get("app"), "state", None), "pausepoint", None)
        provider: OidcBearer | None = getattr(service, "sign_in", None)
        if provider is not None and "content-security-policy" in response.headers:
            origin = await _token_origin(provider)
            response.headers["Content-Security-Policy"] = f"{_CSP}; connect-src 'self' {origin}"
        return response


async def _token_origin(provider: OidcBearer) -> str:
    """The origin of the provider's token endpoint (the issuer's while it cannot be reached:
    the console cannot sign in through it then anyway)."""
    try:
        settings = await provider.sign_in_settings()
        url = settings["token_endpoint"] if settings else provider.settings.issuer
    except IdentityProviderUnavailable:
        url = provider.settings.issuer
    parts = urlsplit(url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "")
