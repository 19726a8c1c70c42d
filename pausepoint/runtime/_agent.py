"""``Agent``: a model, a system prompt, tools and a store — and the sessions it serves.

What the agent keeps for the sessions it serves in this process — their cached states, their
locks, checkpoint writes, background tasks, detached turns running here — is a
``LocalSessions`` (``_sessions``); how its records reach the store, an ``Appender``
(``_journal``).
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

from ..approval._approvals import Approvals
from ..approval._policy import ApprovalPolicy
from ..approval._roles import NOT_SAID, SessionTenant
from ..content._jsondata import JsonLimits, time_text
from ..errors import DefinitionError, PausepointError
from ..models._model import Model, ToolDefinition
from ..session._grants import Grant
from ..session._interrupts import PendingInterrupt, ToolResponse, ToolRestart
from ..session._response import AgentResponse
from ..stores import SessionStore, SessionSummary
from ..tools._display import PauseView, expiry_note, render
from ..tools._tool import Tool, is_async_callable
from ..turn._events import EVENT_KINDS
from ..turn._journal import Appender
from ..turn._telemetry import Telemetry
from ..webhooks import Webhook
from ._arguments import checked_page
from ._chat import Chat
from ._sessions import LocalSessions

__all__ = ["Agent", "Clock", "ExpiryPolicy", "deny_on_expiry"]

Clock = Callable[[], datetime]
ExpiryPolicy = Callable[[PendingInterrupt], Any]


def deny_on_expiry(interrupt: PendingInterrupt) -> Any:
    """The default expiry policy: the model sees a denial explaining that nobody answered in
    time — or, for a call short of its quorum, how many approvals it had by then."""
    when = time_text(interrupt.expires_at) if interrupt.expires_at else "its deadline"
    approval = interrupt.approval
    if approval is not None and approval.approved_by:
        had = f"{len(approval.approved_by)} of the {approval.required} approvals it needs"
        return {"denied": True, "reason": f"expired: it had {had} by {when}"}
    return {"denied": True, "reason": f"expired: nobody answered before {when}"}


log = logging.getLogger("pausepoint")


class Agent:
    """An agent definition. Create with ``Pausepoint.define_agent``; talk to it with ``chat()``.

    ``agent.sessions`` — what this process keeps for the sessions the agent serves (cached
    states, locks, background tasks) — is internal, not part of the public API.
    """

    def __init__(
        self,
        *,
        name: str,
        model: Model,
        tools: list[Tool],
        store: SessionStore,
        clock: Clock,
        system: str | None = None,
        description: str | None = None,
        config: dict[str, Any] | None = None,
        max_turns: int | None = 10,
        tool_errors: Literal["model", "fail"] = "model",
        allow_changed_tools: bool = False,
        on_expiry: ExpiryPolicy = deny_on_expiry,
        abandon_after: timedelta | float = timedelta(minutes=15),
        cache_size: int = 1024,
        wait_timeout: float = 120.0,
        json_limits: JsonLimits | None = None,
        abort_poll: float = 0.5,
        webhooks: Sequence[Webhook] = (),
        telemetry: Telemetry | None = None,
        approval: ApprovalPolicy | None = None,
        known_tools: set[str] | None = None,
    ) -> None:
        if max_turns is None:  # as in Genkit: the default limit
            max_turns = 10
        _check_options(name, max_turns, tool_errors, cache_size)
        self.name = name
        self.model = model
        self.system = system
        #: what the agent does, for people and clients (never the system prompt)
        self.description = description or ""
        self.config = dict(config or {})
        # What the sessions accept (see JsonLimits); strings are bounded by the store's records.
        self.json_limits = (json_limits or JsonLimits()).bounded_by(store.max_record_bytes)
        self.clock = clock
        self.max_turns = max_turns
        self.tool_errors = tool_errors
        self.allow_changed_tools = allow_changed_tools
        self.on_expiry = _expiry_policy(name, on_expiry)
        self.wait_timeout = wait_timeout
        self.abandon_after = _duration(name, "abandon_after", abandon_after)
        if isinstance(abort_poll, bool) or not isinstance(abort_poll, int | float) or not abort_poll > 0:
            raise DefinitionError(
                f"agent {name!r}: abort_poll must be a positive number of seconds, not {abort_poll!r}"
            )
        # How often a detached turn looks in the log for an abort written by another process.
        self.abort_poll = abort_poll
        self.tools: dict[str, Tool] = {}
        for tool in tools:
            if tool.name in self.tools:
                raise DefinitionError(f"agent {name!r}: two tools are named {tool.name!r}")
            self.tools[tool.name] = tool
        self.tool_definitions: list[ToolDefinition] = [t.definition for t in tools]
        self._known_tools = set(self.tools) | (known_tools or set())
        self.approval_policy = approval or ApprovalPolicy()
        self.webhooks = [w for w in webhooks if w.agents is None or name in w.agents]
        # Which webhooks each event kind goes to.
        self._event_targets: dict[str, tuple[str, ...]] = {
            kind: tuple(w.name for w in self.webhooks if w.wants(kind, name)) for kind in EVENT_KINDS
        }
        # The webhooks limited to some tenants, and those tenants (the rest hear every session).
        self._webhook_tenants: dict[str, frozenset[str]] = {
            w.name: frozenset(w.tenants) for w in self.webhooks if w.tenants is not None
        }
        self.sessions = LocalSessions(
            Appender(store, self._event_targets, self._webhook_tenants),
            telemetry or Telemetry(tracing=False),
            cache_size=cache_size,
            agent=name,
        )
        """Internal, not part of the public API: what this process keeps for the sessions the agent
        serves (``LocalSessions``: cached states, locks, background tasks, checkpoint writes)."""

    def __repr__(self) -> str:
        return f"<Agent {self.name} model={self.model.name}>"

    def add_webhook(self, webhook: Webhook) -> None:
        """Tell this agent about ``webhook`` after it was defined, as if ``define_agent`` had
        been given it: from now on, its sessions' events that the webhook wants (its ``events``,
        ``tenants``) go to the outbox for it. Every process serving the agent needs the same
        webhooks. Raises ``DefinitionError`` when the agent has a webhook of that name already,
        or ``webhook.agents`` leaves this agent out. (``Pausepoint.add_webhook`` adds one to
        every agent it wants.)"""
        if not isinstance(webhook, Webhook):
            raise DefinitionError(f"agent {self.name!r}: {webhook!r} is not a Webhook")
        if any(w.name == webhook.name for w in self.webhooks):
            raise DefinitionError(f"agent {self.name!r}: two webhooks are named {webhook.name!r}")
        if webhook.agents is not None and self.name not in webhook.agents:
            raise DefinitionError(f"agent {self.name!r}: the webhook {webhook.name!r} is for other agents")
        self.webhooks.append(webhook)
        # The agent's Appender holds these two tables and reads them on every append: filled in
        # place, they take effect at once.
        for kind in EVENT_KINDS:
            if webhook.wants(kind, self.name):
                self._event_targets[kind] = (*self._event_targets.get(kind, ()), webhook.name)
        if webhook.tenants is not None:
            self._webhook_tenants[webhook.name] = frozenset(webhook.tenants)

    @property
    def store(self) -> SessionStore:
        """Where this agent's sessions are kept. Assign another store only before the agent
        serves any session (the CLI's ``--store`` does)."""
        return self.sessions.store

    @store.setter
    def store(self, store: SessionStore) -> None:
        self.sessions.appender = Appender(store, self._event_targets, self._webhook_tenants)

    @property
    def telemetry(self) -> Telemetry:
        """Where this agent's spans and metrics go (the app's ``Telemetry``)."""
        return self.sessions.telemetry

    @telemetry.setter
    def telemetry(self, telemetry: Telemetry) -> None:
        self.sessions.telemetry = telemetry

    @property
    def checkpoint_every(self) -> int | None:
        """How many records past its checkpoint a session may grow before a new one is written
        in the background (default 64; None: never write checkpoints — those in the store are
        still read). Settable."""
        return self.sessions.checkpoint_every

    @checkpoint_every.setter
    def checkpoint_every(self, every: int | None) -> None:
        if every is not None and (isinstance(every, bool) or not isinstance(every, int) or every < 1):
            raise DefinitionError(
                f"agent {self.name!r}: checkpoint_every must be a whole number of at least 1, or None, not {every!r}"
            )
        self.sessions.checkpoint_every = every

    @property
    def approval_policy(self) -> ApprovalPolicy:
        """Who approves which of this agent's calls, and what decides without a person (the
        agent's ``ApprovalPolicy``, then the app's). Assign a new policy to change it (the
        settings a pause was made with stay with that pause)."""
        return self.approvals.policy

    @approval_policy.setter
    def approval_policy(self, policy: ApprovalPolicy) -> None:
        if not isinstance(policy, ApprovalPolicy):
            raise DefinitionError(f"agent {self.name!r}: approval must be an ApprovalPolicy, not {policy!r}")
        policy.check_tools(self.tools, self._known_tools, self.name)
        #: the approval package's one entry point: the policy applied to this agent's tools (internal)
        self.approvals = Approvals(policy, self.tools)

    def chat(self, session_id: str | None = None, *, principal: str | None = None, tenant: str | None = None) -> Chat:
        """A chat on a new session, or on the session ``session_id``.

        ``principal`` is who is acting (recorded in the audit trail; a new session's owner).
        ``tenant`` is the tenant a new session belongs to — its owner's, kept in its summary
        (``list_sessions(tenant=...)``) and its events; a session created without one has none,
        and an existing session keeps the tenant it was created with.
        Nothing is read or written until the first call. A ``session_id`` no session has yet is
        created by the first ``send`` (or ``detach``), as in Genkit — the id must be 1 to 128
        letters, digits or ``. _ : @ -``, starting with a letter or digit (``InvalidSessionId``);
        reads and resumes of an unknown session raise ``SessionNotFound``.
        """
        return Chat(self, session_id, principal, tenant=tenant)

    def approval(self, interrupt: PendingInterrupt, *, grant: Grant | None = None) -> ToolResponse | ToolRestart:
        """The answer that approves ``interrupt``, as the console and the terminal chat give it.

        For an interrupt-only tool (``define_interrupt``): a response saying yes, fitted to its
        output schema (``{"approved": True}`` without one). For a tool that paused itself, or a
        call paused for approval: a restart with ``resumed_metadata={"tool_approved": True}``
        (the call runs with exactly the input shown). ``grant`` approves later calls too. Raises
        ``ValueError`` when the tool is unknown or its output schema needs more than a yes
        (answer it explicitly).
        """
        if interrupt.name not in self.tools:
            raise ValueError(f"agent {self.name!r} has no tool {interrupt.name!r}")
        return self.approvals.approval(interrupt, grant)

    def view(self, interrupt: PendingInterrupt, *, tenant: SessionTenant = NOT_SAID) -> PauseView:
        """How ``interrupt`` reads to the person deciding on it: title, summary, the input fields
        that matter, risk, what happens if nobody answers in time, and — for a pause the approval
        policy governs — where its approval stands ("1 of 2 approvals", who may still decide).

        ``tenant`` is the tenant of the interrupt's session (None: of no tenant; a server knows it
        from the session's summary). Members kept per tenant (``[tenants]`` of ``pausepoint
        serve``) are listed for the pause's ``approval.may_approve``, ``may_deny`` and
        ``may_respond`` from that tenant — not the reader's: an operator reads other tenants'
        pauses. Left out, such members cannot be listed, and those lists are None (read as
        "anyone who may answer the session"); members given as a mapping are listed either way.

        Rendered from the tool's ``PauseDisplay`` (or defaults from its input schema); the REST
        API, the console and the terminal chat all show this. Never raises.
        """
        expiry = None
        if interrupt.expires_at is not None:
            expiry = self.approvals.handed_on_note(interrupt) or expiry_note(self.on_expiry, deny_on_expiry)
        tool = self.tools.get(interrupt.name)
        if tool is None:
            view = render(None, None, interrupt.name, interrupt.input, on_expiry=expiry)
        else:
            view = tool.view(interrupt.input, on_expiry=expiry)
        if interrupt.approval is None:
            return view
        return dataclasses.replace(view, approval=self.approvals.view(interrupt, tenant))

    async def list_sessions(
        self,
        *,
        owner: str | None = None,
        has_pending: bool | None = None,
        expiring_before: datetime | None = None,
        limit: int = 100,
        offset: int = 0,
        tenant: str | None = None,
    ) -> list[SessionSummary]:
        """This agent's sessions, most recently updated first (an approval inbox: ``has_pending=True``;
        ``tenant``: only that tenant's sessions). ``InvalidRequest`` for a ``limit`` or ``offset``
        that is no integer from 0 up, or a ``has_pending`` that is no bool, before any store is
        asked: every store answers the same arguments the same way."""
        checked_page(limit, offset, has_pending)
        # Only asked of the store when given: a store of one's own written before tenants lists as before.
        narrowed = {"tenant": tenant} if tenant is not None else {}
        return await self.store.list_sessions(
            owner=owner,
            agent=self.name,
            has_pending=has_pending,
            expiring_before=expiring_before,
            limit=limit,
            offset=offset,
            **narrowed,
        )

    async def settle_expired(self, *, limit: int = 100) -> list[AgentResponse]:
        """Resolve expired pauses of this agent's sessions by the expiry policy (for a periodic job).
        A session that cannot be settled now (busy in another process, its store failing) is
        logged and left for the next pass: it never holds up the others."""
        due = await self.list_sessions(expiring_before=self.clock(), limit=limit)
        responses = []
        for summary in due:
            try:
                response = await self.chat(summary.session_id).settle_expired()
            except PausepointError as exc:
                log.warning("agent %r: session %r not settled this time: %s", self.name, summary.session_id, exc)
                continue
            if response is not None:
                responses.append(response)
        return responses


def _expiry_policy(agent: str, policy: ExpiryPolicy) -> ExpiryPolicy:
    """``policy``, a plain function of the expired interrupt; ``DefinitionError`` for anything
    else (an async one included: it decides as the pause is settled)."""
    if not callable(policy) or is_async_callable(policy):
        raise DefinitionError(
            f"agent {agent!r}: on_expiry must be a plain function of the expired interrupt (not async: it "
            f"decides as the pause is settled), not {policy!r}"
        )
    return policy


def _duration(agent: str, option: str, value: object) -> timedelta:
    """``value``, a ``timedelta`` or number of seconds, zero or more, as a ``timedelta``;
    ``DefinitionError`` for anything else."""
    duration = value
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            duration = timedelta(seconds=value)
        except (OverflowError, ValueError):  # inf, nan, or past what a timedelta holds
            duration = None
    if not isinstance(duration, timedelta) or duration < timedelta(0):
        raise DefinitionError(
            f"agent {agent!r}: {option} must be a timedelta or number of seconds, zero or more, not {value!r}"
        )
    return duration


#: an agent's name, as one segment of the URLs that name it (REST, the Genkit wire, links)
_AGENT_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


def _check_options(name: str, max_turns: int, tool_errors: str, cache_size: int) -> None:
    """Raise ``DefinitionError`` for an agent's name or option no agent can run with."""
    if not isinstance(name, str) or not name:
        raise DefinitionError(f"an agent needs a name (a non-empty string), not {name!r}")
    if not _AGENT_NAME.fullmatch(name):  # found by a probe: "team/bank" was listed, and no route reached it
        raise DefinitionError(
            f"agent name {name!r} cannot be one segment of a URL (/v1/agents/<name>): use letters, digits, "
            "'_', '-' and '.', a letter, a digit or '_' first, at most 128 characters"
        )
    for option, value in (("max_turns", max_turns), ("cache_size", cache_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise DefinitionError(f"agent {name!r}: {option} must be a whole number of at least 1, not {value!r}")
    if tool_errors not in ("model", "fail"):
        raise DefinitionError(f"agent {name!r}: tool_errors must be 'model' or 'fail'")
