"""Two tenants on one server, each with an "alice" (``tenants_app``), over real HTTP on loopback,
on SQLite, PostgreSQL and Redis: neither sees, lists, answers, streams, hears or reaches through
MCP the other's sessions — all 404, as any session one may not see; approvers and roles hold in
their own tenant only; an operator reads every tenant; pauses are counted by a bounded tenant
label."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from pausepoint.webhooks import verify_signature
from tests.mcp.conftest import SLOW
from tests.mcp.test_serve import call
from tests.server.feed_client import FeedReader
from tests.server.harness import serve_in_thread
from tests.server.ops_harness import Receiver
from tests.server.tenants_app import AGENT, SECRET, bearer, build_tenant_app
from tests.stores.backends import Backend, make_backend

SESSIONS = f"/v1/agents/{AGENT}/sessions"
PAY = {"message": "pay 5 to savings"}


class Served:
    def __init__(self, url: str, ledger: list[str]) -> None:
        self.url = url
        self.ledger = ledger


@pytest.fixture(params=["sqlite", "postgres", "redis"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    made = make_backend(request.param, tmp_path)
    yield made
    await made.cleanup()


@pytest.fixture
def served(backend: Backend) -> Iterator[Served]:
    ledger: list[str] = []
    with serve_in_thread(lambda: build_tenant_app(backend.spec(), ledger)) as url:
        yield Served(url, ledger)


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=30) as client:
        yield client


async def pause(http: httpx.AsyncClient, url: str, token: str) -> tuple[str, dict[str, Any]]:
    """A transfer paused in a new session of ``token``'s caller: the session's id and its pause."""
    reply = await http.post(url + SESSIONS, json=PAY, headers=bearer(token))
    assert reply.status_code == 200, reply.text
    body = reply.json()
    [paused] = body["interrupts"]
    return body["session_id"], paused


async def listed(http: httpx.AsyncClient, url: str, token: str, query: str = "") -> list[tuple[str, str, Any]]:
    reply = await http.get(url + SESSIONS + query, headers=bearer(token))
    assert reply.status_code == 200, reply.text
    return sorted((s["session_id"], s["owner"], s["tenant"]) for s in reply.json()["sessions"])


async def test_two_alices_of_two_tenants_never_reach_each_others_sessions(served, http):
    url = served.url
    acme, acme_pause = await pause(http, url, "acme-alice")
    globex, globex_pause = await pause(http, url, "globex-alice")
    assert await listed(http, url, "acme-alice") == [(acme, "alice", "acme")]
    assert await listed(http, url, "globex-alice", "?pending=true") == [(globex, "alice", "globex")]
    assert (await http.get(f"{url}{SESSIONS}/{acme}", headers=bearer("acme-alice"))).json()["session"]["tenant"] == (
        "acme"
    )

    # Every route on the other tenant's session is a 404, exactly as for a session that does not exist.
    other = f"{url}{SESSIONS}/{globex}"
    ref = globex_pause["ref"]
    as_acme = bearer("acme-alice")
    for method, path, body in [
        ("GET", "", None),
        ("GET", "/interrupts", None),
        ("GET", "/audit", None),
        ("GET", "/history", None),
        ("GET", "/grants", None),
        ("POST", "/messages", {"message": "hello"}),
        ("POST", "/cancel", {"reason": "mine now"}),
        ("POST", "/resume", {"respond": [{"ref": ref, "name": "transfer_money", "output": "done"}]}),
        ("POST", f"/interrupts/{ref}/approve", {}),
        ("POST", f"/interrupts/{ref}/deny", {"reason": "no"}),
        ("POST", f"/interrupts/{ref}/restart", {}),
        ("POST", f"/interrupts/{ref}/respond", {"output": "done"}),
    ]:
        reply = await http.request(method, other + path, json=body, headers=as_acme)
        assert reply.status_code == 404 and reply.json()["error"]["code"] == "session_not_found", (path, reply.text)
    genkit = f"{url}/agents/{AGENT}"
    snapshot = await http.post(genkit + "/getSnapshot", json={"data": {"sessionId": globex}}, headers=as_acme)
    assert snapshot.status_code == 404, snapshot.text
    turn = await http.post(genkit, json={"data": {"message": {"role": "user", "content": [{"text": "hi"}]}},
                                         "init": {"sessionId": globex}}, headers=as_acme)  # fmt: skip
    assert turn.status_code == 404, turn.text
    # A new session named with the other tenant's id cannot be made either.
    taken = await http.post(f"{other}/messages", json={"message": "hello"}, headers=bearer("acme-desk"))
    assert taken.status_code == 404

    # Roles are per tenant: acme's alice holds treasury, globex's alice (the same name) does not.
    refused = await http.post(f"{other}/interrupts/{ref}/approve", json={}, headers=bearer("globex-alice"))
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "approval_forbidden", refused.text
    mine = await http.post(f"{url}{SESSIONS}/{acme}/interrupts/{acme_pause['ref']}/approve", json={}, headers=as_acme)
    assert mine.status_code == 200 and mine.json()["finish_reason"] == "stop", mine.text
    assert served.ledger == ["5->savings"]  # acme's transfer, and nothing of globex's
    audit = (await http.get(f"{url}{SESSIONS}/{acme}/audit", headers=as_acme)).json()["entries"]
    assert [(e["decision"], e["principal"]) for e in audit] == [("message", "alice"), ("approve", "alice")]
    assert (await http.get(other + "/interrupts", headers=bearer("globex-alice"))).json()["interrupts"]


async def test_approvers_answer_their_tenants_pauses_only(served, http):
    url = served.url
    acme, acme_pause = await pause(http, url, "acme-alice")
    globex, globex_pause = await pause(http, url, "globex-alice")
    assert await listed(http, url, "acme-desk", "?pending=true") == [(acme, "alice", "acme")]
    assert await listed(http, url, "globex-bob", "?pending=true") == [(globex, "alice", "globex")]
    for _ in range(3):  # newer sessions of globex: acme's inbox is narrowed in the store, so its pages stay whole
        await pause(http, url, "globex-alice")
    assert await listed(http, url, "acme-desk", "?pending=true&limit=1") == [(acme, "alice", "acme")]
    cross = f"{url}{SESSIONS}/{globex}/interrupts/{globex_pause['ref']}/approve"
    assert (await http.post(cross, json={}, headers=bearer("acme-desk"))).status_code == 404
    cross = f"{url}{SESSIONS}/{acme}/interrupts/{acme_pause['ref']}/approve"
    assert (await http.post(cross, json={}, headers=bearer("globex-bob"))).status_code == 404
    assert served.ledger == []
    own = f"{url}{SESSIONS}/{globex}/interrupts/{globex_pause['ref']}/approve"
    done = await http.post(own, json={}, headers=bearer("globex-bob"))
    assert done.status_code == 200 and done.json()["finish_reason"] == "stop", done.text
    assert served.ledger == ["5->savings"]
    audit = (await http.get(f"{url}{SESSIONS}/{globex}/audit", headers=bearer("globex-alice"))).json()["entries"]
    assert [(e["decision"], e["principal"]) for e in audit][-1] == ("approve", "bob")
    # An approver of no tenant (carol is none) sees no tenant's sessions at all.
    assert await listed(http, url, "carol") == []
    assert (await http.get(f"{url}{SESSIONS}/{acme}", headers=bearer("carol"))).status_code == 404


async def test_a_name_of_no_tenant_that_reads_like_a_tenants_is_not_that_principal(served, http):
    """A sign-in's ``sub`` of "acme/desk" with no tenant claim is not acme's desk: not an
    approver, no treasury role (found by a probe: it approved a session of no tenant)."""
    url = served.url
    carols, carols_pause = await pause(http, url, "carol")
    approve = f"{url}{SESSIONS}/{carols}/interrupts/{carols_pause['ref']}/approve"
    for impostor in ("impostor", "impostor-roles"):  # its token's roles give it none (found by a probe)
        assert await listed(http, url, impostor, "?pending=true") == []
        assert (await http.post(approve, json={}, headers=bearer(impostor))).status_code == 404
    assert served.ledger == []


async def test_an_operator_reads_every_tenant_and_answers_none(served, http):
    url = served.url
    acme, acme_pause = await pause(http, url, "acme-alice")
    globex, _ = await pause(http, url, "globex-alice")
    none, _ = await pause(http, url, "carol")
    assert await listed(http, url, "ops", "?pending=true") == sorted(
        [(acme, "alice", "acme"), (globex, "alice", "globex"), (none, "carol", None)]
    )
    read = await http.get(f"{url}{SESSIONS}/{acme}", headers=bearer("ops"))
    assert read.status_code == 200 and (read.json()["can_answer"], read.json()["can_send"]) == (False, False)
    answer = await http.post(
        f"{url}{SESSIONS}/{acme}/interrupts/{acme_pause['ref']}/approve", json={}, headers=bearer("ops")
    )
    assert answer.status_code == 403, answer.text
    assert (await http.get(url + "/v1/ops/deliveries", headers=bearer("ops"))).status_code == 200
    assert (await http.get(url + "/v1/ops/deliveries", headers=bearer("acme-desk"))).status_code == 403
    assert served.ledger == []


async def test_the_feed_carries_and_keeps_to_the_callers_tenant(served, http):
    url = served.url
    readers = {t: FeedReader(url, bearer(t)) for t in ("acme-alice", "globex-alice", "ops")}
    for reader in readers.values():
        await reader.__aenter__()
    try:
        acme, _ = await pause(http, url, "acme-alice")
        globex, _ = await pause(http, url, "globex-alice")
        for reader in readers.values():  # each pause makes a pause and a turn end
            await reader.wait_for(4 if reader is readers["ops"] else 2)
        await pause(http, url, "globex-alice")  # a later event: nothing of acme came before it
        await readers["globex-alice"].wait_for(4)
        await readers["ops"].wait_for(6)
    finally:
        for reader in readers.values():
            await reader.__aexit__()
    seen = {t: {(d["session_id"], d["tenant"]) for _, _, d in r.events} for t, r in readers.items()}
    assert seen["acme-alice"] == {(acme, "acme")}
    assert (globex, "globex") in seen["globex-alice"] and all(t == "globex" for _, t in seen["globex-alice"])
    assert {(acme, "acme"), (globex, "globex")} <= seen["ops"]


async def test_webhooks_hear_only_the_tenants_they_are_for(backend: Backend, http):
    acme_only, every = Receiver(), Receiver()
    ledger: list[str] = []
    with serve_in_thread(acme_only.app) as acme_url, serve_in_thread(every.app) as every_url:
        hooks = {"acme-hook": acme_url + "/hook", "all-hook": every_url + "/hook"}
        with serve_in_thread(lambda: build_tenant_app(backend.spec(), ledger, hooks)) as url:
            globex, _ = await pause(http, url, "globex-alice")
            acme, _ = await pause(http, url, "acme-alice")
            heard = [verify_signature(SECRET, r.body, r.headers) for r in await every.wait_for(2)]
            [acme_heard] = [verify_signature(SECRET, r.body, r.headers) for r in await acme_only.wait_for(1)]
            later, _ = await pause(http, url, "acme-alice")  # delivered after globex's, had it been sent
            await every.wait_for(3)
            [*_, last] = await acme_only.wait_for(2)
    assert sorted((e["session_id"], e["tenant"]) for e in heard) == sorted([(acme, "acme"), (globex, "globex")])
    assert (acme_heard["session_id"], acme_heard["tenant"], acme_heard["owner"]) == (acme, "acme", "alice")
    assert verify_signature(SECRET, last.body, last.headers)["session_id"] == later
    assert {verify_signature(SECRET, r.body, r.headers)["tenant"] for r in acme_only.received} == {"acme"}


def mcp_client(url: str, token: str) -> Client:
    http = httpx2.AsyncClient(headers=bearer(token), timeout=SLOW)
    return Client(streamable_http_client(f"{url}/mcp", http_client=http))


async def test_mcp_lists_and_answers_only_the_callers_tenant(served, http):
    url = served.url
    async with mcp_client(url, "acme-alice") as acme, mcp_client(url, "globex-alice") as globex:
        mine = await call(acme, "send_message", agent=AGENT, text="pay 5 to savings")
        theirs = await call(globex, "send_message", agent=AGENT, text="pay 7 to savings")
        assert mine["finish_reason"] == theirs["finish_reason"] == "interrupted"
        summary = await http.get(f"{url}{SESSIONS}/{mine['session_id']}", headers=bearer("acme-alice"))
        assert summary.json()["session"]["tenant"] == "acme"  # made through MCP, in the caller's tenant
        assert [s["session_id"] for s in await call(acme, "list_pending", agent=AGENT)] == [mine["session_id"]]
        assert [s["session_id"] for s in await call(globex, "list_pending")] == [theirs["session_id"]]
        [their_pause] = theirs["pauses"]
        refused = await call(acme, "answer_pause", agent=AGENT, session_id=theirs["session_id"],
                             ref=their_pause["ref"], decision="approve")  # fmt: skip
        assert refused[0] == "error" and "session_not_found: no session" in refused[1], refused
        sent = await call(acme, "send_message", agent=AGENT, text="hello", session_id=theirs["session_id"])
        assert sent[0] == "error" and "session_not_found: no session" in sent[1], sent
        [my_pause] = mine["pauses"]
        done = await call(acme, "answer_pause", agent=AGENT, session_id=mine["session_id"], ref=my_pause["ref"],
                          decision="approve")  # fmt: skip
        assert done["finish_reason"] == "stop"
    assert served.ledger == ["5->savings"]


async def test_pauses_are_counted_by_a_bounded_tenant_label(served, http):
    url = served.url
    for token in ("acme-alice", "acme-alice", "globex-alice", "carol"):
        await pause(http, url, token)
    text = (await http.get(url + "/metrics")).text
    opened = {line.rsplit(" ", 1)[0]: line.rsplit(" ", 1)[1] for line in text.splitlines()
              if line.startswith("pausepoint_pauses_opened_total{")}  # fmt: skip
    assert opened == {
        'pausepoint_pauses_opened_total{agent="bank",tenant="acme",tool="transfer_money"}': "2.0",
        'pausepoint_pauses_opened_total{agent="bank",tenant="other",tool="transfer_money"}': "1.0",
        'pausepoint_pauses_opened_total{agent="bank",tenant="",tool="transfer_money"}': "1.0",
    }
