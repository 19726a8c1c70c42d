"""A webhook removed from the configuration, over real HTTP on loopback, on every store: its
failed deliveries stay failed (a retry is refused, 409 ``unknown_webhook``, while no webhook of
its name is configured), its pending ones are failed once overdue, naming it, instead of reading
``pending`` for ever; configured again, a retry sends them.

Found by a probe: after a deploy that removed a webhook, a retry of its failed delivery answered
200 ``pending``, and nothing ever sent it, failed it or let its event be pruned."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from pydantic import BaseModel
from starlette.applications import Starlette

from pausepoint import Pausepoint
from pausepoint.server import BearerTokens, WebhookSender, create_app
from pausepoint.stores import SessionStore
from pausepoint.testing import ScriptedModel, tool_call
from pausepoint.webhooks import Webhook
from tests.approval_apps import Clock
from tests.server.conftest import ALICE
from tests.server.harness import TOKENS, serve_in_thread
from tests.server.ops_harness import OPERATOR, SECRET, Receiver
from tests.stores.backends import Backend, make_backend, open_store

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

REMOVED_AFTER = timedelta(seconds=5)  # by the app's clock (the sender's default: ten minutes)


class Question(BaseModel):
    question: str


@pytest.fixture(params=["memory", "sqlite", "postgres", "redis"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    made = make_backend(request.param, tmp_path)
    yield made
    await made.cleanup()


def deployer(clock: Clock, store: SessionStore, hooks: list[Webhook]) -> Pausepoint:
    """An app whose one agent pauses every turn on a question, announced to ``hooks``."""
    ai = Pausepoint(clock=clock, webhooks=hooks)
    ask = ai.define_interrupt(name="ask", description="Ask a person.", input_schema=Question)
    model = ScriptedModel(lambda request: [tool_call("ask", {"question": "deploy?"})])
    ai.define_agent(name="deployer", model=model, tools=[ask], store=store)
    return ai


def hook(name: str, url: str) -> Webhook:
    return Webhook(name, url + "/hook", secret=SECRET, events=["pause"], max_attempts=2, backoff=60)


async def first_deploy(clock: Clock, store: SessionStore, url: str) -> None:
    """With the webhook ``old``, whose receiver fails: one delivery failed, one pending (its
    first attempt failed, the next due in a minute)."""
    ai = deployer(clock, store, [hook("old", url)])
    sender = WebhookSender(ai)
    try:
        await ai.agents["deployer"].chat(principal="alice").send("Deploy.")
        assert await sender.send_due() == 1
        clock.advance(timedelta(seconds=61))
        assert await sender.send_due() == 1  # its second attempt: failed for good
        await ai.agents["deployer"].chat(principal="alice").send("Deploy.")
        assert await sender.send_due() == 1
    finally:
        await sender.close()


def app(clock: Clock, backend: Backend, shared: SessionStore, hooks: list[Webhook]) -> Starlette:
    """A deploy with ``hooks`` on the backend's store (built in the server's loop)."""
    store = open_store(backend.spec()) if backend.durable else shared
    ai = deployer(clock, store, hooks)
    sender = WebhookSender(ai, interval=0.05, removed_after=REMOVED_AFTER.total_seconds())
    return create_app(ai, auth=BearerTokens(TOKENS), operators={"desk"}, webhooks=sender)


async def outbox(http: httpx.AsyncClient, base: str) -> dict[tuple[str, str], list[dict]]:
    """The deliveries listed, by webhook and state."""
    reply = await http.get(base + "/v1/ops/deliveries", headers=OPERATOR)
    assert reply.status_code == 200, reply.text
    found: dict[tuple[str, str], list[dict]] = {}
    for delivery in reply.json()["deliveries"]:
        found.setdefault((delivery["webhook"], delivery["state"]), []).append(delivery)
    return found


async def until_failed(http: httpx.AsyncClient, base: str, count: int) -> list[dict]:
    for _ in range(600):  # a guard against a hang (30 s), not a timing
        failed = (await outbox(http, base)).get(("old", "failed"), [])
        if len(failed) == count:
            return failed
        await asyncio.sleep(0.05)
    raise AssertionError(f"never {count} failed deliveries to 'old'")


async def test_a_removed_webhooks_deliveries_end_failed_and_are_not_retried_until_it_is_back(backend):
    clock, down, up = Clock(), Receiver(fail_first=10**6), Receiver()
    store = await backend.open()
    with serve_in_thread(down.app) as down_url, serve_in_thread(up.app) as up_url:
        await first_deploy(clock, store, down_url)
        if backend.durable:
            await store.close()
        # the next deploy: 'old' removed, 'new' added
        with serve_in_thread(lambda: app(clock, backend, store, [hook("new", up_url)])) as base:
            async with httpx.AsyncClient(timeout=30) as http:
                before = await outbox(http, base)
                [failed], [pending] = before[("old", "failed")], before[("old", "pending")]
                retry = await http.post(f"{base}/v1/ops/deliveries/{failed['id']}/retry", headers=OPERATOR)
                assert retry.status_code == 409, retry.text
                error = retry.json()["error"]
                assert (error["code"], error["details"]["webhook"]) == ("unknown_webhook", "old")
                assert "'old'" in error["message"] and "not configured" in error["message"]
                await asyncio.sleep(1.0)  # two passes of the sender (every 0.5 s): not overdue yet, still pending
                after = await outbox(http, base)
                assert after[("old", "failed")] == [failed] and after[("old", "pending")] == [pending]
                clock.advance(timedelta(seconds=61) + REMOVED_AFTER)  # due, then overdue
                both = await until_failed(http, base, 2)
                [swept] = [d for d in both if d["id"] == pending["id"]]
                assert "no webhook named 'old' is configured" in swept["last_error"]
                refused = await http.post(f"{base}/v1/ops/deliveries/{swept['id']}/retry", headers=OPERATOR)
                assert refused.json()["error"]["code"] == "unknown_webhook"
                paused = await http.post(base + "/v1/agents/deployer/sessions", json={"message": "Go."}, headers=ALICE)
                [told] = await up.wait_for(1)  # a webhook the deploy has is sent as ever
        assert told.json["session_id"] == paused.json()["session_id"]
        # configured again: a retry is taken and sent
        again = [hook("old", up_url), hook("new", up_url)]
        with serve_in_thread(lambda: app(clock, backend, store, again)) as base:
            async with httpx.AsyncClient(timeout=30) as http:
                for delivery in both:
                    retried = await http.post(f"{base}/v1/ops/deliveries/{delivery['id']}/retry", headers=OPERATOR)
                    assert retried.json() == {"id": delivery["id"], "state": "pending"}
                sent = (await up.wait_for(3))[1:]
    assert sorted(r.event_id for r in sent) == sorted(d["event"]["id"] for d in both)
    assert [r.headers["pausepoint-attempt"] for r in sent] == ["1", "1"]
