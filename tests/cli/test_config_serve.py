"""``pausepoint serve --config FILE``, as real processes: what the file says is what runs —
principals and their roles, the store with its schema or key prefix, webhooks signed with a
secret from the environment, the delivery lease, spans to an OTLP collector, metrics, logs,
limits, the expiry sweep, single sign-on — and every flag given beside it wins."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import sqlite3
import time
import uuid
from datetime import datetime
from typing import Any

import httpx
import pytest

from pausepoint.webhooks import verify_signature
from tests.cli.config_files import PAYMENT, receiver, serving, smtp_server, write
from tests.server.oidc_issuer import AUDIENCE, local_issuer
from tests.stores.backends import service_url

PAY = "/v1/agents/payAgent/sessions"
PAYMENTS = "/v1/agents/paymentsAgent/sessions"
TOKENS = {"DAVE_TOKEN": "d4ve-token", "ALICE_TOKEN": "a1ice-token", "BOB_TOKEN": "b0b-token", "CAROL_TOKEN": "car0l"}

PEOPLE = """
[principals.dave]
token_env = "DAVE_TOKEN"

[principals.alice]
token_env = "ALICE_TOKEN"
roles = ["treasury"]

[principals.bob]
token_env = "BOB_TOKEN"
roles = ["treasury"]

[principals.carol]
token_env = "CAROL_TOKEN"
operator = true
"""


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def pay_and_approve(url: str) -> dict[str, Any]:
    """dave asks for a transfer; alice and bob (treasury, from the file) approve it."""
    async with httpx.AsyncClient(base_url=url) as http:
        sent = (await http.post(PAY, json={"message": "pay 500 to savings"}, headers=bearer("d4ve-token"))).json()
        [pause] = sent["interrupts"]
        approve = f"{PAY}/{sent['session_id']}/interrupts/{pause['ref']}/approve"
        refused = await http.post(approve, json={}, headers=bearer("d4ve-token"))
        assert refused.status_code == 403, refused.text  # dave holds no role
        assert (await http.post(approve, json={}, headers=bearer("a1ice-token"))).status_code == 200
        done = (await http.post(approve, json={}, headers=bearer("b0b-token"))).json()
        assert (done["finish_reason"], done["message"]["parts"][0]["text"]) == ("stop", "sent 500 to savings")
        return dict(sent)


async def test_the_file_sets_up_principals_roles_operators_metrics_limits_and_logs(tmp_path):
    config = write(
        tmp_path / "team.toml",
        'app = "tests.cli.apps:pay_ai"\n[listen]\nport = 0\n[server]\nconsole = false\n'
        "[metrics]\nenabled = true\n[limits]\nmax_body_bytes = 2000\n"
        '[log]\nlevel = "info"\nformat = "json"\n' + PEOPLE,
    )
    with serving("--config", str(config), env=TOKENS) as served:
        assert "approver alice (treasury)" in served.printed and "config   " + str(config) in served.printed
        assert "token " not in served.printed  # nothing generated: the file names who signs in
        await pay_and_approve(served.url)
        async with httpx.AsyncClient(base_url=served.url) as http:
            assert (await http.get("/v1/ops/deliveries", headers=bearer("car0l"))).status_code == 200
            assert (await http.get("/v1/ops/deliveries", headers=bearer("d4ve-token"))).status_code == 403
            assert (await http.get("/console/")).status_code == 404
            metrics = await http.get("/metrics")
            assert metrics.status_code == 200 and "pausepoint_turns_total" in metrics.text
            big = await http.post(PAY, json={"message": "x" * 5000}, headers=bearer("d4ve-token"))
            assert big.status_code == 413 and big.json()["error"]["details"]["limit"] == 2000
    logged = [json.loads(line) for line in served.stderr.splitlines() if line.startswith("{")]
    assert any(e["logger"] == "pausepoint.server.access" and e["principal"] == "bob" for e in logged), served.stderr


async def test_every_flag_wins_over_the_file(tmp_path):
    """The file: a port that is taken, JSON logs, alice's token, no metrics, the console, one
    SQLite file. The flags: another port, text logs, another token for alice, metrics, no
    console, another file: the flags' are what runs."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    file_db, flag_db = tmp_path / "file.db", tmp_path / "flag.db"
    config = write(
        tmp_path / "team.toml",
        f'app = "tests.cli.apps:bank_ai"\n[listen]\nport = {taken.getsockname()[1]}\n'
        f'[store]\nurl = "sqlite:///{file_db}"\n[log]\nformat = "json"\n'
        '[principals.alice]\ntoken_env = "ALICE_TOKEN"\n',
    )
    args = ["--config", str(config), "--port", "0", "--log-format", "text", "--token", "alice=flag-token",
            "--metrics", "--no-console", "--store", f"sqlite:///{flag_db}"]  # fmt: skip
    try:
        with serving(*args, env=TOKENS) as served:
            async with httpx.AsyncClient(base_url=served.url) as http:
                assert (await http.get("/v1/agents", headers=bearer("a1ice-token"))).status_code == 401
                sent = await http.post(
                    "/v1/agents/bankingAgent/sessions", json={"message": "hi"}, headers=bearer("flag-token")
                )
                assert sent.status_code == 200, sent.text
                assert (await http.get("/metrics")).status_code == 200
                assert (await http.get("/console/")).status_code == 404
    finally:
        taken.close()
    assert not file_db.exists()
    with sqlite3.connect(flag_db) as db:
        assert db.execute("SELECT count(*) FROM pausepoint_sessions").fetchone()[0] == 1
    lines = [line for line in served.stderr.splitlines() if "pausepoint.server.access" in line]
    assert lines and not any(line.startswith("{") for line in lines), served.stderr


@pytest.mark.parametrize(("backend", "given"), [("postgres", "file"), ("postgres", "flag"), ("redis", "file"),
                                                ("redis", "flag")])  # fmt: skip
async def test_the_store_takes_its_schema_or_key_prefix(tmp_path, backend, given):
    """Every process of a deployment names the same schema (PostgreSQL) or key prefix (Redis):
    in the file's [store], or in --store's URL (?schema=, ?prefix=). The session is there."""
    url = service_url(backend)
    place = f"pp_cfg_{uuid.uuid4().hex[:10]}"
    option, value = ("schema", place) if backend == "postgres" else ("prefix", place + ":")
    env = {**TOKENS, "PP_STORE_URL": url}
    if given == "file":
        text = f'app = "tests.cli.apps:bank_ai"\n[store]\nurl_env = "PP_STORE_URL"\n{option} = "{value}"\n'
        args = ["--config", str(write(tmp_path / "team.toml", text)), "--port", "0"]
    else:
        joined = "&" if "?" in url else "?"
        args = ["tests.cli.apps:bank_ai", "--port", "0", "--store", f"{url}{joined}{option}={value}"]
    try:
        with serving(*args, "--token", "alice=s3cret", env=env) as served:
            async with httpx.AsyncClient(base_url=served.url) as http:
                sent = await http.post(
                    "/v1/agents/bankingAgent/sessions", json={"message": "hi"}, headers=bearer("s3cret")
                )
                assert sent.status_code == 200, sent.text
        found = await _sessions(backend, url, value)
        assert found == [sent.json()["session_id"]]
    finally:
        await _drop(backend, url, value)


async def _sessions(backend: str, url: str, place: str) -> list[str]:
    if backend == "postgres":
        from pausepoint.stores import PostgresSessionStore

        store: Any = PostgresSessionStore(url, schema=place)
    else:
        from pausepoint.stores import RedisSessionStore

        store = RedisSessionStore(url, prefix=place)
    try:
        return [s.session_id for s in await store.list_sessions()]
    finally:
        await store.close()


async def _drop(backend: str, url: str, place: str) -> None:
    if backend == "postgres":
        import asyncpg

        connection = await asyncpg.connect(url)
        try:
            await connection.execute(f'DROP SCHEMA IF EXISTS "{place}" CASCADE')
        finally:
            await connection.close()
    else:
        import redis.asyncio as aioredis

        client = aioredis.Redis.from_url(url)
        try:
            keys = [key async for key in client.scan_iter(match=place + "*")]
            if keys:
                await client.delete(*keys)
        finally:
            await client.aclose()


WEBHOOK = """
[[webhooks]]
name = "ops"
url = "{url}/hook"
secret_env = "HOOK_SECRET"
events = ["pause"]
timeout_seconds = {timeout}
"""


async def test_webhooks_from_the_file_are_signed_with_the_secret_from_the_environment(tmp_path):
    with receiver() as hooks:
        text = 'app = "tests.cli.apps:pay_ai"\n' + PEOPLE + WEBHOOK.format(url=hooks.url, timeout=10)
        env = {**TOKENS, "HOOK_SECRET": "hook-secret-from-env"}
        with serving("--config", str(write(tmp_path / "team.toml", text)), "--port", "0", env=env) as served:
            sent = await pay_and_approve(served.url)
            assert await asyncio.to_thread(hooks.arrived.wait, 20)
            await asyncio.sleep(0.5)  # an answer event, were it wanted, would be sent by now
    [(path, headers, body)] = hooks.posts
    event = verify_signature("hook-secret-from-env", body, headers)
    assert (path, event["type"], event["session_id"]) == ("/hook", "pause", sent["session_id"])


async def test_the_delivery_lease_comes_from_the_file(tmp_path):
    """A claimed delivery is the sender's for the lease: with an endpoint that never answers,
    the delivery in flight is due again only when the file's lease runs out."""
    with receiver(hang=True) as hooks:
        text = ('app = "tests.cli.apps:pay_ai"\n' + PEOPLE + WEBHOOK.format(url=hooks.url, timeout=30)
                + "[delivery]\nlease_seconds = 123\n")  # fmt: skip
        env = {**TOKENS, "HOOK_SECRET": "hook-secret-from-env"}
        with serving("--config", str(write(tmp_path / "team.toml", text)), "--port", "0", env=env) as served:
            async with httpx.AsyncClient(base_url=served.url) as http:
                await http.post(PAY, json={"message": "pay 5 to bob"}, headers=bearer("d4ve-token"))
                assert await asyncio.to_thread(hooks.arrived.wait, 20)
                claimed = time.time()
                listed = (await http.get("/v1/ops/deliveries", headers=bearer("car0l"))).json()
    [delivery] = listed["deliveries"]
    due = datetime.fromisoformat(delivery["due_at"]).timestamp()
    assert delivery["state"] == "pending" and 110 < due - claimed < 124, delivery


async def test_delivered_events_are_pruned_as_the_file_says(tmp_path):
    """``[retention] events_days``: a delivered event older than that leaves the outbox (0.00005
    days: 4.3 s, pruned within a second after)."""
    with receiver() as hooks:
        text = ('app = "tests.cli.apps:pay_ai"\n' + PEOPLE + WEBHOOK.format(url=hooks.url, timeout=10)
                + "[retention]\nevents_days = 0.00005\n")  # fmt: skip
        env = {**TOKENS, "HOOK_SECRET": "hook-secret-from-env"}
        with serving("--config", str(write(tmp_path / "team.toml", text)), "--port", "0", env=env) as served:
            async with httpx.AsyncClient(base_url=served.url) as http:
                await http.post(PAY, json={"message": "pay 5 to bob"}, headers=bearer("d4ve-token"))
                assert await asyncio.to_thread(hooks.arrived.wait, 20)
                listed: list[dict[str, Any]] = [{"state": "pending"}]
                for _ in range(300):  # a guard against a hang (30 s), not a timing
                    listed = (await http.get("/v1/ops/deliveries", headers=bearer("car0l"))).json()["deliveries"]
                    if not listed:
                        break
                    assert [d["state"] for d in listed] in (["pending"], ["delivered"])
                    await asyncio.sleep(0.1)
    assert listed == []
    assert len(hooks.posts) == 1


async def test_spans_go_to_the_otlp_collector_the_file_names(tmp_path):
    """Also those still waiting when systemd stops the server (SIGTERM, docs/deploy.md): found by
    a probe, SIGTERM ended the process with status 143 before they were sent."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    with receiver() as collector:
        text = (f'app = "tests.cli.apps:pay_ai"\n[tracing]\nendpoint = "{collector.url}"\n'
                'service_name = "pp-config-test"\nheaders_env = { "x-collector-key" = "COLLECTOR_KEY" }\n')  # fmt: skip
        env = {**TOKENS, "COLLECTOR_KEY": "collector-secret"}
        path = write(tmp_path / "team.toml", text + PEOPLE)
        with serving("--config", str(path), "--port", "0", env=env, stop=signal.SIGTERM) as served:
            await pay_and_approve(served.url)  # the batch sends every 5 s: these wait for the stop
    names, services = set(), set()
    for where, headers, body in collector.posts:
        assert where == "/v1/traces" and headers["x-collector-key"] == "collector-secret"
        request = ExportTraceServiceRequest.FromString(body)
        for spans in request.resource_spans:
            services |= {a.value.string_value for a in spans.resource.attributes if a.key == "service.name"}
            names |= {span.name for scope in spans.scope_spans for span in scope.spans}
    assert services == {"pp-config-test"}
    assert {"invoke_agent payAgent", "execute_tool transfer_money"} <= names, names


async def test_the_expiry_sweep_runs_as_often_as_the_file_says(tmp_path):
    """The pauses expire after a second; the file's sweep (every 0.2 s) settles them at once
    (the default sweep would wait 30 s)."""
    text = 'app = "tests.cli.config_apps:expiring_ai"\n[expiry]\ninterval_seconds = 0.2\n'
    with serving("--config", str(write(tmp_path / "team.toml", text)), "--port", "0", "--token", "a=t") as served:
        async with httpx.AsyncClient(base_url=served.url) as http:
            sent = (await http.post(PAYMENTS, json={"message": PAYMENT}, headers=bearer("t"))).json()
            assert sent["finish_reason"] == "interrupted"
            for _ in range(50):
                await asyncio.sleep(0.1)
                read = (await http.get(f"{PAYMENTS}/{sent['session_id']}", headers=bearer("t"))).json()
                if not read["interrupts"]:
                    break
            assert read["interrupts"] == [] and "did not pay" in read["last_response"]["message"]["parts"][0]["text"]


async def test_single_sign_on_from_the_file(tmp_path):
    """[auth.oidc] against a provider on loopback: its tokens sign in beside the file's static
    ones; a token's roles decide who approves (treasury), and make its holder an approver; the
    console signs people in through it as the file's console keys say."""
    with local_issuer() as issuer:
        text = (f'app = "examples.team:ai"\n[principals.ci-bot]\ntoken_env = "DAVE_TOKEN"\n[auth.oidc]\n'
                f'issuer = "{issuer.url}"\naudience = "{AUDIENCE}"\napprover_roles = ["treasury"]\n'
                'console_client_id = "pp-console"\nconsole_provider_name = "Acme SSO"\n'
                'console_redirect_uri = "https://pp.example.com/console/"\n')  # fmt: skip
        with serving("--config", str(write(tmp_path / "team.toml", text)), "--port", "0", env=TOKENS) as served:
            assert f"sign-in  {issuer.url} (OpenID Connect" in served.printed
            assert "the console signs in as client pp-console" in served.printed
            alice, bob = issuer.mint("alice"), issuer.mint("bob", roles=["treasury"])
            async with httpx.AsyncClient(base_url=served.url) as http:
                provider = (await http.get("/v1/console/sign-in")).json()["provider"]
                shown = [provider[k] for k in ("name", "client_id", "token_endpoint", "redirect_uri")]
                assert shown == ["Acme SSO", "pp-console", issuer.url + "/token", "https://pp.example.com/console/"]
                csp = (await http.get("/console/")).headers["content-security-policy"]
                assert csp.endswith(f"connect-src 'self' {issuer.url}")
                assert (await http.get("/v1/agents", headers=bearer("d4ve-token"))).status_code == 200
                sent = (await http.post(PAYMENTS, json={"message": PAYMENT}, headers=bearer(alice))).json()
                [pause] = sent["interrupts"]
                approve = f"{PAYMENTS}/{sent['session_id']}/interrupts/{pause['ref']}/approve"
                mine = await http.post(approve, json={}, headers=bearer(alice))
                assert mine.status_code == 403 and mine.json()["error"]["details"]["reason"] == "role"
                expired = issuer.mint("bob", roles=["treasury"], exp=int(time.time()) - 300)
                late = await http.post(approve, json={}, headers=bearer(expired))
                assert late.status_code == 401 and "expired" in late.json()["error"]["message"]
                done = await http.post(approve, json={}, headers=bearer(bob))
                assert done.status_code == 200, done.text
                assert done.json()["message"]["parts"][0]["text"].startswith("Paid: payment PMT-0001")


NOTIFIERS = """
[notifiers.links]
secret_env = "LINK_SECRET"
console_url = "https://pp.example.com/console"

[notifiers.slack]
signing_secret_env = "SLACK_SIGNING_SECRET"
users = {{ U024BE7LH = "alice" }}

[[notifiers.email]]
name = "desk-mail"
host = "127.0.0.1"
port = {port}
security = "none"
sender = "pausepoint@example.com"
to = ["desk@example.com"]
"""


async def test_notifiers_from_the_file_links_slack_and_email(tmp_path):
    """[notifiers]: a pause announced to the JSON webhook carries its signed link; the email
    notifier mails it through a real SMTP server; Slack's callbacks are taken (and an unsigned
    one refused)."""
    env = {**TOKENS, "HOOK_SECRET": "hook-secret", "LINK_SECRET": "link-secret-0123456789abcdef",
           "SLACK_SIGNING_SECRET": "slack-signing-secret"}  # fmt: skip
    with receiver() as hooks, smtp_server() as (port, mailbox):
        text = 'app = "tests.cli.apps:pay_ai"\n' + PEOPLE + WEBHOOK.format(url=hooks.url, timeout=10)
        path = write(tmp_path / "team.toml", text + NOTIFIERS.format(port=port))
        with serving("--config", str(path), "--port", "0", env=env) as served:
            async with httpx.AsyncClient(base_url=served.url) as http:
                await http.post(PAY, json={"message": "pay 5 to bob"}, headers=bearer("d4ve-token"))
                assert await asyncio.to_thread(hooks.arrived.wait, 20)
                assert await asyncio.to_thread(mailbox.arrived.wait, 20)
                unsigned = await http.post("/v1/slack/actions", data={"payload": "{}"})
                assert unsigned.status_code == 401, unsigned.text
    [event] = hooks.json_bodies()
    assert event["link"].startswith("https://pp.example.com/console/#link=")
    [(recipients, message)] = mailbox.messages
    assert recipients == ["desk@example.com"] and message["From"] == "pausepoint@example.com"
    assert event["link"] in message.get_body(preferencelist=("plain",)).get_content()


async def test_a_store_flag_replaces_the_files_store_and_needs_none_of_its_variables(tmp_path):
    """docs/config.md: ``--store URL`` replaces the whole section (found by a probe: the file's
    url_env was still required, and serve refused to start without it)."""
    text = 'app = "tests.cli.apps:pay_ai"\n[store]\nurl_env = "A_DATABASE_URL_NOBODY_SET"\n' + PEOPLE
    path = write(tmp_path / "team.toml", text)
    with serving("--config", str(path), "--store", "memory:", "--port", "0", env=TOKENS) as served:
        async with httpx.AsyncClient(base_url=served.url) as http:
            assert (await http.get("/readyz")).status_code == 200
