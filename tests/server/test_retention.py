"""A server given ``keep_events`` prunes the events older than that once they are delivered,
keeps what is still to be delivered or failed, and the operators page through the outbox."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import httpx
import pytest
from pydantic import BaseModel
from starlette.applications import Starlette

from pausepoint import Pausepoint
from pausepoint.errors import DefinitionError
from pausepoint.server import BearerTokens, WebhookSender, create_app
from pausepoint.stores import SqliteSessionStore
from pausepoint.testing import ScriptedModel, tool_call
from pausepoint.webhooks import Webhook
from tests.approval_apps import Clock
from tests.server.conftest import ALICE
from tests.server.harness import TOKENS, serve_in_thread
from tests.server.ops_harness import OPERATOR, SECRET, Receiver

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

KEEP = timedelta(seconds=10)


class Question(BaseModel):
    question: str


def outbox_app(clock: Clock, path: str, hook_url: str, keep: timedelta | None = KEEP) -> Starlette:
    hook = Webhook("ops", hook_url, secret=SECRET, events=["pause"], max_attempts=1)
    ai = Pausepoint(clock=clock, webhooks=[hook])
    ask = ai.define_interrupt(name="ask", description="Ask a person.", input_schema=Question)
    model = ScriptedModel(lambda request: [tool_call("ask", {"question": "deploy?"})])
    ai.define_agent(name="deployer", model=model, tools=[ask], store=SqliteSessionStore(path))
    sender = WebhookSender(ai, interval=0.05)
    return create_app(ai, auth=BearerTokens(TOKENS), operators={"desk"}, webhooks=sender, keep_events=keep)


async def pause(http: httpx.AsyncClient, base: str) -> str:
    reply = await http.post(base + "/v1/agents/deployer/sessions", json={"message": "Deploy."}, headers=ALICE)
    assert reply.status_code == 200, reply.text
    return str(reply.json()["session_id"])


async def deliveries(http: httpx.AsyncClient, base: str, query: str = "") -> list[dict]:
    """The deliveries listed with ``query`` (``&name=value...``), 500 a page unless it says (a
    parameter given twice is refused: the server cannot know which one was meant)."""
    page = "" if "&limit=" in query else "&limit=500"
    reply = await http.get(f"{base}/v1/ops/deliveries?{(page + query).lstrip('&')}", headers=OPERATOR)
    assert reply.status_code == 200, reply.text
    return list(reply.json()["deliveries"])


async def until(check, what: str) -> None:
    for _ in range(600):  # a guard against a hang (30 s), not a timing
        if await check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"never: {what}")


def sessions_of(listed: list[dict]) -> dict[str, str]:
    return {d["event"]["session_id"]: d["state"] for d in listed}


async def test_old_delivered_events_are_pruned_and_failed_or_young_ones_kept(tmp_path):
    clock, receiver = Clock(), Receiver(fail_first=1)
    with serve_in_thread(receiver.app) as hook_url:
        app = lambda: outbox_app(clock, str(tmp_path / "s.db"), hook_url + "/hook")  # noqa: E731
        with serve_in_thread(app) as base:
            async with httpx.AsyncClient(timeout=30) as http:
                failed = await pause(http, base)  # its delivery gets a 500, once: failed
                await receiver.wait_for(1)
                delivered = await pause(http, base)
                await until(lambda: _settled(http, base, 2), "two deliveries settled")
                assert sessions_of(await deliveries(http, base)) == {failed: "failed", delivered: "delivered"}

                clock.now += KEEP + timedelta(seconds=1)  # both are old now
                young = await pause(http, base)
                await until(lambda: _gone(http, base, delivered), "the old delivered event pruned")
                assert sessions_of(await deliveries(http, base)) == {failed: "failed", young: "delivered"}

                # The failed one was kept: it can still be sent, and is pruned once delivered.
                [row] = await deliveries(http, base, "&state=failed")
                retry = await http.post(f"{base}/v1/ops/deliveries/{row['id']}/retry", headers=OPERATOR)
                assert retry.json() == {"id": row["id"], "state": "pending"}
                await receiver.wait_for(4)
                await until(lambda: _gone(http, base, failed), "the failed event pruned once delivered")
                assert sessions_of(await deliveries(http, base)) == {young: "delivered"}
                # The sessions themselves are whole: pruning touches the outbox only.
                read = await http.get(f"{base}/v1/agents/deployer/sessions/{failed}", headers=ALICE)
                assert [i["name"] for i in read.json()["interrupts"]] == ["ask"]
                audit = await http.get(f"{base}/v1/agents/deployer/sessions/{failed}/audit", headers=ALICE)
                assert [e["decision"] for e in audit.json()["entries"]] == ["message"]
    assert [r.json["session_id"] for r in receiver.received] == [failed, delivered, young, failed]


async def test_without_keep_events_every_event_is_kept(tmp_path):
    clock, receiver = Clock(), Receiver()
    with serve_in_thread(receiver.app) as hook_url:
        app = lambda: outbox_app(clock, str(tmp_path / "s.db"), hook_url + "/hook", keep=None)  # noqa: E731
        with serve_in_thread(app) as base:
            async with httpx.AsyncClient(timeout=30) as http:
                old = await pause(http, base)
                await until(lambda: _settled(http, base, 1), "the delivery settled")
                clock.now += timedelta(days=400)
                new = await pause(http, base)
                await until(lambda: _settled(http, base, 2), "both deliveries settled")
                assert sessions_of(await deliveries(http, base)) == {old: "delivered", new: "delivered"}


async def test_operators_page_through_the_deliveries_newest_first(tmp_path):
    clock, receiver = Clock(), Receiver()
    with serve_in_thread(receiver.app) as hook_url:
        app = lambda: outbox_app(clock, str(tmp_path / "s.db"), hook_url + "/hook")  # noqa: E731
        with serve_in_thread(app) as base:
            async with httpx.AsyncClient(timeout=30) as http:
                sessions = []
                for _ in range(5):
                    clock.now += timedelta(milliseconds=1)
                    sessions.append(await pause(http, base))
                await until(lambda: _settled(http, base, 5), "five deliveries settled")
                pages = [await deliveries(http, base, f"&limit=2&offset={offset}") for offset in (0, 2, 4, 6)]
                bad = await http.get(base + "/v1/ops/deliveries?offset=-1", headers=OPERATOR)
                past = await http.get(base + "/v1/ops/deliveries?offset=100001", headers=OPERATOR)
    assert [len(page) for page in pages] == [2, 2, 1, 0]
    assert [d["event"]["session_id"] for page in pages for d in page] == sessions[::-1]
    assert bad.status_code == past.status_code == 400
    assert "offset" in bad.json()["error"]["message"]


def test_keep_events_must_be_a_duration(tmp_path):
    ai = Pausepoint()
    for wrong in (timedelta(0), timedelta(seconds=-1), 30):
        with pytest.raises(DefinitionError, match="keep_events must be a timedelta from a microsecond"):
            create_app(ai, auth=BearerTokens(TOKENS), keep_events=wrong)  # type: ignore[arg-type]


async def _settled(http: httpx.AsyncClient, base: str, count: int) -> bool:
    return sum(d["state"] != "pending" for d in await deliveries(http, base)) == count


async def _gone(http: httpx.AsyncClient, base: str, session_id: str) -> bool:
    return session_id not in sessions_of(await deliveries(http, base))


def test_keep_events_takes_what_retention_events_days_takes():
    """``[retention] events_days`` takes up to 36500 days, as docs/config.md says: so does
    ``keep_events`` (found by a probe: 11575 days or more passed ``config check``, then ``serve``
    died on create_app's 10**9-second limit)."""
    ai = Pausepoint()
    for kept in (timedelta(days=11_575), timedelta(days=36_500)):
        assert isinstance(create_app(ai, auth=BearerTokens(TOKENS), keep_events=kept), Starlette)
    with pytest.raises(DefinitionError, match="to 36500 days"):
        create_app(ai, auth=BearerTokens(TOKENS), keep_events=timedelta(days=36_500, microseconds=1))
