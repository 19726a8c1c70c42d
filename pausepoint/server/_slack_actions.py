"""Slack's button callbacks (``POST /v1/slack/actions``): Approve and Deny pressed in Slack.

Slack posts ``payload=<JSON>`` (form-encoded) to the app's interactivity URL, signed with the
app's signing secret: ``X-Slack-Signature: v0=hex(HMAC-SHA256(secret, "v0:<ts>:<body>"))`` and
``X-Slack-Request-Timestamp``. What happens to a callback, in order (nothing is decided, nothing
written, until the last step):

1. The signature and its timestamp (``slack_sdk``'s ``SignatureVerifier``: five minutes at
   most) — else 401 ``slack_signature``: forged, altered and replayed callbacks stop here.
2. The payload: a ``block_actions`` callback from an allowed workspace (``SlackApp.teams``;
   else 403 ``slack_team_refused``), a ``response_url`` under ``SlackApp.response_url_prefix``,
   and one of our buttons — else 400. The "Open in console" button is acknowledged, no more.
3. The button's value: an approval link this server signed (else 400 ``invalid_link``); it
   names the pause, so a callback cannot reach another session than the one it was sent for.
4. The Slack user, mapped to a principal (``SlackApp.users``: ``"acme/alice"`` is alice of
   acme), who may answer the session (the access policy, which keeps everyone to their
   tenant); a user who is not mapped, or may not answer (another tenant's pause among
   them), decides nothing and is told why in a message only they see. So is a click on a
   link used, expired or superseded — and the card is brought up to date for everyone.
5. Then Slack gets its 200 at once (it wants one within 3 s), and the decision is made in the
   background through the same path as every answer (``Chat.approve``, or a denial by ref,
   bound to the link's pause, ``via="slack"``): the approval policy's roles, quorum and
   separation of duties apply, and a pause is answered once however often a button is pressed.
   The card is then updated in place for everyone through the callback's ``response_url``
   ("Approved by alice via Slack"; "1 of 2 approvals (alice)" with the buttons kept), or the
   presser is told why nothing was decided.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

import httpx
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response

from ..content._jsondata import read_json_text
from ..errors import (
    ConcurrentUpdate,
    InvalidRequest,
    PausepointError,
    RequestTooLarge,
    ResumeInProgress,
    SessionNotFound,
    SlackNotAllowed,
    SlackSignatureError,
    SlackTeamRefused,
    SlackUserUnknown,
    TurnInProgress,
    UsageError,
)
from ..runtime._agent import Agent
from ..runtime._calls import answer_by_ref
from ..session._interrupts import ToolResponse
from ..webhooks import SlackApp, answer_mark
from ._auth import current_tenant, named_identity, serve_as
from ._display import interrupts_json
from ._errors import error_body
from ._link_routes import answerable_link
from ._links import Link, read_token, refusal
from ._replies import json_response
from ._requestlog import note_principal
from ._routes import Operation, json_object
from ._service import Service, service_of
from ._slack import APPROVE, DENY, OPEN, card_message
from ._story import Standing, decided, standing

__all__ = ["ACTIONS", "SlackSignatureError", "SlackTeamRefused", "SlackUserUnknown", "actions"]

log = logging.getLogger("pausepoint.server")


ACTIONS: Operation[Any] = Operation(
    "Slack's interactivity callbacks (the Approve / Deny buttons of a pause's Slack card): "
    "form-encoded payload=<JSON>, signed by Slack (X-Slack-Signature, X-Slack-Request-Timestamp; "
    "401 slack_signature otherwise). 200 once the callback is taken (ok: false with the error when "
    "nothing will be decided; the presser is told why in Slack); the decision follows through the "
    "approval rules, and the card is updated in place through the callback's response_url",
    json_object(ok={"type": "boolean"}, error={"type": "object"}),
    public=True,
)


_NOT_A_CALLBACK = "not a Slack block_actions callback (payload=<JSON> with user, actions, response_url)"


@dataclass(frozen=True, slots=True)
class _Callback:
    team: str
    user: str
    action: str
    value: str
    response_url: str


async def actions(request: Request) -> Response:
    service = service_of(request)
    service.start_background()
    slack = service.slack
    if slack is None:  # pragma: no cover - the route is served only with a SlackApp
        raise InvalidRequest("Slack is not configured on this server")
    raw = await _read(request, service.limits.max_body_bytes)
    _verify(slack, raw, request.headers)
    callback = _parse(raw, slack)
    if callback.action == OPEN:  # a URL button: Slack tells us it was pressed, and opens the link itself
        return json_response({"ok": True})
    found = read_token(service.links, callback.value)
    try:
        agent, principal = await _decider(service, slack, callback, found)
        now = await standing(agent, found)
        if now.state != "open":  # bring the card up to date for everyone, and say why nothing happens
            stale = refusal(now.state, now.message)
            return _refused(stale, callback, {"replace_original": True, **_card(agent, now, service, callback.value)})
    except PausepointError as exc:
        return _refused(exc, callback)
    task = asyncio.ensure_future(_decide(service, agent, found, principal, callback))
    agent.sessions.keep(task)  # the decision outlives this request (Slack wants its 200 within 3 s)
    return json_response({"ok": True})


def _refused(error: PausepointError, callback: _Callback, *updates: dict[str, Any]) -> Response:
    """Slack's 200 for a callback that decides nothing; then, once it is sent, the presser is
    told why (and the card updated, with ``updates``)."""
    reply = json_response({"ok": False, "error": error_body(error)["error"]})
    messages = [*updates, _ephemeral(f"Nothing was decided: {error.message}")]
    reply.background = BackgroundTask(_post_all, callback.response_url, messages)
    return reply


async def _decider(service: Service, slack: SlackApp, callback: _Callback, found: Link) -> tuple[Agent, str]:
    """The agent of the link's session and the principal who decides: the Slack user's, if
    they may answer the session (``SlackUserUnknown``, ``SlackNotAllowed`` otherwise). The
    rest of the callback, the decision included, is served as that principal of their tenant
    (``serve_as``), so the access policy and the approval rules see who decides, as they do
    for a signed-in request: another tenant's pause is one they may not answer."""
    name = await _principal(slack, callback)
    if name is None:
        raise SlackUserUnknown(
            f"your Slack account ({callback.user}) is not linked to a pausepoint approver; ask an administrator "
            "to add it"
        )
    identity = named_identity(name)
    serve_as(identity)
    note_principal(identity.qualified)
    try:
        agent = await answerable_link(service, found, identity.principal)
    except SessionNotFound:
        raise SlackNotAllowed(f"{identity.qualified} may not answer this request") from None
    return agent, identity.principal


async def _decide(service: Service, agent: Agent, found: Link, principal: str, callback: _Callback) -> None:
    """Approve or deny the link's pause as ``principal`` through Slack, then bring the card up
    to date for everyone — or tell the presser alone why nothing was decided."""
    refused = await _give(agent, found, principal, callback.action)
    service.feed.notify(agent.name, found.session_id)
    if refused is not None:
        await _post(callback.response_url, _ephemeral(f"Nothing was decided: {refused.message}"))
    try:
        now = await standing(agent, found)
    except PausepointError:  # pragma: no cover - the session was removed meanwhile
        return
    if refused is None or now.state != "open":  # a refusal leaves an open card as it was
        await _post(callback.response_url, {"replace_original": True, **_card(agent, now, service, callback.value)})


async def _give(agent: Agent, found: Link, principal: str, action: str) -> PausepointError | None:
    """The decision, through the path every answer takes; the refusal, if it was refused (a
    caller's mistake or a race: nothing was written). A failure after the decision was written
    (the model's, a store's) is logged: the card then shows what stands."""
    chat = agent.chat(found.session_id, principal=principal)
    pause_id = found.pause_id

    def deny(name: str) -> ToolResponse:
        return ToolResponse(found.ref, name, None, None, decision="deny", reason="", pause_id=pause_id)

    try:
        if action == APPROVE:
            await chat.approve(found.ref, pause_id=pause_id, principal=principal, via="slack")
        else:
            await answer_by_ref(chat.calls, found.ref, deny, streamed=False, principal=principal, via="slack")
    except (UsageError, ConcurrentUpdate, ResumeInProgress, TurnInProgress) as exc:  # refused: nothing written
        return exc
    except Exception:  # the model or a store failed once the decision was written: the card says what stands
        log.exception("a decision from Slack failed")
    return None


def _card(agent: Agent, now: Standing, service: Service, token: str) -> dict[str, Any]:
    """The card as it stands now: buttons while it is open (a quorum's progress shown), the
    decision in words once it is not."""
    shown = interrupts_json(agent, [now.pause], tenant=current_tenant())[0]  # (served as one who may answer it)
    if now.state == "open":
        url = service.links.url(token) if service.links is not None else None
        return card_message(agent.name, shown, token=token, url=url)
    outcome = now.message
    if now.state == "used" and now.entry is not None:
        outcome = f"{answer_mark(now.entry.decision)} *{decided(now.entry)}*"  # as the one-line message marks it
    elif now.state == "expired":
        outcome = f":hourglass: {now.message}"
    return card_message(agent.name, shown, outcome=outcome)


async def _principal(slack: SlackApp, callback: _Callback) -> str | None:
    users = slack.users
    try:
        if isinstance(users, Mapping):
            found: Any = users.get(callback.user)
        else:
            found = users(callback.team, callback.user)
            if inspect.isawaitable(found):
                found = await found
    except Exception:  # a directory lookup that failed maps nobody: nothing is decided
        log.exception("SlackApp.users failed for %s", callback.user)
        return None
    return found if isinstance(found, str) and found else None


async def _read(request: Request, limit: int) -> bytes:
    body = bytearray()
    async for piece in request.stream():
        body += piece
        if len(body) > limit:
            raise RequestTooLarge(f"the request body exceeds the limit of {limit} bytes", limit=limit)
    return bytes(body)


def _verify(slack: SlackApp, raw: bytes, headers: Mapping[str, str]) -> None:
    """Slack's signature over the body, at most five minutes old (``SlackSignatureError``)."""
    from slack_sdk.signature import SignatureVerifier

    stamp = headers.get("x-slack-request-timestamp", "")
    signature = headers.get("x-slack-signature", "")
    if not (stamp.isascii() and stamp.isdigit() and len(stamp) <= 12) or not signature:
        raise SlackSignatureError("missing or malformed X-Slack-Request-Timestamp / X-Slack-Signature headers")
    try:
        body = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SlackSignatureError("the signature does not match the body") from None
    if not SignatureVerifier(slack.signing_secret).is_valid(body, stamp, signature):
        raise SlackSignatureError("the signature does not match the body, or is more than five minutes old")


def _parse(raw: bytes, slack: SlackApp) -> _Callback:
    """The callback's team, user, button and response URL (``InvalidRequest``, ``SlackTeamRefused``)."""
    text = _payload_text(raw)
    try:
        payload = read_json_text(text)  # as every surface reads JSON: a name given twice is refused
    except ValueError as exc:  # no JSON, or a name given twice: said which
        raise InvalidRequest(f"{_NOT_A_CALLBACK}: {exc}") from None
    except RecursionError:  # nested too deep: not Slack's
        raise InvalidRequest(_NOT_A_CALLBACK) from None
    try:
        user = payload["user"]
        team = (payload.get("team") or {}).get("id") or user.get("team_id")
        [action] = payload["actions"][:1]
        fields = (payload["type"], team, user["id"], action["action_id"], payload["response_url"])
        for field in (*fields, action.get("value")):  # a lone surrogate: text no reply could carry
            if isinstance(field, str):
                field.encode("utf-8")
    except (ValueError, KeyError, TypeError, AttributeError):
        raise InvalidRequest(_NOT_A_CALLBACK) from None
    kind, team, user_id, action_id, response_url = fields
    if kind != "block_actions" or not all(isinstance(f, str) and f for f in fields):
        raise InvalidRequest(_NOT_A_CALLBACK)
    if slack.teams is not None and team not in slack.teams:
        raise SlackTeamRefused(f"callbacks from the Slack workspace {team} are not taken here")
    if action_id not in (APPROVE, DENY, OPEN):
        raise InvalidRequest(f"{action_id[:100]!r} is not a pausepoint button")
    if not response_url.startswith(slack.response_url_prefix):
        raise InvalidRequest("the callback's response_url is not Slack's")
    value = action.get("value") if isinstance(action, dict) else None
    if action_id != OPEN and not isinstance(value, str):
        raise InvalidRequest("the button carries no approval link")
    return _Callback(team, user_id, action_id, value or "", response_url)


def _payload_text(raw: bytes) -> str:
    """The form's one ``payload`` value, or ``InvalidRequest`` said in the API's words (not
    Python's: a form that is none, a payload missing or given twice, which one was meant cannot
    be known, as for a JSON object's names and a query string's)."""
    try:
        form = parse_qs(raw.decode("utf-8"), strict_parsing=True, max_num_fields=20)
    except ValueError:  # not UTF-8 (the signature check let no such body through), no form, over 20 fields
        raise InvalidRequest(f"{_NOT_A_CALLBACK}: the body is no form of name=value pairs (at most 20)") from None
    given = form.get("payload", [])
    if len(given) != 1:
        times = "twice" if len(given) == 2 else f"{len(given)} times"
        said = f"'payload' is given {times}: give it once" if given else "it has no 'payload'"
        raise InvalidRequest(f"{_NOT_A_CALLBACK}: {said}")
    return given[0]


def _ephemeral(text: str) -> dict[str, Any]:
    return {"response_type": "ephemeral", "replace_original": False, "text": text}


async def _post_all(url: str, messages: list[dict[str, Any]]) -> None:
    for message in messages:
        await _post(url, message)


async def _post(url: str, message: dict[str, Any]) -> None:
    """Post ``message`` to a callback's ``response_url`` (a failure is logged: the decision, if
    any, stands)."""
    try:
        async with httpx.AsyncClient(timeout=10, follow_redirects=False) as http:
            reply = await http.post(url, json=message)
        if reply.status_code >= 300:
            log.warning("Slack's response_url answered %s", reply.status_code)
    except httpx.HTTPError as exc:
        log.warning("posting to Slack's response_url failed: %s", exc)
