"""pausepoint's HTTP server: an ASGI app (Starlette) serving a ``Pausepoint``'s agents.

``create_app(ai, auth=BearerTokens({...}))`` gives the app: the agent endpoint in Genkit's wire
protocol (``POST /agents/{agent}``, ``/getSnapshot``, ``/abort``), the REST API for chats and
approvals (``/v1/...``, described at ``/openapi.json``) and an SSE feed of pauses and answers
(``/v1/feed``). Install with ``pip install 'pausepoint[server]'``.
"""

from ._app import create_app
from ._auth import AccessPolicy, Authenticator, BearerTokens, OwnerPolicy
from ._limits import Limits

__all__ = ["AccessPolicy", "Authenticator", "BearerTokens", "Limits", "OwnerPolicy", "create_app"]
