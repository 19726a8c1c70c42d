"""The route table: every route the app serves, in one list.

Each row names its method, path and handler (a module-level function of the request, in the
room of its concept) and how ``/openapi.json`` describes it (the ``Operation`` beside the
handler). The app's routes (``_routes.starlette_routes``) and the OpenAPI document
(``_openapi.openapi_document``) are both made from this list; the rows that run turns are
``hot``: matched first. The order is the document's.
"""

from __future__ import annotations

from typing import Any

from . import _agent_routes as wire
from . import _answers as answers
from . import _grants as grants
from . import _link_routes as link_routes
from . import _messages as messages
from . import _ops as ops
from . import _reads as reads
from ._console import CONSOLE, ConsoleFiles, home
from ._feed_route import FEED, feed
from ._openapi import openapi
from ._routes import Endpoint
from ._sign_in import SIGN_IN, sign_in
from ._slack_actions import ACTIONS, actions
from ._validate import VALIDATE, validate

__all__ = ["route_table"]


def route_table(
    *, mcp: Any = None, metrics: bool = False, console: bool = True, links: bool = False, slack: bool = False
) -> list[Endpoint]:
    """The app's routes. ``mcp``: the MCP endpoint served at ``/mcp`` (an ASGI app), if any;
    ``metrics``: serve ``/metrics``; ``console``: serve the console, say how it signs in
    (``/v1/console/sign-in``) and redirect ``/`` to it; ``links``: serve approval links
    (``/v1/links/{token}``); ``slack``: take Slack's button callbacks (``/v1/slack/actions``)."""
    table = [
        Endpoint("GET", "/openapi.json", openapi),
        Endpoint("GET", "/v1/agents", reads.agents, reads.AGENTS),
        Endpoint("GET", "/v1/agents/{agent}", reads.agent_info, reads.AGENT),
        Endpoint("GET", "/v1/agents/{agent}/sessions", reads.list_sessions, reads.SESSIONS),
        Endpoint("POST", "/v1/agents/{agent}/sessions", messages.create, messages.CREATE, hot=True),
        Endpoint("GET", "/v1/agents/{agent}/sessions/{session_id}", reads.read, reads.SESSION),
        Endpoint("POST", "/v1/agents/{agent}/sessions/{session_id}/messages", messages.send, messages.SEND, hot=True),
        Endpoint("GET", "/v1/agents/{agent}/sessions/{session_id}/interrupts", reads.interrupts, reads.INTERRUPTS),
        Endpoint("GET", "/v1/agents/{agent}/sessions/{session_id}/audit", reads.audit, reads.AUDIT),
        Endpoint("GET", "/v1/agents/{agent}/sessions/{session_id}/history", reads.history, reads.HISTORY),
        Endpoint("POST", "/v1/agents/{agent}/sessions/{session_id}/resume", answers.resume, answers.RESUME, hot=True),
        Endpoint("POST", "/v1/agents/{agent}/sessions/{session_id}/cancel", answers.cancel, answers.CANCEL),
        Endpoint(
            "POST",
            "/v1/agents/{agent}/sessions/{session_id}/interrupts/{ref}/{action:str}",
            answers.answer,
            answers.ANSWERS,
            hot=True,
        ),
        Endpoint("GET", "/v1/agents/{agent}/sessions/{session_id}/grants", grants.grants, grants.LIST),
        Endpoint(
            "POST", "/v1/agents/{agent}/sessions/{session_id}/grants/{grant_id}/revoke", grants.revoke, grants.REVOKE
        ),
        # A tool's name may hold "/" (an MCP server's tool, say): the rest of the path but the verb.
        Endpoint("POST", "/v1/agents/{agent}/tools/{tool:path}/validate", validate, VALIDATE),
        Endpoint("GET", "/v1/feed", feed, FEED),
    ]
    if console:
        table.append(Endpoint("GET", "/v1/console/sign-in", sign_in, SIGN_IN))
    if links:
        # the rest of the path: a token a mail client mangled ("/" added) is an invalid link, not "no such route"
        table.append(Endpoint("GET", "/v1/links/{token:path}", link_routes.link, link_routes.LINK))
    if slack:
        table.append(Endpoint("POST", "/v1/slack/actions", actions, ACTIONS))
    if mcp is not None:
        table.append(Endpoint(None, "/mcp", mcp))
    table += [
        Endpoint("GET", "/v1/ops/deliveries", ops.deliveries, ops.DELIVERIES),
        Endpoint("POST", "/v1/ops/deliveries/{delivery}/retry", ops.retry, ops.RETRY),
        Endpoint("GET", "/healthz", ops.healthz, ops.HEALTHZ),
        Endpoint("GET", "/readyz", ops.readyz, ops.READYZ),
    ]
    if metrics:
        table.append(Endpoint("GET", "/metrics", ops.metrics_page))
    table += [
        Endpoint("POST", "/agents/{agent}", wire.turn, hot=True),
        Endpoint("POST", "/agents/{agent}/getSnapshot", wire.get_snapshot),
        Endpoint("POST", "/agents/{agent}/abort", wire.abort),
    ]
    if console:
        table += [
            Endpoint("GET", "/", home),
            Endpoint("GET", "/console", home),  # to /console/, by its path (no slash redirects: see _app)
            Endpoint(None, "/console", ConsoleFiles(directory=CONSOLE, html=True), mount=True),
        ]
    return table
