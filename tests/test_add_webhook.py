"""Webhooks added once the agents are defined (``Pausepoint.add_webhook``, ``Agent.add_webhook``,
as ``serve``'s config file adds its own): from then on they hear what they want — their events,
agents and tenants — as if the app had been made with them; names stay unique."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pausepoint import AgentFinishReason, Pausepoint
from pausepoint.errors import DefinitionError
from pausepoint.stores import InMemorySessionStore
from pausepoint.webhooks import Webhook
from tests.approval_apps import build

SECRET = "whsec-added"


async def test_a_webhook_added_later_hears_what_it_wants_from_then_on() -> None:
    store = InMemorySessionStore()
    ai = Pausepoint()
    agent, _, _ = build(store, app=ai)

    async def pause(tenant: str | None = None) -> str:
        chat = agent.chat(principal="alice", tenant=tenant)
        assert (await chat.send("pay 5 to savings")).finish_reason == AgentFinishReason.INTERRUPTED
        return chat.session_id

    before = await pause()
    ai.add_webhook(Webhook("ops", "https://ops.example/hook", secret=SECRET, events={"pause"}))
    agent.add_webhook(Webhook("acme", "https://acme.example/hook", secret=SECRET, events={"pause"}, tenants={"acme"}))
    after, acme = await pause(), await pause("acme")
    later = ai.define_agent(name="later", model=agent.model, tools=[])

    async def heard(target: str) -> list[str]:
        now = datetime.now(UTC) + timedelta(minutes=1)
        claimed = await store.claim_deliveries([target], now, timedelta(minutes=1), limit=100)
        return sorted(d.event.session_id for d in claimed)

    assert await heard("ops") == sorted([after, acme])  # not the pause before it was added
    assert await heard("acme") == [acme]  # its tenant's only
    assert before not in await heard("ops")
    assert [w.name for w in later.webhooks] == ["ops"]  # an agent defined later hears the app's
    assert {w.name for w in ai.all_webhooks()} == {"ops", "acme"}


def test_names_stay_unique_and_a_webhook_keeps_to_its_agents() -> None:
    ai = Pausepoint(webhooks=[Webhook("ops", "https://ops.example/hook", secret=SECRET)])
    agent, _, _ = build(app=ai)
    with pytest.raises(DefinitionError, match="two webhooks are named 'ops'"):
        ai.add_webhook(Webhook("ops", "https://other.example/hook", secret=SECRET))
    with pytest.raises(DefinitionError, match="two webhooks are named 'ops'"):
        agent.add_webhook(Webhook("ops", "https://other.example/hook", secret=SECRET))
    with pytest.raises(DefinitionError, match="is for other agents"):
        agent.add_webhook(Webhook("desk", "https://desk.example/hook", secret=SECRET, agents={"elsewhere"}))
    ai.add_webhook(Webhook("desk", "https://desk.example/hook", secret=SECRET, agents={"elsewhere"}))
    assert [w.name for w in agent.webhooks] == ["ops"]  # the app has it; this agent does not want it
