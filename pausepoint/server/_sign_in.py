"""How the console signs people in: ``GET /v1/console/sign-in``, and the provider it names.

With an ``OidcBearer`` whose ``console_client_id`` is set among the app's authenticators (the
``auth`` itself, or one of a ``FirstOf``), the console signs people in through that OpenID
Connect provider — authorization code with PKCE, as a public client: the browser holds no
secret, and exchanges the code at the provider's token endpoint itself. This route tells it
where (``OidcBearer.sign_in_settings``); without such an authenticator it says
``{"provider": null}`` and the console asks for a bearer token, as always. It needs no
credentials: the page asking is the one that has none yet.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ._auth import FirstOf
from ._oidc import OidcBearer
from ._replies import json_response
from ._routes import Operation, json_object, schema_ref
from ._service import service_of

__all__ = ["SIGN_IN", "console_provider", "sign_in"]

_TEXT = {"type": "string"}
_PROVIDER: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "what the console's 'Sign in with ...' names"},
        "issuer": _TEXT,
        "authorization_endpoint": _TEXT,
        "token_endpoint": {"type": "string", "description": "the browser posts the code here (CORS)"},
        "end_session_endpoint": {"type": ["string", "null"]},
        "client_id": {"type": "string", "description": "the console's public client (no secret)"},
        "scopes": {"type": "array", "items": _TEXT},
        "redirect_uri": {"type": ["string", "null"], "description": "null: the console's own address"},
        "audience": {
            "type": "array",
            "items": _TEXT,
            "description": "the console sends the API the token whose 'aud' holds one of these",
        },
    },
}

_PROVIDER["required"] = list(_PROVIDER["properties"])  # every one, null when it has no value

SIGN_IN: Operation[Any] = Operation(
    "How the console signs in: through this OpenID Connect provider (authorization code with PKCE), "
    "or with a bearer token when provider is null (no credentials needed)",
    responses={
        "200": {
            "description": "how to sign in",
            "content": {
                "application/json": {
                    "schema": json_object(provider={"anyOf": [_PROVIDER, {"type": "null"}]}),
                }
            },
        },
        "503": {
            "description": "the provider cannot be reached (identity_provider_unavailable)",
            "content": {"application/json": {"schema": schema_ref("Error")}},
        },
    },
    public=True,
)


async def sign_in(request: Request) -> Response:
    provider = service_of(request).sign_in
    settings = None if provider is None else await provider.sign_in_settings()
    reply = json_response({"provider": settings})
    reply.headers["Cache-Control"] = "no-store"
    return reply


def console_provider(auth: Any) -> OidcBearer | None:
    """The ``OidcBearer`` the console signs in through: ``auth`` itself, or the first among a
    ``FirstOf``'s authenticators (at any depth), whose ``console_client_id`` is set; else None."""
    if isinstance(auth, OidcBearer):
        return auth if auth.settings.console_client_id is not None else None
    if isinstance(auth, FirstOf):
        for inner in auth.authenticators:
            found = console_provider(inner)
            if found is not None:
                return found
    return None
