"""The HTTP floor of table [S1]: the REST cycle's two requests answered by a bare Starlette app.

It runs under the same uvicorn, on the same inherited socket, behind the same ``Counted``
wrapper and the same generator as pausepoint's server. It reads each request's JSON body and
replies in the shape the generators parse: a send pauses with a fresh session id and pause ref,
and an approval of a pause this process handed out finishes the turn. A second approval of the
same pause is refused (409, ``already_resolved``), as pausepoint refuses it, so ``cycle.lua``'s
duplicate approvals count the same way. There is no runtime, no store and no authentication.
What a cycle costs here is what the HTTP stack costs; pausepoint's server costs that plus its own
work.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .server import SESSIONS

__all__ = ["bare_app"]


def _reply(body: dict[str, Any], status: int = 200) -> Response:
    return Response(json.dumps(body, separators=(",", ":")), status_code=status, media_type="application/json")


def bare_app() -> Starlette:
    """A fresh app; it remembers the pauses it handed out and those it answered."""
    open_pauses: dict[str, str] = {}  # session id -> its pause's ref
    answered: set[tuple[str, str]] = set()

    async def send(request: Request) -> Response:
        message = (await request.json())["message"]
        session, ref = secrets.token_hex(10), secrets.token_hex(10)
        open_pauses[session] = ref
        return _reply(
            {
                "session_id": session,
                "finish_reason": "interrupted",
                "message": {"role": "model", "content": [{"text": f"Asking for approval: {message}"}]},
                "interrupts": [{"ref": ref, "name": "userApproval", "input": {"details": message}}],
            }
        )

    async def respond(request: Request) -> Response:
        await request.json()
        session, ref = request.path_params["session_id"], request.path_params["ref"]
        if open_pauses.get(session) == ref:
            del open_pauses[session]
            answered.add((session, ref))
            message = {"role": "model", "content": [{"text": "Transferred $5 to bob."}]}
            return _reply({"session_id": session, "finish_reason": "stop", "message": message, "interrupts": []})
        if (session, ref) in answered:
            return _reply({"error": {"code": "already_resolved", "message": f"pause {ref!r} is resolved"}}, 409)
        return _reply({"error": {"code": "not_found", "message": f"no open pause {ref!r}"}}, 404)

    return Starlette(
        routes=[
            Route(SESSIONS, send, methods=["POST"]),
            Route(SESSIONS + "/{session_id}/interrupts/{ref}/respond", respond, methods=["POST"]),
        ]
    )
