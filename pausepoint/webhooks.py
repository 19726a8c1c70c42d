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

    {"id", "type", "at", "agent", "session_id", "owner", "tenant", ...}    (see pausepoint.turn._events)

Verify with ``verify_signature(secret, body, headers)`` (or the few lines it holds, in any
language): recompute the HMAC over the timestamp, a dot and the raw body, compare in constant
time, and refuse timestamps older than a few minutes. ``format="slack"`` sends a Slack
incoming-webhook payload with the same headers instead: a Block Kit card with Approve / Deny
buttons for a pause, one line of text for every other event.

Reaching approvers where they are (the server's side: ``create_app(links=..., slack=...)``):

- ``ApprovalLinks(secret, console_url)``: every pause announced carries a signed, expiring link
  to its card in the console (``"link"`` in a JSON body, a button in Slack, the link in an
  email). A link shows the card; the person decides there, signed in: a link never decides.
- ``SlackApp(signing_secret, users)``: the server takes the Slack buttons' callbacks
  (``POST /v1/slack/actions``), verified with Slack's signing secret, and decides as the
  Slack user's principal (``users``), through the same approval rules as every answer.
- ``EmailNotifier(name, host=..., sender=..., to=[...])``: pauses by email (SMTP; text and
  HTML, with the link), delivered by the same outbox as webhooks, with the same retries.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
import time
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal, TypeAlias
from urllib.parse import urlsplit

from .errors import DefinitionError, WebhookSignatureError
from .session._durations import SAID, duration
from .turn._events import EVENT_KINDS, EventKind

__all__ = [
    "EVENT_KINDS",
    "ApprovalLinks",
    "EmailNotifier",
    "EventKind",
    "SlackApp",
    "SlackUsers",
    "Webhook",
    "sign",
    "slack_text",
    "verify_signature",
]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}")

SIGNATURE_HEADER = "Pausepoint-Signature"
TIMESTAMP_HEADER = "Pausepoint-Timestamp"

# A header's name, as HTTP writes one (RFC 9110's token).
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# The headers the sender writes on every request itself (the body's, the connection's, its own;
# every Pausepoint-* one too): one given beside them would be sent twice, or contradict the body.
_SENDERS_HEADERS = frozenset(
    {"content-type", "content-length", "content-encoding", "transfer-encoding", "host", "connection",
     "keep-alive", "te", "trailer", "upgrade", "expect", "user-agent"}
)  # fmt: skip


def is_http_url(url: object) -> bool:
    """Whether ``url`` is an http(s) URL with a host, as a webhook's must be: one a request can go
    to (no white space or control character in it, a port from 0 to 65535, brackets that close)."""
    if not isinstance(url, str) or any(char.isspace() or char < " " or char == "\x7f" for char in url):
        return False
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - read for its check: ValueError for a port that is no number, or past 65535
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def value_problem(value: str, *, ascii_only: bool = True) -> str | None:
    """Why ``value`` — a header's value, or a secret read from the environment (a bearer token,
    a key that signs) — would not work as it is (None: it would), in words that never show it.
    HTTP strips white space at either end of a header's value (and a secret file's last line
    break makes a key another key); no header carries a control character; HTTP clients (and
    SMTP's login) send nothing beyond ASCII as it is (``ascii_only=False``: a key that only
    signs may hold any character). The one check of every such value, wherever it comes from."""
    if value != value.strip():
        return "starts or ends with white space (a space, a line break)"
    if any(char < " " or char == "\x7f" for char in value):
        return "holds a control character (a line break, a tab)"
    if ascii_only and not value.isascii():
        return "holds a character beyond ASCII"
    return None


def header_name_problem(name: object) -> str | None:
    """Why ``name`` cannot be a header a webhook's ``headers`` give (None: it can): not a name
    HTTP takes, or one the sender writes itself."""
    if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
        return f"{name!r} is not a header's name (letters, digits and !#$%&'*+-.^_`|~)"
    if name.lower() in _SENDERS_HEADERS or name.lower().startswith("pausepoint-"):
        return f"the {name} header is one the sender writes itself, on every request: leave it out"
    return None


def _times_problem(timeout: object, backoff: object, max_backoff: object) -> str | None:
    """What is wrong with a webhook's seconds, as ``config check`` says it (None: nothing):
    each a number of seconds up to a day — a timeout above 0, the waits from 0, the longest wait
    no shorter than the first."""
    seconds: dict[str, float] = {}
    for name, value, least in (("timeout", timeout, None), ("backoff", backoff, 0), ("max_backoff", max_backoff, 0)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not _within(value, least):
            low = "above 0" if least is None else "from 0"
            return f"{name} must be seconds {low} to {_DAY} (a day), not {value!r}"
        seconds[name] = value
    if seconds["max_backoff"] < seconds["backoff"]:
        return f"max_backoff ({max_backoff!r}) must not be shorter than backoff ({backoff!r})"
    return None


def _within(value: float, least: float | None) -> bool:
    """``value`` is above 0 (``least`` None) or at least ``least``, and at most a day (nan: neither)."""
    return (value > 0 if least is None else value >= least) and value <= _DAY


_DAY = 86_400


def _headers_problem(headers: Mapping[str, str]) -> str | None:
    """What is wrong with a webhook's ``headers`` (None: nothing), never showing a value (one
    may come from a secret)."""
    seen: set[str] = set()
    for name, value in headers.items():
        problem = header_name_problem(name)
        if problem is not None:
            return problem
        if name.lower() in seen:
            return f"the {name} header is given twice (names are the same whatever their case)"
        seen.add(name.lower())
        why = value_problem(value) if isinstance(value, str) else "is not a string"
        if why is not None:
            return f"the value of the {name} header {why}: no request could carry it (not shown)"
    return None


@dataclass(frozen=True)
class Webhook:
    """An HTTP endpoint that is told about events.

    ``name`` identifies it in the outbox (letters, digits, ``_.:-``; unique in an app);
    ``secret`` signs every request (HMAC-SHA256; required for ``format="json"``); ``events``
    are the kinds it wants (default: all of ``pause``, ``answer``, ``expiry``, ``turn_end``,
    ``approval``, ``decision``, ``grant``, ``escalation``);
    ``agents`` limits it to some agents' sessions (default: every agent it is configured for);
    ``tenants`` to the sessions of some tenants (default: every session, of any tenant or none);
    ``format`` is ``"json"`` (the event body) or ``"slack"`` (an incoming-webhook message);
    email has a class of its own (``EmailNotifier``). ``headers`` are sent with every request:
    names HTTP takes, each once, none the sender writes itself (``Content-Type``,
    ``Content-Length``, ``Host``, ``User-Agent``, ``Pausepoint-*``...), values of printable
    ASCII with no white space at either end (else no request could carry them).
    A failed attempt (no 2xx reply within ``timeout`` seconds) is retried after ``backoff``
    seconds, doubling each time up to ``max_backoff``, for ``max_attempts`` attempts in all.
    Raises ``DefinitionError`` when a value is unusable.
    """

    name: str
    url: str
    secret: str | None = None
    events: Collection[EventKind] = EVENT_KINDS
    agents: Collection[str] | None = None
    format: Literal["json", "slack", "email"] = "json"
    timeout: float = 10.0
    max_attempts: int = 10
    backoff: float = 2.0
    max_backoff: float = 600.0
    headers: Mapping[str, str] = field(default_factory=dict)
    tenants: Collection[str] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise DefinitionError(f"webhook name {self.name!r}: use letters, digits and _.:- (up to 100)")
        if self.format == "email" and not isinstance(self, EmailNotifier):
            raise DefinitionError(f"webhook {self.name!r}: email is sent by an EmailNotifier(...), not a Webhook")
        if self.format != "email" and not is_http_url(self.url):
            raise DefinitionError(f"webhook {self.name!r}: url must be an http(s) URL, not {self.url!r}")
        if self.format not in ("json", "slack", "email"):
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
        if self.tenants is not None:
            if isinstance(self.tenants, str) or not all(isinstance(t, str) and t for t in self.tenants):
                raise DefinitionError(f"webhook {self.name!r}: tenants is a collection of tenant names, not a string")
            object.__setattr__(self, "tenants", frozenset(self.tenants))
        problem = _times_problem(self.timeout, self.backoff, self.max_backoff)
        if problem is not None:
            raise DefinitionError(f"webhook {self.name!r}: {problem}")
        if isinstance(self.max_attempts, bool) or not (isinstance(self.max_attempts, int) and self.max_attempts >= 1):
            raise DefinitionError(f"webhook {self.name!r}: max_attempts must be a whole number, at least 1")
        if not isinstance(self.headers, Mapping):
            raise DefinitionError(f"webhook {self.name!r}: headers maps header names to values")
        object.__setattr__(self, "headers", dict(self.headers))  # a copy: checked once, sent as checked
        problem = _headers_problem(self.headers)
        if problem is not None:
            raise DefinitionError(f"webhook {self.name!r}: {problem}")

    def wants(self, kind: str, agent: str) -> bool:
        """Whether this webhook is told about a ``kind`` event of ``agent``'s sessions (those of
        its ``tenants``, when it names some: the append that announces the event checks that)."""
        return kind in self.events and (self.agents is None or agent in self.agents)

    def retry_delay(self, attempts: int) -> float:
        """Seconds to wait after the ``attempts``-th failed attempt (1, 2, ...)."""
        return float(min(self.backoff * 2 ** (attempts - 1), self.max_backoff))

    def __repr__(self) -> str:  # never show the secret
        return f"Webhook({self.name!r}, {self.url!r}, format={self.format!r}, events={sorted(self.events)})"


_PAUSES: tuple[EventKind, ...] = ("pause",)
_ADDRESS = re.compile(r"[^@\s<>,;\"]+@[^@\s<>,;\"]+")


@dataclass(frozen=True, kw_only=True, repr=False)
class EmailNotifier(Webhook):
    """Pauses by email, through SMTP, delivered from the same outbox as webhooks.

    ``EmailNotifier("desk-mail", host="smtp.example.com", sender="pausepoint@example.com",
    to=["desk@example.com"])``: each message has a text and an HTML part telling what the
    console's card tells (title, summary, fields, risk, expiry and what happens then) and, with
    ``ApprovalLinks`` configured on the server, the link to the card. ``port`` (587) and
    ``security``: ``"starttls"`` (the default: the connection is upgraded before anything is
    sent, and the attempt fails if the server cannot), ``"ssl"`` (TLS from the start, port 465
    usually) or ``"none"`` (plain SMTP: a relay on the same host, or tests). ``username`` and
    ``password`` log in; a password is never sent without TLS. ``events`` defaults to pauses
    only. A failed attempt is retried as a ``Webhook``'s is; the ``Message-ID`` comes from the
    event id, the same on every attempt. Raises ``DefinitionError`` when a value is unusable.
    """

    url: str = ""
    events: Collection[EventKind] = _PAUSES
    format: Literal["json", "slack", "email"] = "email"
    host: str
    sender: str
    to: Collection[str]
    port: int = 587
    security: Literal["starttls", "ssl", "none"] = "starttls"
    username: str | None = None
    password: str | None = None

    def __post_init__(self) -> None:
        where = f"email notifier {self.name!r}"
        if not isinstance(self.host, str) or not re.fullmatch(r"[A-Za-z0-9.:\[\]_-]+", self.host):
            raise DefinitionError(f"{where}: host must be a host name or address, not {self.host!r}")
        if not (isinstance(self.port, int) and 0 < self.port < 65536):
            raise DefinitionError(f"{where}: port must be 1 to 65535")
        if self.format != "email":
            raise DefinitionError(f"{where}: its format is email")
        # what only an HTTP webhook uses: given here, it would be taken and never used
        http_only = (("url", self.url), ("secret", self.secret), ("headers", self.headers))
        unused = [name for name, given in http_only if given]
        if unused:
            raise DefinitionError(
                f"{where}: {', '.join(unused)} {'is' if len(unused) == 1 else 'are'} an HTTP webhook's: an email "
                "notifier sends through SMTP (host, port, security, username, password)"
            )
        if self.security not in ("starttls", "ssl", "none"):
            raise DefinitionError(f"{where}: security must be 'starttls', 'ssl' or 'none'")
        to = [self.to] if isinstance(self.to, str) else list(self.to)
        for address in [self.sender, *to]:
            if not isinstance(address, str) or not _ADDRESS.fullmatch(address):
                raise DefinitionError(f"{where}: {address!r} is not an email address (name@domain)")
        if not to:
            raise DefinitionError(f"{where}: give at least one recipient (to=[...])")
        if self.password is not None and self.security == "none":
            raise DefinitionError(f"{where}: a password is sent only over TLS (security='starttls' or 'ssl')")
        if (self.username is None) != (self.password is None):
            raise DefinitionError(f"{where}: give username and password together")
        object.__setattr__(self, "to", tuple(to))
        object.__setattr__(self, "url", f"smtp://{self.host}:{self.port}")
        super().__post_init__()

    def __repr__(self) -> str:  # never show the password
        return f"EmailNotifier({self.name!r}, {self.url!r}, to={list(self.to)}, events={sorted(self.events)})"


@dataclass(frozen=True, repr=False)
class ApprovalLinks:
    """Signed, expiring links from a notification to one pause's card in the console.

    ``secret`` keys the links' HMAC-SHA256 (16 characters at least; several while one is
    rotated: the first signs, every one verifies); ``console_url`` is where people open the
    console (``https://pp.example.com/console``): a link is ``<console_url>/#link=<token>``;
    ``ttl`` is how long a link stays usable after its pause began (never past the pause's own
    expiry). Give it to ``create_app(links=...)``.

    A link names one pause and its expiry, nothing more, and is no credential: it shows that
    pause's card to a signed-in person who may answer the session, and that person decides
    there. A link to a pause that was answered, expired, or paused again says so and decides
    nothing. Raises ``DefinitionError`` when a value is unusable.
    """

    secret: str | Sequence[str]
    console_url: str
    ttl: timedelta = timedelta(days=7)

    def __post_init__(self) -> None:
        secrets = [self.secret] if isinstance(self.secret, str) else list(self.secret)
        if not secrets or not all(isinstance(s, str) and len(s) >= 16 for s in secrets):
            raise DefinitionError("ApprovalLinks: each secret must be a string of 16 characters at least")
        url = self.console_url
        if isinstance(url, str) and re.match(r"https?://[^/?#]*@", url):  # (never shown: it holds a credential)
            raise DefinitionError(
                "ApprovalLinks: console_url holds a user name or password, which every link would carry: give "
                "the console's address without it"
            )
        if not isinstance(url, str) or not re.fullmatch(r"https?://[^\s/?#]+(/[^\s?#]*)?", url):
            raise DefinitionError(f"ApprovalLinks: console_url must be an http(s) URL without ? or #, not {url!r}")
        if duration(self.ttl) is None:
            raise DefinitionError(f"ApprovalLinks: ttl must be {SAID}, not {self.ttl!r}")
        object.__setattr__(self, "secret", tuple(secrets))
        object.__setattr__(self, "console_url", url.rstrip("/"))

    @property
    def secrets(self) -> tuple[str, ...]:
        """The secrets, the signing one first."""
        return tuple(self.secret)

    def url(self, token: str) -> str:
        """The link that opens ``token``'s card: ``<console_url>/#link=<token>``."""
        return f"{self.console_url}/#link={token}"

    def __repr__(self) -> str:  # never show the secret
        return f"ApprovalLinks(console_url={self.console_url!r}, ttl={self.ttl!r})"


#: who a Slack user is: a mapping of Slack user ids to principals, or a function of the team id
#: and the user id returning the principal (or None: nobody), or an awaitable of it. A principal
#: is named as an access policy's configuration names one: ``"acme/alice"`` is alice of the
#: tenant acme, ``"alice"`` the alice of no tenant
SlackUsers: TypeAlias = Mapping[str, str] | Callable[[str, str], "str | Awaitable[str | None] | None"]


@dataclass(frozen=True, repr=False)
class SlackApp:
    """The Slack app whose Approve / Deny buttons decide pauses (``create_app(slack=...)``).

    ``signing_secret`` is the app's (Slack's "Basic Information" page): every callback to
    ``POST /v1/slack/actions`` must carry Slack's signature made with it, at most five minutes
    old. ``users`` maps the Slack user who pressed a button to the principal who decides (a
    mapping of user ids, ``{"U024BE7LH": "alice"}``, or a function of team id and user id);
    a user it does not map decides nothing and is told so. With tenants, a principal's name is
    unique only within its tenant: name a tenant's principal ``"tenant/name"``, as
    ``OwnerPolicy(approvers=...)`` does (``{"U024BE7LH": "acme/alice"}``); the decision is then
    that principal's, in that tenant, and a pause of another tenant is one they may not answer
    (``"alice"`` is the alice of no tenant). ``teams``: the workspaces (team ids) whose
    callbacks are taken (None: any the signing secret signs).
    ``response_url_prefix``: the only place the server posts a message update to (Slack's).
    Raises ``DefinitionError`` when a value is unusable.
    """

    signing_secret: str
    users: SlackUsers
    teams: Collection[str] | None = None
    response_url_prefix: str = "https://hooks.slack.com/"

    def __post_init__(self) -> None:
        if not isinstance(self.signing_secret, str) or not self.signing_secret.strip():
            raise DefinitionError("SlackApp: signing_secret must be the Slack app's signing secret")
        if not (isinstance(self.users, Mapping) or callable(self.users)):
            raise DefinitionError("SlackApp: users must map Slack user ids to principals (a mapping or a function)")
        if isinstance(self.users, Mapping):
            for user, principal in self.users.items():
                if not _names_principal(principal):
                    raise DefinitionError(
                        f"SlackApp: users maps {user!r} to {principal!r}, which names no principal "
                        '("alice", or "tenant/alice" for a tenant\'s)'
                    )
        if self.teams is not None:
            if isinstance(self.teams, str):
                raise DefinitionError("SlackApp: teams is a collection of team ids, not a string")
            object.__setattr__(self, "teams", frozenset(self.teams))
        if not isinstance(self.response_url_prefix, str) or not re.match(
            r"https?://[^\s/]+/", self.response_url_prefix
        ):
            raise DefinitionError("SlackApp: response_url_prefix must be an http(s) URL ending in a path")

    def __repr__(self) -> str:  # never show the secret
        return f"SlackApp(teams={sorted(self.teams) if self.teams is not None else None})"


def _names_principal(name: object) -> bool:
    """Whether ``name`` names a principal as a policy's configuration does: ``"alice"``, or
    ``"acme/alice"`` (printable, no space around it or around the ``/``)."""
    if not (isinstance(name, str) and name and name.isprintable() and name == name.strip()):
        return False
    tenant, slash, principal = name.partition("/")
    return not slash or (tenant == tenant.strip() != "" and principal == principal.strip() != "")


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
    the timestamp is more than ``tolerance`` seconds away from ``now``, or no secret signed it;
    ``ValueError`` when no secret is given, or an empty one (an unset setting read as ``""``:
    anyone can sign with an empty key, so it would let every request through), for a
    ``tolerance`` that is no number of seconds from 0 (NaN would let every stamp through), and
    for a body signed right that is no JSON object.
    """
    secrets = [secret] if isinstance(secret, str) else list(secret)
    if not secrets or not all(isinstance(s, str) and s for s in secrets):
        raise ValueError("verify_signature needs the webhook's secret (or secrets), each a non-empty string")
    if isinstance(tolerance, bool) or not isinstance(tolerance, int | float) or not 0 <= tolerance < math.inf:
        raise ValueError(f"tolerance is a number of seconds from 0, not {tolerance!r}")
    lowered = {k.lower(): v for k, v in headers.items()}
    stamp = lowered.get(TIMESTAMP_HEADER.lower(), "")
    given = [v.strip() for v in lowered.get(SIGNATURE_HEADER.lower(), "").split(",") if v.strip()]
    # a stamp of digits, at most 15 of them (anyone may send the headers: 400 digits were an
    # OverflowError, 5,000 a ValueError from int(), where the receiver answers a bad request)
    if not (stamp.isascii() and stamp.isdigit() and len(stamp) <= 15) or not given:
        raise WebhookSignatureError("missing or malformed Pausepoint-Timestamp / Pausepoint-Signature headers")
    moment = time.time() if now is None else now
    if abs(moment - int(stamp)) > tolerance:
        raise WebhookSignatureError(f"the timestamp is more than {tolerance:g}s away from now: a replay?")
    expected = [sign(s, body, int(stamp)) for s in secrets]
    if not any(hmac.compare_digest(e, g) for e in expected for g in given):
        raise WebhookSignatureError("the signature does not match the body")
    try:
        parsed = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        parsed = None
    if not isinstance(parsed, dict):  # signed, yet no event this library sent
        raise ValueError("the signed body is not a JSON object: not a pausepoint event")
    return parsed


_ANSWER_MARKS = {"deny": ":no_entry:", "cancel": ":no_entry_sign:"}


def answer_mark(decision: str) -> str:
    """The emoji a Slack message marks an answer with (a denial, a cancel, else a tick): the
    one-line message and the card's update alike."""
    return _ANSWER_MARKS.get(decision, ":white_check_mark:")


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
        mark = answer_mark(entry["decision"])  # as the Slack card's update marks it
        return f"{mark} `{entry['name']}` in {session} of *{body['agent']}*: {entry['decision']} by {who}"
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
