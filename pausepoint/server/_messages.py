"""Messages, in the REST API: a user message that starts a session, or goes to one (to an id
no session has yet: it starts a session with that id). Each runs a turn (``rest_turn``): a
JSON reply, or server-sent events when asked.

A message is its session owner's to send (``Service.to_message``: 404 for a session the caller
may not see, 403 for one it may only view); its size and the session's history are bounded by
the app's ``Limits``. An ``Idempotency-Key`` header makes a retry safe where the message names
its session (``send``): the same message by the same principal with the same key gets the first
one's response, never a second turn.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from .._rest import SendBody, user_message
from ..runtime._chat import Chat
from ._auth import current_tenant
from ._limits import check_history, check_message_size, read_json
from ._params import idempotency_key, no_key_unless_named
from ._replies import AGENT_RESPONSE, rest_turn
from ._routes import IDEMPOTENCY_KEY, Operation
from ._service import service_of

__all__ = ["CREATE", "SEND", "create", "send"]

CREATE = Operation("Start a session with a user message", AGENT_RESPONSE, body=SendBody, stream=True)


async def create(request: Request) -> Response:
    service = service_of(request)
    principal = await service.principal(request)
    agent = service.agent(request.path_params["agent"])
    no_key_unless_named(idempotency_key(request), "POST /v1/agents/{agent}/sessions/{id}/messages with an id of yours")
    raw = await read_json(request, service.limits)
    body = CREATE.parse(raw)
    check_message_size(raw["message"], service.limits)  # as the client sent it
    chat = agent.chat(principal=principal, tenant=current_tenant())  # the caller's tenant's session
    message = user_message(body)
    return await rest_turn(
        request,
        service,
        agent,
        chat.session_id,
        lambda streamed: (chat.send_stream if streamed else chat.send)(message, principal=principal, via="http"),
    )


SEND = Operation(
    "Send a user message (to an id no session has yet: start a session with that id)",
    AGENT_RESPONSE,
    body=SendBody,
    stream=True,
    params=[IDEMPOTENCY_KEY],
)


async def send(request: Request) -> Response:
    service = service_of(request)
    principal = await service.principal(request)
    agent = service.agent(request.path_params["agent"])
    session_id = request.path_params["session_id"]
    summary = await service.to_message(agent, session_id, principal)
    if summary is None:
        # a caller-chosen id: the message creates it, in the caller's tenant
        chat = Chat(agent, session_id, principal, new=True, tenant=current_tenant())
    else:
        check_history(summary, service.limits)
        chat = agent.chat(session_id, principal=principal)
    raw = await read_json(request, service.limits)
    body = SEND.parse(raw)
    check_message_size(raw["message"], service.limits)  # as the client sent it
    message, key = user_message(body), idempotency_key(request)
    return await rest_turn(
        request,
        service,
        agent,
        session_id,
        lambda streamed: (chat.send_stream if streamed else chat.send)(
            message, idempotency_key=key, principal=principal, via="http"
        ),
    )
