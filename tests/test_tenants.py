"""Tenants in the Python API: a session belongs to the tenant it was created for (its creator's),
kept in its first record, its summary, its checkpoint and its events; listings narrow to a
tenant; webhooks limited to some tenants hear only theirs; pauses are counted by tenant with a
bounded label. A session created without a tenant has none, and is written as before."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client import generate_latest

from pausepoint import AgentFinishReason, Pausepoint
from pausepoint.metrics import PrometheusMetrics
from pausepoint.stores import InMemorySessionStore, SessionStore, SqliteSessionStore
from pausepoint.telemetry import Telemetry
from pausepoint.turn._events import event_body
from pausepoint.webhooks import Webhook
from tests.approval_apps import build

SECRET = "whsec-tenants"


async def paused(store: SessionStore | None = None, **options: Any) -> tuple[Any, Any]:
    """The approval tests' bank (``**options`` to ``build``), and a helper that pauses a transfer
    in a new session of ``tenant`` as ``principal``."""
    agent, _, _ = build(store or InMemorySessionStore(), **options)

    async def pause(principal: str, tenant: str | None) -> str:
        chat = agent.chat(principal=principal, tenant=tenant)
        res = await chat.send("pay 5 to savings")
        assert res.finish_reason == AgentFinishReason.INTERRUPTED
        return chat.session_id

    return agent, pause


async def test_a_session_belongs_to_the_tenant_it_was_created_for(store: SessionStore) -> None:
    agent, pause = await paused(store)
    acme = await pause("alice", "acme")
    globex = await pause("alice", "globex")
    none = await pause("alice", None)
    summaries = {s.session_id: s for s in await agent.list_sessions()}
    assert {i: (s.owner, s.tenant) for i, s in summaries.items()} == {
        acme: ("alice", "acme"),
        globex: ("alice", "globex"),
        none: ("alice", None),
    }
    assert [s.session_id for s in await agent.list_sessions(tenant="acme")] == [acme]
    assert [s.session_id for s in await agent.list_sessions(tenant="globex", has_pending=True)] == [globex]
    assert [s.session_id for s in await agent.list_sessions(owner="alice", tenant="acme")] == [acme]
    # Going on in an existing session keeps its tenant, whatever a later chat says.
    chat = agent.chat(acme, principal="alice", tenant="globex")
    [pending] = await chat.interrupts()
    await chat.approve(pending.ref)
    assert (await store.get_summary(acme)).tenant == "acme"  # type: ignore[union-attr]

    # The first record: a tenant's session names it; one of no tenant is written as before.
    first = {i: (await store.read(i)).entries[0].data for i in (acme, none)}  # type: ignore[union-attr]
    assert json.loads(first[acme])["tenant"] == "acme"
    assert b"tenant" not in first[none]
    assert list(json.loads(first[none])) == ["agent", "owner", "at", "kind"]


async def test_a_cold_process_keeps_the_tenant_read_from_a_checkpoint(tmp_path: Any) -> None:
    store = SqliteSessionStore(tmp_path / "s.db")
    try:
        agent, pause = await paused(store)
        agent.checkpoint_every = 1
        session = await pause("alice", "acme")
        await agent.sessions.settle()
        assert await store.read_checkpoint(session) is not None
        cold, _ = await paused(store)  # another agent: nothing cached, the checkpoint read
        chat = cold.chat(session, principal="alice")
        [pending] = await chat.interrupts()
        assert cold.sessions.cached(session).tenant == "acme"  # type: ignore[union-attr]
        await chat.approve(pending.ref)
        assert (await store.get_summary(session)).tenant == "acme"  # type: ignore[union-attr]
        assert [s.session_id for s in await store.list_sessions(tenant="acme")] == [session]
    finally:
        await store.close()


async def test_events_carry_the_tenant_and_webhooks_hear_only_their_tenants() -> None:
    hooks = [
        Webhook("acme-desk", "https://acme.example/hook", secret=SECRET, events={"pause"}, tenants={"acme"}),
        Webhook("ops", "https://ops.example/hook", secret=SECRET, events={"pause"}),
        Webhook("nobody", "https://none.example/hook", secret=SECRET, events={"pause"}, tenants=()),
    ]
    store = InMemorySessionStore()
    _, pause = await paused(store, app=Pausepoint(webhooks=hooks))
    acme, globex, none = await pause("alice", "acme"), await pause("alice", "globex"), await pause("bob", None)
    bodies = [event_body(e) for e in await store.read_events(0, 100) if e.kind == "pause"]
    assert [(b["session_id"], b["owner"], b["tenant"]) for b in bodies] == [
        (acme, "alice", "acme"),
        (globex, "alice", "globex"),
        (none, "bob", None),
    ]
    [no_tenant] = [e for e in await store.read_events(0, 100) if e.session_id == none and e.kind == "pause"]
    assert b"tenant" not in no_tenant.data  # a session of no tenant announces as before
    now = datetime.now(UTC) + timedelta(minutes=1)

    async def heard(target: str) -> list[str]:
        claimed = await store.claim_deliveries([target], now, timedelta(minutes=1), limit=100)
        return sorted(d.event.session_id for d in claimed)

    assert await heard("acme-desk") == [acme]
    assert await heard("ops") == sorted([acme, globex, none])
    assert await heard("nobody") == []


async def test_pauses_are_counted_by_tenant_with_a_bounded_label() -> None:
    metrics = PrometheusMetrics(tenants=["acme"])
    _, pause = await paused(app=Pausepoint(telemetry=Telemetry(tracing=False, metrics=metrics)))
    for tenant in ("acme", "acme", "globex", "initech", None):
        await pause("alice", tenant)
    text = generate_latest(metrics.registry).decode()
    opened = {
        line.split("tenant=")[1].split('"')[1]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("pausepoint_pauses_opened_total{")
    }
    assert opened == {"acme": 2.0, "other": 2.0, "": 1.0}  # any tenant not named is "other"


async def test_metrics_of_ones_own_are_called_as_before() -> None:
    """A ``Metrics`` written before tenants (no ``tenant`` parameter) is called as it always was;
    ``PrometheusMetrics()`` without ``tenants`` has no tenant label."""

    class Counting:
        def __init__(self) -> None:
            self.opened: list[tuple[str, str]] = []

        def turn_ended(self, agent: str, finish_reason: str, seconds: float) -> None: ...
        def model_called(self, agent: str, model: str, seconds: float, error: str | None) -> None: ...
        def store_called(self, backend: str, operation: str, seconds: float) -> None: ...
        def pause_resolved(self, agent: str, tool: str, decision: str, waited: float) -> None: ...

        def pause_opened(self, agent: str, tool: str) -> None:
            self.opened.append((agent, tool))

    counting, plain = Counting(), PrometheusMetrics()
    for metrics in (counting, plain):
        _, pause = await paused(app=Pausepoint(telemetry=Telemetry(tracing=False, metrics=metrics)))
        await pause("alice", "acme")
    assert counting.opened == [("bank", "transfer_money")]
    text = generate_latest(plain.registry).decode()
    assert 'pausepoint_pauses_opened_total{agent="bank",tool="transfer_money"} 1.0' in text
