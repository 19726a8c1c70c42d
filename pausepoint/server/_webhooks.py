"""``WebhookSender``: drains the outbox — claims due deliveries, POSTs them signed, settles them.

Every server process may run one (``create_app`` does when the app has webhooks): a claim
leases its deliveries, so processes never send the same delivery at the same time; a process
that dies mid-delivery leaves its lease to run out, and the delivery is sent again by whoever
claims it next (at least once; receivers de-duplicate on the event id). A failed attempt is due
again after the webhook's backoff; after ``max_attempts`` the delivery is ``failed`` and stays
in the outbox (``GET /v1/ops/deliveries?state=failed``, ``POST .../retry``). A delivery to a
webhook the app does not have (removed from the configuration) is failed once it has been due
``removed_after`` seconds, as nothing would ever send it (``_removed_webhooks``).

It wakes when the store announces new events (any process), when a retry it scheduled is due,
and every ``interval`` seconds (for retries scheduled by other processes).

What an attempt sends depends on the target: a ``json`` webhook the event body (a pause's with
its approval ``link`` when ``links`` are configured), a ``slack`` one a Block Kit card for a
pause (``_slack``: Approve / Deny buttons carrying the link's token) and a line of text for
anything else, an ``EmailNotifier`` a message through SMTP (``_email``). The link is made from
the pause alone, so every attempt sends the same bytes.

An attempt whose request cannot be made or written (a URL httpx cannot read, a header changed
after its ``Webhook`` checked it) fails as any attempt does: counted, retried, at last failed.
Its error (in the log, and ``last_error``) never quotes a header: one may hold a credential.
"""

from __future__ import annotations

import asyncio
import json
import logging
import smtplib
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

import httpx

from .._extras import installed_version
from ..approval._approve import approving_output
from ..errors import DefinitionError
from ..runtime._app import Pausepoint
from ..stores import Delivery, Event, SessionStore
from ..stores._base import event_stream
from ..turn._events import event_body
from ..webhooks import ApprovalLinks, EmailNotifier, Webhook, sign, slack_text
from . import _email
from ._feed import stores_of
from ._links import Link, link_expiry, make_token
from ._removed_webhooks import REMOVED_AFTER, RemovedWebhooks, webhooks_by_stream
from ._slack import card_message
from ._watch import stopped

__all__ = ["WebhookSender"]

log = logging.getLogger("pausepoint.webhooks")

_VERSION = installed_version()
_AGENT = "pausepoint" if _VERSION == "unknown" else f"pausepoint/{_VERSION}"


class WebhookSender:
    """Sends the outbox of every store of ``ai`` to the app's webhooks.

    ``lease`` is how long a claimed delivery is this sender's alone (longer than any webhook's
    timeout); ``batch`` how many deliveries one claim takes; ``interval`` the longest sleep.
    ``transport`` replaces httpx's network transport (tests, proxies). ``links`` signs the
    approval links pauses are announced with (``create_app(links=...)`` gives its own).
    ``removed_after``: how long a delivery to a webhook the app does not have stays due before
    it is failed (every process must have the same webhooks; a rolling deploy may not, a while).
    """

    def __init__(
        self,
        ai: Pausepoint,
        *,
        lease: float = 60.0,
        batch: int = 20,
        interval: float = 5.0,
        transport: httpx.AsyncBaseTransport | None = None,
        links: ApprovalLinks | None = None,
        removed_after: float = REMOVED_AFTER,
    ) -> None:
        for name, value, low in (
            ("lease", lease, 0.01),
            ("interval", interval, 0.01),
            ("removed_after", removed_after, 0),
        ):
            if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= 86_400:
                raise DefinitionError(
                    f"WebhookSender: {name} must be seconds from {low} to 86400 (a day), not {value!r}"
                )
        if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= 1000:
            raise DefinitionError(
                f"WebhookSender: batch must be a whole number of deliveries from 1 to 1000, not {batch!r}"
            )
        self.ai = ai
        self.links = links
        self.lease = timedelta(seconds=lease)
        self.batch = batch
        self.interval = interval
        self.webhooks: dict[str, Webhook] = {w.name: w for w in ai.all_webhooks()}
        targets: dict[int, tuple[SessionStore, set[str]]] = {}
        for agent in ai.agents.values():
            names = {w.name for w in agent.webhooks}
            if names:
                targets.setdefault(id(agent.store), (agent.store, set()))[1].update(names)
        self._stores = [(store, sorted(names)) for store, names in targets.values()]
        known = webhooks_by_stream(ai)
        after = timedelta(seconds=removed_after)
        self._removed = [
            RemovedWebhooks(
                store, known[event_stream(store)], ai.clock, removed_after=after, lease=self.lease, batch=batch
            )
            for store in stores_of(ai)
        ]
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._retries: list[float] = []  # monotonic times of retries this sender scheduled

    def ensure_running(self) -> None:
        """Start sending in the running loop, unless it runs already (or the app has no agents).
        Each webhook of each store has a loop of its own: a receiver that hangs or fails holds
        up its own deliveries, never another webhook's. Each store has one more, failing the
        deliveries to webhooks the app does not have (``_removed_webhooks``)."""
        if any(not t.done() for t in self._tasks):
            return
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._run(store, [target])) for store, targets in self._stores for target in targets
        ]
        self._tasks += [loop.create_task(self._fail_removed(removed)) for removed in self._removed]

    async def close(self) -> None:
        tasks, self._tasks = self._tasks, []
        await stopped(*tasks)
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def send_due(self) -> int:
        """One pass over every store: send what is due now. Returns how many were attempted."""
        sent = 0
        for store, targets in self._stores:
            sent += await self._send_due(store, targets)
        return sent

    async def _run(self, store: SessionStore, targets: list[str]) -> None:
        while True:
            try:
                head = await store.last_event()
                if await self._send_due(store, targets) >= self.batch:
                    continue  # more may be due
                await store.wait_for_events(head, self._next_wait())
            except Exception:  # a store or network hiccup must not end the sending for good
                log.exception("sending webhooks failed; trying again in %ss", self.interval)
                await asyncio.sleep(self.interval)

    async def _fail_removed(self, removed: RemovedWebhooks) -> None:
        """When it starts, then every tenth of ``removed_after`` (``interval`` at least), fail the
        overdue deliveries to webhooks the app does not have. A store that fails is said in one
        line once a streak, not every pass (a server with no webhooks runs this loop alone)."""
        spacing = max(self.interval, removed.removed_after.total_seconds() / 10)
        failing = False
        while True:
            try:
                await removed.sweep()
                failing = False
            except Exception as exc:  # a store or network hiccup: tried again next time
                if not failing:
                    log.warning("looking for deliveries to removed webhooks failed (%s); trying again", exc)
                failing = True
            await asyncio.sleep(spacing)

    def _next_wait(self) -> float:
        now = time.monotonic()
        self._retries = [t for t in self._retries if t > now]
        return min([self.interval, *(t - now for t in self._retries)])

    async def _send_due(self, store: SessionStore, targets: list[str]) -> int:
        claimed = await store.claim_deliveries(targets, self.ai.clock(), self.lease, self.batch)
        if claimed:
            await asyncio.gather(*(self._deliver(store, d) for d in claimed))
        return len(claimed)

    async def _deliver(self, store: SessionStore, delivery: Delivery) -> None:
        webhook = self.webhooks.get(delivery.target)
        if webhook is None:  # pragma: no cover - claims name only the webhooks we know
            return
        attempt = delivery.attempts + 1
        error = await self._post(webhook, delivery, attempt)
        now = self.ai.clock()
        retry_at = None
        if error is not None and attempt < webhook.max_attempts:
            delay = webhook.retry_delay(attempt)
            retry_at = now + timedelta(seconds=delay)
            self._retries.append(time.monotonic() + delay)
        settled = await store.settle_delivery(delivery, now, error=error, retry_at=retry_at)
        outcome = "delivered" if error is None else ("retry" if retry_at is not None else "failed")
        report: Callable[[str, str], None] | None = getattr(self.ai.telemetry.metrics, "webhook_attempted", None)
        if report is not None:
            report(webhook.name, outcome)
        if error is None:
            log.info("webhook %s: delivered %s event %s", webhook.name, delivery.event.kind, delivery.event.id)
        elif retry_at is not None:
            log.warning(
                "webhook %s: attempt %d for event %s failed (%s); trying again at %s",
                webhook.name,
                attempt,
                delivery.event.id,
                error,
                retry_at.isoformat(),
            )
        else:
            log.error(
                "webhook %s: event %s failed after %d attempts (%s); see GET /v1/ops/deliveries?state=failed",
                webhook.name,
                delivery.event.id,
                attempt,
                error,
            )
        if not settled:
            log.warning("webhook %s: the lease on event %s ran out before it was settled", webhook.name, delivery.id)

    async def _post(self, webhook: Webhook, delivery: Delivery, attempt: int) -> str | None:
        """Send one attempt; the error that made it fail, or None when the receiver took it."""
        event = delivery.event
        try:
            agent = self.ai.agents.get(event.agent)
            body = event_body(event, agent.view if agent is not None else None)
        except ValueError as exc:  # pragma: no cover - written by a newer pausepoint
            return f"the event cannot be read: {exc}"
        link = self._link(body)
        if isinstance(webhook, EmailNotifier):
            return await self._mail(webhook, event, body, link[1] if link else None)
        content = json.dumps(self._payload(webhook, body, link), ensure_ascii=False, separators=(",", ":")).encode()
        stamp = int(time.time())
        headers = {
            **webhook.headers,
            "Content-Type": "application/json",
            "User-Agent": _AGENT,
            "Pausepoint-Event-Id": event.id,
            "Pausepoint-Event-Type": event.kind,
            "Pausepoint-Timestamp": str(stamp),
            "Pausepoint-Attempt": str(attempt),
        }
        if webhook.secret:
            headers["Pausepoint-Signature"] = sign(webhook.secret, content, stamp)
        client = self._http()
        try:
            request = client.build_request(
                "POST", webhook.url, content=content, headers=headers, timeout=webhook.timeout
            )
        except Exception as exc:  # a URL or a header httpx cannot write: this attempt fails, and is counted
            return f"{type(exc).__name__}: the request could not be made (its URL or a header is unusable; not shown)"
        try:
            reply = await client.send(request)
        except httpx.LocalProtocolError:  # its words would quote the header HTTP refused: a secret, maybe
            return "LocalProtocolError: the request could not be written (a header HTTP refuses; not shown)"
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        if 200 <= reply.status_code < 300:
            return None
        return f"HTTP {reply.status_code}"

    def _payload(self, webhook: Webhook, body: dict[str, Any], link: tuple[str, str] | None) -> dict[str, Any]:
        """What a JSON or Slack webhook is sent for ``body``."""
        if webhook.format == "slack":
            if body["type"] != "pause":
                return {"text": slack_text(body)}
            token, url = link if link is not None else (None, None)
            approvable = self._approvable(body["agent"], body["interrupt"]["name"])
            return card_message(body["agent"], body["interrupt"], token=token, url=url, approvable=approvable)
        return body if link is None else {**body, "link": link[1]}

    def _link(self, body: Mapping[str, Any]) -> tuple[str, str] | None:
        """The approval link of a pause event (its token and URL), when links are configured."""
        if self.links is None or body["type"] != "pause":
            return None
        interrupt = body["interrupt"]
        expires = interrupt.get("expires_at")
        until = link_expiry(
            self.links,
            datetime.fromisoformat(interrupt["paused_at"]),
            datetime.fromisoformat(expires) if expires else None,
        )
        found = Link(body["agent"], body["session_id"], interrupt["ref"], interrupt["pause_id"], until)
        token = make_token(self.links, found)
        return token, self.links.url(token)

    def _approvable(self, agent_name: str, tool_name: str) -> bool:
        """Whether a yes can answer a pause of ``tool_name`` (else Slack shows no Approve)."""
        agent = self.ai.agents.get(agent_name)
        tool = agent.tools.get(tool_name) if agent is not None else None
        if tool is None or not tool.pauses_only:
            return True
        try:
            approving_output(tool)
        except ValueError:
            return False
        return True

    async def _mail(self, notifier: EmailNotifier, event: Event, body: dict[str, Any], url: str | None) -> str | None:
        """Send one attempt of an email; the error that made it fail, or None."""
        try:
            message = _email.compose(notifier, event, body, url)
            await asyncio.to_thread(_email.send, notifier, message)
        except (OSError, smtplib.SMTPException, ValueError) as exc:
            return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return None

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            options: dict[str, Any] = {"follow_redirects": False}
            if self._transport is not None:
                options["transport"] = self._transport
            self._client = httpx.AsyncClient(**options)
        return self._client
