"""pausepoint's HTTP server: an ASGI app (Starlette) serving a ``Pausepoint``'s agents.

``create_app(ai, auth=BearerTokens({...}))`` gives the app: the agent endpoint in Genkit's wire
protocol (``POST /agents/{agent}``, ``/getSnapshot``, ``/abort``), the REST API for chats and
approvals (``/v1/...``, described at ``/openapi.json``) and an SSE feed of pauses and answers
(``/v1/feed``), health and metrics routes, and a ``WebhookSender`` draining the stores' outbox
to the app's webhooks. Install with ``pip install 'pausepoint[server]'``.
"""

from ._app import create_app
from ._auth import AccessPolicy, Authenticator, BearerTokens, OwnerPolicy
from ._limits import Limits
from ._webhooks import WebhookSender

__all__ = ["AccessPolicy", "Authenticator", "BearerTokens", "Limits", "OwnerPolicy", "WebhookSender", "create_app"]
