"""Reaching approvers where they are: an app with approval links, Slack and email, served on
loopback, and what stands in for Slack and a mail server.

- ``build_reach_app``: the ``treasury`` agent — ``transfer_money`` requires approval (high risk,
  an hour to decide, separation of duties, the ``treasury`` role: alice, bob, carol),
  ``pay_vendor`` needs two approvals, ``deploy`` pauses itself (a restart without
  ``tool_approved`` pauses it again) — announced to a JSON webhook, a Slack incoming webhook and
  an SMTP server, with ``ApprovalLinks`` and a ``SlackApp``. Its clock can be moved
  (``Clock.advance``) to expire links and pauses. ``build_tenant_reach_app``: the same agent
  shared by two tenants, acme and globex, with the same people (and names) in each.
- ``SlackWire``: a local server that speaks Slack's side of the wire: it takes incoming-webhook
  posts and ``response_url`` posts, and ``callback`` makes the interactivity callback Slack
  would send for a button, with real Slack signature headers (``slack_sdk``'s signer).
- ``Mailbox``: ``aiosmtpd`` on loopback, keeping every message it accepts (the first
  ``refuse_first`` are refused with a 451, so the outbox retries).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import email
import email.policy
import hashlib
import hmac
import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from email.message import EmailMessage
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
from aiosmtpd.controller import Controller
from pydantic import BaseModel
from slack_sdk.signature import SignatureVerifier
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from pausepoint import ApprovalPolicy, Interrupt, ModelRequest, PauseDisplay, Pausepoint, Role, ToolRunContext
from pausepoint.server import BearerTokens, Identity, OwnerPolicy, WebhookSender, create_app
from pausepoint.server._auth import tenant_members
from pausepoint.stores import SqliteSessionStore
from pausepoint.testing import ScriptedModel, Step, last_tool_results, tool_call
from pausepoint.webhooks import ApprovalLinks, EmailNotifier, SlackApp, Webhook
from tests.server.harness import serve_in_thread
from tests.server.ops_harness import Receiver

LINK_SECRET = "link-secret-for-tests-0123456789"
SLACK_SECRET = "slack-signing-secret-for-tests"
HOOK_SECRET = "whsec-reach"
CONSOLE = "https://pp.example.com/console"
TEAM = "T0TEAM"
TOKENS = {f"{name}-token": name for name in ("dave", "alice", "bob", "carol", "mallory", "eve")}
SLACK_USERS = {
    "UALICE": "alice",
    "UBOB": "bob",
    "UCAROL": "carol",
    "UMALLORY": "mallory",
    "UEVE": "eve",
    "UDAVE": "dave",
}
#: two tenants with the same people: dave asks, alice approves (``build_tenant_reach_app``)
TENANT_TOKENS: dict[str, str | Identity] = {
    **{
        f"{tenant}-{name}-token": Identity(name, tenant=tenant)
        for tenant in ("acme", "globex")
        for name in ("dave", "alice")
    },
    "ops-token": "ops",
}
TENANT_SLACK_USERS = {"UACMEALICE": "acme/alice", "UGLOBEXALICE": "globex/alice"}
ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts"


def auth(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {name}-token"}


class Clock:
    """The app's clock: now, moved on by ``advance``."""

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def advance(self, by: timedelta) -> None:
        self.offset += by


class Transfer(BaseModel):
    amount: Decimal
    to_account: str


class Deploy(BaseModel):
    target: str


_ASKED = re.compile(r"^(Transfer|Pay) \$(\d+(?:\.\d+)?) to (\S+)$|^Deploy (\S+)$")


def script(request: ModelRequest) -> Step:
    """Asks for what the user wrote: "Transfer $700 to savings", "Pay $90 to acme", "Deploy web"."""
    last = request.messages[-1]
    if last.role == "user":
        found = _ASKED.match(last.text.strip())
        if found is None:
            return f"You said: {last.text}"
        if found[4]:
            return tool_call("deploy", {"target": found[4]})
        tool = "transfer_money" if found[1] == "Transfer" else "pay_vendor"
        return tool_call(tool, {"amount": found[2], "to_account": found[3]})
    results = last_tool_results(request)
    return " ".join(json.dumps(result) if not isinstance(result, str) else result for result in results.values())


@dataclass
class Reach:
    """What the served app's tools did, and where its notifications went."""

    ledger: list[str] = field(default_factory=list)
    clock: Clock = field(default_factory=Clock)


def build_reach_app(reach: Reach, store_path: str, *, hook_url: str, slack_url: str, smtp_port: int) -> Starlette:
    """The treasury app, announced to ``hook_url`` (JSON), ``slack_url`` (Slack's incoming
    webhook) and the SMTP server on ``smtp_port``; links expire after ten minutes."""
    ai = Pausepoint(
        clock=reach.clock,
        webhooks=[
            *_hooks(hook_url, slack_url),
            EmailNotifier("mail", **_smtp(smtp_port), to=["treasury@example.com"]),
        ],
    )
    define_treasury(ai, reach, store_path, members={"alice": ["treasury"], "bob": ["treasury"], "carol": ["treasury"]})
    return create_app(
        ai,
        auth=BearerTokens(TOKENS),
        policy=OwnerPolicy(approvers={"alice", "bob", "carol", "mallory"}),
        expiry_interval=0.2,
        webhooks=WebhookSender(ai, interval=0.2),
        links=ApprovalLinks(LINK_SECRET, CONSOLE + "/", ttl=timedelta(minutes=10)),
        slack=SlackApp(SLACK_SECRET, users=SLACK_USERS, teams={TEAM}, response_url_prefix=slack_url + "/actions/"),
    )


def build_tenant_reach_app(
    reach: Reach, store_path: str, *, hook_url: str, slack_url: str, smtp_port: int
) -> Starlette:
    """The treasury app shared by two tenants, acme and globex, with the same people in each
    (``TENANT_TOKENS``: dave asks, alice approves and holds treasury — in her tenant only) and
    one Slack workspace (``TENANT_SLACK_USERS``: each alice's Slack account names her as
    ``"tenant/alice"``). Each tenant's pauses are emailed to that tenant alone
    (``EmailNotifier(tenants=...)``: ``acme-mail`` to acme's desk, ``globex-mail`` to globex's);
    the JSON webhook and the Slack channel hear both. ``ops`` (no tenant) reads the outbox."""
    ai = Pausepoint(
        clock=reach.clock,
        webhooks=[
            *_hooks(hook_url, slack_url),
            *(EmailNotifier(f"{t}-mail", **_smtp(smtp_port), to=[f"{t}-desk@example.com"], tenants={t})
              for t in ("acme", "globex")),
        ],
    )  # fmt: skip
    define_treasury(
        ai, reach, store_path, members=tenant_members({"acme/alice": ["treasury"], "globex/alice": ["treasury"]})
    )
    return create_app(
        ai,
        auth=BearerTokens(TENANT_TOKENS),
        policy=OwnerPolicy(approvers={"acme/alice", "globex/alice"}),
        operators={"ops"},
        expiry_interval=0.2,
        webhooks=WebhookSender(ai, interval=0.2),
        links=ApprovalLinks(LINK_SECRET, CONSOLE + "/", ttl=timedelta(minutes=10)),
        slack=SlackApp(
            SLACK_SECRET, users=TENANT_SLACK_USERS, teams={TEAM}, response_url_prefix=slack_url + "/actions/"
        ),
    )


def _hooks(hook_url: str, slack_url: str) -> list[Webhook]:
    """The JSON webhook (``ops``) and the Slack channel (``desk``) every pause is announced to."""
    return [
        Webhook("ops", hook_url, secret=HOOK_SECRET, events={"pause"}),
        Webhook("desk", slack_url + "/services/T0TEAM/B0/x", format="slack", events={"pause"}, backoff=0.05),
    ]


def _smtp(port: int) -> dict[str, Any]:
    """An ``EmailNotifier``'s settings for the test mail server on ``port``."""
    return {"host": "127.0.0.1", "port": port, "security": "none", "sender": "pausepoint@example.com",
            "backoff": 0.05, "timeout": 5}  # fmt: skip


def define_treasury(ai: Pausepoint, reach: Reach, store_path: str, *, members: Any) -> None:
    """The ``treasury`` agent on ``ai``: its tools, and the approval policy whose ``treasury``
    role ``members`` (``ApprovalPolicy(members=...)``) hold."""

    @ai.tool(
        requires_approval=True,
        display=PauseDisplay(
            title="Transfer ${amount} to {to_account}", summary="Money leaves the company.", risk="high"
        ),
    )
    async def transfer_money(input: Transfer) -> str:
        """Move money."""
        reach.ledger.append(f"transfer {input.amount}->{input.to_account}")
        return f"Transferred ${input.amount} to {input.to_account}."

    @ai.tool(requires_approval=True, display=PauseDisplay(title="Pay ${amount} to {to_account}", risk="normal"))
    async def pay_vendor(input: Transfer) -> str:
        """Pay a vendor."""
        reach.ledger.append(f"pay {input.amount}->{input.to_account}")
        return f"Paid ${input.amount} to {input.to_account}."

    @ai.tool(display=PauseDisplay(title="Deploy {target}", risk="low"))
    async def deploy(input: Deploy, ctx: ToolRunContext) -> str:
        """Deploy a service."""
        if not (ctx.resumed_metadata or {}).get("tool_approved"):
            raise Interrupt({"reason": "deploys need a person"})
        reach.ledger.append(f"deploy {input.target}")
        return f"Deployed {input.target}."

    policy = ApprovalPolicy(
        roles={"treasury": Role(tools=["transfer_money", "pay_vendor"], decisions=["approve", "deny"])},
        members=members,
        quorum={"pay_vendor": 2},
        separation_of_duties=True,
        ttl={"transfer_money": timedelta(hours=1)},
    )
    ai.define_agent(
        name="treasury",
        model=ScriptedModel(script),
        tools=[transfer_money, pay_vendor, deploy],
        store=SqliteSessionStore(store_path),
        approval=policy,
    )


# -- Slack's side of the wire ---------------------------------------------------------------------


@dataclass
class SlackWire:
    """Slack, as far as the app can tell: incoming-webhook posts (``messages``) and posts to a
    callback's ``response_url`` (``responses``), each the JSON it was sent."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    responses: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""
    _changed: threading.Condition = field(default_factory=threading.Condition)

    def app(self) -> Starlette:
        async def incoming(request: Request) -> Response:
            return self._keep(self.messages, await request.json())

        async def respond(request: Request) -> Response:
            return self._keep(self.responses, await request.json())

        return Starlette(
            routes=[
                Route("/services/{team}/{bot}/{key}", incoming, methods=["POST"]),
                Route("/actions/{team}/{n}/{key}", respond, methods=["POST"]),
            ]
        )

    def _keep(self, into: list[dict[str, Any]], body: dict[str, Any]) -> Response:
        with self._changed:
            into.append(body)
            self._changed.notify_all()
        return JSONResponse({"ok": True})

    async def wait(self, what: str, count: int, max_wait: float = 30.0) -> list[dict[str, Any]]:
        """The first ``count`` of ``messages`` or ``responses``, once they came."""
        kept: list[dict[str, Any]] = getattr(self, what)

        def wait() -> list[dict[str, Any]]:
            with self._changed:
                if not self._changed.wait_for(lambda: len(kept) >= count, max_wait):
                    raise AssertionError(f"{len(kept)} Slack {what} came, not {count}")
                return list(kept[:count])

        return await asyncio.to_thread(wait)

    def callback(
        self,
        message: dict[str, Any],
        action: str = "approve",
        *,
        user: str = "UALICE",
        team: str = TEAM,
        secret: str = SLACK_SECRET,
        stamp: int | None = None,
        value: str | None = None,
    ) -> tuple[bytes, dict[str, str]]:
        """The body and headers of the callback Slack sends when ``user`` presses the
        ``action`` button of ``message`` (signed with ``secret`` at ``stamp``)."""
        [buttons] = [b for b in message["blocks"] if b["type"] == "actions"]
        [button] = [b for b in buttons["elements"] if b["action_id"] == f"pausepoint.{action}"]
        payload = {
            "type": "block_actions",
            "team": {"id": team, "domain": "acme"},
            "user": {"id": user, "username": user.lower(), "team_id": team},
            "api_app_id": "A0APP",
            "container": {"type": "message", "message_ts": "1767225600.000100", "channel_id": "C0DESK"},
            "channel": {"id": "C0DESK", "name": "treasury"},
            "message": message,
            "response_url": f"{self.url}/actions/{team}/1/{user}",
            "actions": [
                {
                    "action_id": button["action_id"],
                    "block_id": buttons["block_id"],
                    "type": "button",
                    "value": value if value is not None else button.get("value"),
                    "action_ts": "1767225601.000200",
                }
            ],
        }
        body = urlencode({"payload": json.dumps(payload)}).encode()
        return body, slack_headers(body, secret=secret, stamp=stamp)


def slack_headers(body: bytes, *, secret: str = SLACK_SECRET, stamp: int | None = None) -> dict[str, str]:
    """Slack's headers for ``body``: ``X-Slack-Request-Timestamp`` and its ``X-Slack-Signature``."""
    when = str(int(time.time()) if stamp is None else stamp)
    try:
        signature = SignatureVerifier(secret).generate_signature(timestamp=when, body=body)
    except UnicodeDecodeError:  # Slack signs bytes; slack_sdk's signer takes text only
        signature = "v0=" + hmac.new(secret.encode(), f"v0:{when}:".encode() + body, hashlib.sha256).hexdigest()
    assert signature is not None
    return {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": when,
        "X-Slack-Signature": signature,
    }


# -- a mail server --------------------------------------------------------------------------------


@dataclass
class Mailbox:
    """``aiosmtpd`` on loopback: the messages it accepted, parsed; the first ``refuse_first``
    attempts get a 451 (try again later)."""

    refuse_first: int = 0
    messages: list[EmailMessage] = field(default_factory=list)
    attempts: list[EmailMessage] = field(default_factory=list)  # every message sent, refused or not
    _changed: threading.Condition = field(default_factory=threading.Condition)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 - aiosmtpd's name
        with self._changed:
            parsed = email.message_from_bytes(envelope.content, policy=email.policy.default)
            assert isinstance(parsed, EmailMessage)
            self.attempts.append(parsed)
            if len(self.attempts) <= self.refuse_first:
                return "451 4.3.0 try again later"
            self.messages.append(parsed)
            self._changed.notify_all()
        return "250 OK"

    async def wait(self, count: int, max_wait: float = 30.0) -> list[EmailMessage]:
        def wait() -> list[EmailMessage]:
            with self._changed:
                if not self._changed.wait_for(lambda: len(self.messages) >= count, max_wait):
                    raise AssertionError(f"{len(self.messages)} emails came, not {count}")
                return list(self.messages[:count])

        return await asyncio.to_thread(wait)


@contextlib.contextmanager
def smtp_server(mailbox: Mailbox) -> Iterator[int]:
    """Serve ``mailbox`` over SMTP on a free loopback port; yields the port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller = Controller(mailbox, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield port
    finally:
        controller.stop()


def write_artifact(name: str, value: Any) -> None:
    """Keep what a test received under ``artifacts/`` (the Slack messages the docs show)."""
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / name).write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


# -- the served app -------------------------------------------------------------------------------


@dataclass
class Served:
    """The treasury app served on loopback (``base``), with what stands in for its receivers."""

    base: str
    reach: Reach
    hooks: Receiver
    slack: SlackWire
    mailbox: Mailbox

    @property
    def ledger(self) -> list[str]:
        return self.reach.ledger

    def session(self, session_id: str) -> str:
        return f"{self.base}/v1/agents/treasury/sessions/{session_id}"

    async def ask(self, http: httpx.AsyncClient, text: str = "Transfer $700 to savings", who: str = "dave") -> dict:
        """Send ``text`` as ``who`` in a new session; the reply (a pause, for the scripted asks)."""
        reply = await http.post(f"{self.base}/v1/agents/treasury/sessions", json={"message": text}, headers=auth(who))
        assert reply.status_code == 200, reply.text
        return dict(reply.json())

    async def link_of(self, session_id: str, pause_id: str) -> str:
        """The approval link the JSON webhook announced the pause ``pause_id`` with."""
        for count in range(1, 50):
            for received in await self.hooks.wait_for(count):
                body = received.json
                if body["session_id"] == session_id and body["interrupt"]["pause_id"] == pause_id:
                    return str(body["link"])
        raise AssertionError("the pause was never announced")

    async def state(
        self, http: httpx.AsyncClient, session_id: str, reader: str = "alice"
    ) -> tuple[list[dict], list[dict]]:
        """The session's open pauses and audit trail (read as the desk's alice, or ``reader``)."""
        pauses = (await http.get(self.session(session_id) + "/interrupts", headers=auth(reader))).json()
        audit = (await http.get(self.session(session_id) + "/audit", headers=auth(reader))).json()
        return pauses["interrupts"], audit["entries"]


def token_of(link: str) -> str:
    assert link.startswith(CONSOLE + "/#link="), link
    return link.split("#link=", 1)[1]


def link_token(session_id: str, ref: str, pause_id: str, expires: int) -> str:
    """An approval link's token, signed with the server's secret as ``_links`` documents the
    format (base64url JSON, a dot, base64url HMAC-SHA256 over "pausepoint-link." + payload)."""
    fields = ["v1", "treasury", session_id, ref, pause_id, expires]
    payload = _b64(json.dumps(fields, separators=(",", ":")).encode())
    return (
        payload + "." + _b64(hmac.new(LINK_SECRET.encode(), b"pausepoint-link." + payload.encode(), "sha256").digest())
    )


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@contextlib.contextmanager
def serve_reach(tmp_path: Path, *, refuse_mail: int = 0, tenants: bool = False) -> Iterator[Served]:
    """The treasury app and its receivers, each served on loopback (``tenants``: the app two
    tenants share, ``build_tenant_reach_app``)."""
    reach, hooks, wire, mailbox = Reach(), Receiver(), SlackWire(), Mailbox(refuse_first=refuse_mail)
    build = build_tenant_reach_app if tenants else build_reach_app
    with serve_in_thread(hooks.app) as hook_url, serve_in_thread(wire.app) as slack_url, smtp_server(mailbox) as port:
        wire.url = slack_url
        store = str(tmp_path / "sessions.db")

        def factory() -> Starlette:
            return build(reach, store, hook_url=hook_url + "/hook", slack_url=slack_url, smtp_port=port)

        with serve_in_thread(factory) as base:
            yield Served(base, reach, hooks, wire, mailbox)
