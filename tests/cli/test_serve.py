"""``pausepoint serve module:app``: tokens, a store from a URL, a clean stop."""

from __future__ import annotations

import gc
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from pausepoint.client import Client
from pausepoint.stores import SqliteSessionStore
from tests.cli.conftest import ROOT, cli_env, running


@contextmanager
def serving(*args: str) -> Iterator[tuple[str, str]]:
    """``pausepoint serve ARGS --port 0``; yields its base URL and what it printed."""
    with running("serve", *args, "--port", "0") as printed:
        match = re.search(r"at (http://127\.0\.0\.1:\d+)", printed)
        assert match, printed
        yield match[1], printed


async def test_an_ipv6_host_is_shown_as_a_url_names_it_and_that_url_is_served():
    """Found by a probe: ``--host ::1`` printed ``http://::1:PORT``, which no client or browser
    takes (``demo`` opened the browser with it)."""
    with running(
        "serve", "tests.cli.apps:bank_ai", "--token", "alice=s3cret", "--host", "::1", "--port", "0"
    ) as printed:
        match = re.search(r"at (http://\[::1\]:\d+)", printed)
        assert match and f"{match[1]}/console/" in printed, printed
        async with httpx.AsyncClient() as http:
            assert (
                await http.get(f"{match[1]}/v1/agents", headers={"Authorization": "Bearer s3cret"})
            ).status_code == 200


async def test_serve_an_app_with_tokens_on_a_store_from_a_url(tmp_path):
    db = tmp_path / "served.db"
    args = ["tests.cli.apps:bank_ai", "--token", "alice=s3cret", "--token", "bob=b0b", "--store", f"sqlite:///{db}"]
    with serving(*args) as (base, printed):
        assert "bankingAgent" in printed
        async with Client(base, token="s3cret") as client:
            chat = client.agent("bankingAgent").chat()
            res = await chat.send("Transfer $500 to savings.")
            res = await chat.resume(respond=[res.interrupts[0].respond({"approved": True})])
            assert res.text == "Transferred $500 to savings."
            session_id = chat.session_id
        async with httpx.AsyncClient() as http:
            url = f"{base}/v1/agents/bankingAgent/sessions/{session_id}"
            assert (await http.get(url, headers={"Authorization": "Bearer wrong"})).status_code == 401
            assert (await http.get(url, headers={"Authorization": "Bearer b0b"})).status_code == 404  # alice's
            assert (await http.get(url, headers={"Authorization": "Bearer s3cret"})).status_code == 200

    store = SqliteSessionStore(db)  # the app's own store was in memory: --store replaced it
    [summary] = await store.list_sessions()
    assert summary.session_id == session_id and summary.owner == "alice"
    await store.close()


async def test_serve_without_tokens_prints_a_generated_one(tmp_path):
    with serving("tests.cli.apps:shell_ai", "--no-console") as (base, printed):
        match = re.search(r"token +(\S+) +\(principal 'admin'", printed)
        assert match, printed
        async with Client(base, token=match[1]) as client:
            assert await client.agents() == ["shellAgent"]
        async with httpx.AsyncClient() as http:
            assert (await http.get(f"{base}/console/")).status_code == 404


async def test_serve_an_asgi_app_as_it_is(tmp_path):
    with serving("tests.cli.apps:asgi") as (base, printed):
        assert "token" not in printed and "principal" not in printed  # no token of ours: the app checks its own
        async with httpx.AsyncClient() as http:
            reply = await http.get(f"{base}/anything")
            assert reply.status_code == 200 and reply.text == "plain ASGI"


async def test_serve_sets_the_garbage_collector_for_a_server():
    """Full garbage collections pause the event loop for every object they walk: what was
    alive when serving began (the modules, the app) is frozen, so they walk only what
    requests made, and they run a tenth as often (docs/server.md)."""
    with serving("tests.cli.apps:collector") as (base, _printed):
        async with httpx.AsyncClient() as http:
            collector = (await http.get(f"{base}/")).json()
    assert collector["frozen"] > 10_000  # the modules and the app: tens of thousands of objects
    young, middle, _ = gc.get_threshold()  # this process's, untouched: what serve started from
    assert collector["threshold"] == [young, middle, 100]


async def test_serve_runs_on_uvloop_when_it_is_installed():
    """The ``server`` extra brings uvloop, and ``pausepoint serve`` runs on it (docs/server.md,
    "The event loop"); without it, on asyncio's own loop."""
    with serving("tests.cli.apps:collector") as (base, _printed):
        async with httpx.AsyncClient() as http:
            assert (await http.get(f"{base}/")).json()["loop"] == "uvloop"


def test_serve_runs_on_asyncio_without_uvloop():
    code = (
        "import sys; sys.modules['uvloop'] = None\n"  # what a missing package looks like to import
        "import asyncio\n"
        "from pausepoint.cli._serving import run_event_loop\n"
        "async def which(): return type(asyncio.get_running_loop()).__module__\n"
        "print(run_event_loop(which()))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env(), check=True)
    assert out.stdout.split() == ["asyncio.unix_events"]


def test_a_token_in_a_query_string_is_never_logged():
    """Credentials travel in the Authorization header; one pasted into a URL must not reach a log.

    (``serve`` runs uvicorn without its access log, which writes query strings; the server's
    own error log names no URL.)"""
    secret = "qs-secret-7f3a"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pausepoint", "serve", "tests.cli.apps:bank_ai", "--token", "alice=s3cret", "--port",
         "0"],
        cwd=ROOT, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        head = []
        for line in proc.stdout:
            head.append(line)
            if line.startswith("Ctrl+C"):
                break
        match = re.search(r"at (http://127\.0\.0\.1:\d+)", "".join(head))
        assert match, head
        with httpx.Client() as http:
            for path in ("/v1/agents", "/v1/agents/bankingAgent/sessions", "/nowhere", "/"):
                for query in (f"?token={secret}", f"?access_token={secret}&limit=%C2%B2"):
                    http.get(match[1] + path + query, headers={"Authorization": "Bearer s3cret"})
                    http.get(match[1] + path + query)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert secret not in "".join(head) + out + err
    assert "stopped" in out


async def test_serve_declares_approvers_and_their_roles():
    """``--approver NAME:TOKEN:ROLE`` makes NAME a member of ROLE in the agents' approval
    policies and an approvals desk (sees every session, answers its pauses): two of treasury
    approve a transfer; an approver without the role is refused; the requester is not asked."""
    args = ["tests.cli.apps:pay_ai", "--token", "dave=d4ve", "--approver", "alice:a1ice:treasury",
            "--approver", "bob:b0b:treasury", "--approver", "carol:car0l", "--no-console"]  # fmt: skip
    with serving(*args) as (base, printed):
        assert "approver alice (treasury)" in printed and "approver carol\n" in printed
        async with httpx.AsyncClient(base_url=base) as http:
            sessions = "/v1/agents/payAgent/sessions"
            sent = await http.post(sessions, json={"message": "pay 500 to savings"}, headers=_bearer("d4ve"))
            [pause] = sent.json()["interrupts"]
            assert pause["view"]["approval"]["may_approve"] == ["alice", "bob"]  # the declared treasury
            approve = f"{sessions}/{sent.json()['session_id']}/interrupts/{pause['ref']}/approve"
            refused = await http.post(approve, json={}, headers=_bearer("car0l"))
            assert refused.status_code == 403 and refused.json()["error"]["details"]["reason"] == "role"
            first = (await http.post(approve, json={}, headers=_bearer("a1ice"))).json()
            [still] = first["interrupts"]
            shown = still["view"]["approval"]
            assert (first["finish_reason"], shown["progress"], shown["may_approve"]) == (
                "interrupted",
                "1 of 2 approvals",
                ["bob"],
            )
            assert shown["waiting_for"] == "Waiting for 1 more approval from treasury (bob)."
            again = await http.post(approve, json={}, headers=_bearer("a1ice"))
            assert again.status_code == 409 and again.json()["error"]["code"] == "already_approved"
            done = (await http.post(approve, json={}, headers=_bearer("b0b"))).json()
            assert (done["finish_reason"], done["message"]["parts"][0]["text"]) == ("stop", "sent 500 to savings")


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
