"""``pausepoint serve module:app``: tokens, a store from a URL, a clean stop."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from pausepoint.client import Client
from pausepoint.stores import SqliteSessionStore
from tests.cli.conftest import running


@contextmanager
def serving(*args: str) -> Iterator[tuple[str, str]]:
    """``pausepoint serve ARGS --port 0``; yields its base URL and what it printed."""
    with running("serve", *args, "--port", "0") as printed:
        match = re.search(r"at (http://127\.0\.0\.1:\d+)", printed)
        assert match, printed
        yield match[1], printed


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
    with serving("tests.cli.apps:asgi") as (base, _printed):
        async with httpx.AsyncClient() as http:
            reply = await http.get(f"{base}/anything")
            assert reply.status_code == 200 and reply.text == "plain ASGI"
