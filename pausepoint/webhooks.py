"""Webhooks: signed HTTP announcements of pauses, answers, expiries and turn ends.

Configure them on the app (every agent) or on one agent::

    ai = Pausepoint(webhooks=[Webhook("ops", "https://ops.example.com/hooks/pausepoint", secret=...)])
    ai.define_agent(..., webhooks=[Webhook("desk", SLACK_URL, format="slack", events={"pause"})])

Delivery goes through the store's outbox: every append writes, in its own transaction, one
delivery per webhook that wants each event, so a crash after a pause loses no announcement, and
a pause that was never written is never announced. A ``WebhookSender`` (every server process
runs one; see ``pausepoint.server.create_app``) claims due deliveries with a lease, POSTs them,
and retries failures with exponential backoff up to ``max_attempts``; then the delivery is
``failed`` and stays in the outbox to be seen and sent again (``GET /v1/ops/deliveries``).

Delivery is **at least once**: a receiver may see an event again (after a timeout, a crash, a
lease that ran out) and de-duplicates on its ``id`` (also in the ``Pausepoint-Event-Id`` header).

The request (``format="json"``)::

    POST <url>
    Content-Type: application/json
    Pausepoint-Event-Id: 3f9c...            the event's id: the same on every retry
    Pausepoint-Event-Type: pause            pause | answer | expiry | turn_end | approval | decision
                                            | grant | escalation
    Pausepoint-Timestamp: 1767225600        when this attempt was signed (Unix seconds)
    Pausepoint-Signature: v1=5257a8...      hex HMAC-SHA256(secret, f"{timestamp}." + body)
    Pausepoint-Attempt: 1

    {"id", "type", "at", "agent", "session_id", "owner", ...}    (see pausepoint.turn._events)

Verify with ``verify_signature(secret, body, headers)`` (or the few lines it holds, in any
language): recompute the HMAC over the timestamp, a dot and the raw body, compare in constant
time, and refuse timestamps older than a few minutes. ``format="slack"`` sends a Slack
incoming-webhook payload (``{"text": ...}``) with the same headers instead.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .errors import DefinitionError, WebhookSignatureError
from .turn._events import EVENT_KINDS, EventKind

__all__ = [
    "EVENT_KINDS",
    "EventKind",
    "Webhook",
    "sign",
    "slack_text",
    "verify_signature",
]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}")

SIGNATURE_HEADER = "Pausepoint-Signature"
TIMESTAMP_HEADER = "Pausepoint-Timestamp"


@dataclass(frozen=True)
class Webhook:
    """An HTTP endpoint that is told about events.

    ``name`` identifies it in the outbox (letters, digits, ``_.:-``; unique in an app);
    ``secret`` signs every request (HMAC-SHA256; required for ``format="json"``); ``events``
    are the kinds it wants (default: all of ``pause``, ``answer``, ``expiry``, ``turn_end``,
    ``approval``, ``decision``, ``grant``, ``escalation``);
    ``agents`` limits it to some agents' sessions (default: every agent it is configured for);
    ``format`` is ``"json"`` (the event body) or ``"slack"`` (an incoming-webhook message).
    A failed attempt (no 2xx reply within ``timeout`` seconds) is retried after ``backoff``
    seconds, doubling each time up to ``max_backoff``, for ``max_attempts`` attempts in all.
    Raises ``DefinitionError`` when a value is unusable.
    """

    name: str
    url: str
    secret: str | None = None
    events: Collection[EventKind] = EVENT_KINDS
    agents: Collection[str] | None = None
    format: Literal["json", "slack"] = "json"
    timeout: float = 10.0
    max_attempts: int = 10
    backoff: float = 2.0
    max_backoff: float = 600.0
    headers: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise DefinitionError(f"webhook name {self.name!r}: use letters, digits and _.:- (up to 100)")
        if not isinstance(self.url, str) or not re.match(r"https?://[^\s/]+", self.url):
            raise DefinitionError(f"webhook {self.name!r}: url must be an http(s) URL, not {self.url!r}")
        if self.format not in ("json", "slack"):
            raise DefinitionError(f"webhook {self.name!r}: format must be 'json' or 'slack'")
        if self.format == "json" and not self.secret:
            raise DefinitionError(f"webhook {self.name!r}: a secret is required to sign its requests")
        unknown = set(self.events) - set(EVENT_KINDS)
        if unknown or not self.events or isinstance(self.events, str):
            raise DefinitionError(f"webhook {self.name!r}: events must be some of {', '.join(EVENT_KINDS)}")
        object.__setattr__(self, "events", frozenset(self.events))
        if self.agents is not None:
            if isinstance(self.agents, str):
                raise DefinitionError(f"webhook {self.name!r}: agents is a collection of names, not a string")
            object.__setattr__(self, "agents", frozenset(self.agents))
        if not (self.timeout > 0 and self.backoff >= 0 and self.max_backoff >= self.backoff):
            raise DefinitionError(f"webhook {self.name!r}: timeout must be positive, 0 <= backoff <= max_backoff")
        if not (isinstance(self.max_attempts, int) and self.max_attempts >= 1):
            raise DefinitionError(f"webhook {self.name!r}: max_attempts must be at least 1")

    def wants(self, kind: str, agent: str) -> bool:
        """Whether this webhook is told about a ``kind`` event of ``agent``'s sessions."""
        return kind in self.events and (self.agents is None or agent in self.agents)

    def retry_delay(self, attempts: int) -> float:
        """Seconds to wait after the ``attempts``-th failed attempt (1, 2, ...)."""
        return float(min(self.backoff * 2 ** (attempts - 1), self.max_backoff))

    def __repr__(self) -> str:  # never show the secret
        return f"Webhook({self.name!r}, {self.url!r}, format={self.format!r}, events={sorted(self.events)})"


def sign(secret: str, body: bytes, timestamp: int) -> str:
    """The ``Pausepoint-Signature`` header value for ``body`` sent at ``timestamp``."""
    mac = hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256)
    return "v1=" + mac.hexdigest()


def verify_signature(
    secret: str | Sequence[str],
    body: bytes,
    headers: Mapping[str, str],
    *,
    tolerance: float = 300.0,
    now: float | None = None,
) -> dict[str, Any]:
    """Check a webhook request and return its JSON body.

    ``headers`` is the request's headers (any mapping; names are matched without regard to
    case). ``secret`` may be several, while one is being rotated. Raises
    ``WebhookSignatureError`` when the signature or timestamp header is missing or malformed,
    the timestamp is more than ``tolerance`` seconds away from ``now``, or no secret signed it.
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    stamp = lowered.get(TIMESTAMP_HEADER.lower(), "")
    given = [v.strip() for v in lowered.get(SIGNATURE_HEADER.lower(), "").split(",") if v.strip()]
    if not stamp.isdigit() or not given:
        raise WebhookSignatureError("missing or malformed Pausepoint-Timestamp / Pausepoint-Signature headers")
    moment = time.time() if now is None else now
    if abs(moment - int(stamp)) > tolerance:
        raise WebhookSignatureError(f"the timestamp is more than {tolerance:g}s away from now: a replay?")
    secrets = [secret] if isinstance(secret, str) else list(secret)
    expected = [sign(s, body, int(stamp)) for s in secrets]
    if not any(hmac.compare_digest(e, g) for e in expected for g in given):
        raise WebhookSignatureError("the signature does not match the body")
    parsed: dict[str, Any] = json.loads(body)
    return parsed


def slack_text(body: Mapping[str, Any]) -> str:
    """A one-message summary of an event body, in Slack's mrkdwn."""
    session = f"session `{body['session_id']}`"
    kind = body["type"]
    if kind == "pause":
        interrupt = body["interrupt"]
        view = interrupt.get("view")
        if view:  # how the pause reads to a person (Agent.view)
            shown = f"*{view['title']}*" + (f" — {view['summary']}" if view.get("summary") else "")
        else:
            shown = json.dumps(interrupt["input"], ensure_ascii=False)
        if len(shown) > 500:
            shown = shown[:500] + "…"
        text = (
            f":raised_hand: *{body['agent']}* is waiting for an answer to `{interrupt['name']}` in {session}: {shown}"
        )
        if interrupt.get("expires_at"):
            text += f" (expires {interrupt['expires_at']})"
        return text + f" — ref `{interrupt['ref']}`"
    if kind in ("answer", "expiry"):
        entry = body["entry"]
        if kind == "expiry":
            return f":hourglass: `{entry['name']}` in {session} of *{body['agent']}* expired unanswered"
        who = entry.get("principal") or "someone"
        return f":white_check_mark: `{entry['name']}` in {session} of *{body['agent']}*: {entry['decision']} by {who}"
    if kind in ("approval", "decision", "grant", "escalation"):
        entry = body["entry"]
        where = f"`{entry['name']}` in {session} of *{body['agent']}*"
        if kind == "approval":
            counted = f"approval {entry['approvals']} of {entry['required']}"
            return f":ballot_box_with_check: {where}: {counted} by {entry['principal']}"
        if kind == "decision":
            by = f"rule “{entry['rule']}”" if entry.get("rule") else f"{entry.get('principal') or 'someone'}'s grant"
            done = "approved" if entry["decision"] == "approve" else "denied"
            return f":robot_face: {where}: {done} by {by}"
        if kind == "escalation":
            return (
                f":rotating_light: {where}: nobody decided in time; handed to {', '.join(entry['escalated_to'] or [])}"
            )
        action = "revoked" if entry["decision"] == "revoke" else "granted"
        return (
            f":key: {where}: later calls {action} by {entry.get('principal') or 'someone'} (grant `{entry['grant']}`)"
        )
    pending = len(body.get("open_refs") or [])
    text = f":speech_balloon: *{body['agent']}* ended a turn in {session}: {body['finish_reason']}"
    return text + (f" ({pending} waiting for an answer)" if pending else "")


def check_names(webhooks: Iterable[Webhook]) -> None:
    """Raise ``DefinitionError`` unless every webhook has a name of its own."""
    seen: set[str] = set()
    for webhook in webhooks:
        if not isinstance(webhook, Webhook):
            raise DefinitionError(f"{webhook!r} is not a Webhook")
        if webhook.name in seen:
            raise DefinitionError(f"two webhooks are named {webhook.name!r}")
        seen.add(webhook.name)
