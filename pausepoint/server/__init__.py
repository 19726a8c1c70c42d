"""pausepoint's HTTP server: an ASGI app (Starlette) serving a ``Pausepoint``'s agents.

``create_app(ai, auth=BearerTokens({...}))`` gives the app: the agent endpoint in Genkit's wire
protocol (``POST /agents/{agent}``, ``/getSnapshot``, ``/abort``), the REST API for chats and
approvals (``/v1/...``, described at ``/openapi.json``) and an SSE feed of pauses and answers
(``/v1/feed``), health and metrics routes, and a ``WebhookSender`` draining the stores' outbox
to the app's webhooks. Install with ``pip install 'pausepoint[server]'``.

Who is calling: ``BearerTokens`` (fixed tokens), ``OidcBearer`` (single sign-on: JWTs from an
OpenID Connect provider, ``pausepoint[sso]``; with ``console_client_id``, the console signs
people in through that provider), or both with ``FirstOf``; what they may do: ``OwnerPolicy``
(owners and approvers, named or by their token's roles).
"""

from ._app import create_app
from ._auth import (
    AccessPolicy,
    Authenticator,
    BearerTokens,
    FirstOf,
    Identity,
    OwnerPolicy,
    current_identity,
    token_roles,
)
from ._limits import Limits
from ._oidc import OidcBearer, OidcSettings
from ._webhooks import WebhookSender

__all__ = [
    "AccessPolicy",
    "Authenticator",
    "BearerTokens",
    "FirstOf",
    "Identity",
    "Limits",
    "OidcBearer",
    "OidcSettings",
    "OwnerPolicy",
    "WebhookSender",
    "create_app",
    "current_identity",
    "token_roles",
]
