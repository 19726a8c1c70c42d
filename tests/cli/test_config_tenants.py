"""The config file's ``[tenants]``: examples/tenants.toml (the very file docs/config.md shows)
checks, and served as a real process two teams share one server — each "alice" sees, lists and
answers only her tenant's sessions, roles hold in their tenant only, the webhook of one tenant
hears only that tenant, an operator reads every tenant — and mistakes are named at their line."""

from __future__ import annotations

import re

import httpx
import pytest

from pausepoint.webhooks import verify_signature
from tests.cli.config_files import PAYMENT, pausepoint, receiver, serving, write
from tests.cli.conftest import ROOT

EXAMPLE = ROOT / "examples" / "tenants.toml"
PAYMENTS = "/v1/agents/paymentsAgent/sessions"
ENV = {
    "ONCALL_TOKEN": "oncall-t0ken",
    "ACME_ALICE_TOKEN": "acme-alice-t0ken",
    "ACME_DESK_TOKEN": "acme-desk-t0ken",
    "GLOBEX_ALICE_TOKEN": "globex-alice-t0ken",
    "GLOBEX_BOB_TOKEN": "globex-bob-t0ken",
    "ACME_WEBHOOK_URL": "https://acme.example.com/hooks/pausepoint",
    "ACME_WEBHOOK_SECRET": "acme-hook-secret-77",
}


def bearer(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {ENV[name]}"}


def test_the_tenants_example_checks_and_the_docs_show_it_whole():
    done = pausepoint("config", "check", str(EXAMPLE.relative_to(ROOT)), env=ENV)
    assert done.returncode == 0, done.stderr
    for expected in (
        "tenant     acme: alice, desk; sees its own sessions only",
        "tenant     globex: alice, bob; sees its own sessions only",
        "principal  oncall: token $ONCALL_TOKEN ********; approver, operator (every tenant)",
        "principal  acme/alice: token $ACME_ALICE_TOKEN ********; approver of treasury",
        "principal  globex/alice: token $GLOBEX_ALICE_TOKEN ********\n",
        "webhook    acme-desk -> $ACME_WEBHOOK_URL ******** (json; pause; tenants acme, signed (********))",
    ):
        assert expected in done.stdout, f"{expected!r} not in:\n{done.stdout}"
    for secret in ENV.values():
        assert secret not in done.stdout + done.stderr
    page = (ROOT / "docs" / "config.md").read_text(encoding="utf-8")
    assert EXAMPLE.read_text(encoding="utf-8") in re.findall(r"```toml\n(.*?)```", page, flags=re.DOTALL)


async def test_two_teams_share_a_server_served_from_the_example(tmp_path):
    with receiver() as hook:
        env = {**ENV, "ACME_WEBHOOK_URL": hook.url + "/acme"}
        args = ["--config", str(EXAMPLE), "--port", "0", "--store", f"sqlite:///{tmp_path / 't.db'}"]
        with serving(*args, env=env) as served:
            assert "approver acme/alice (treasury)" in served.printed
            async with httpx.AsyncClient(base_url=served.url, timeout=30) as http:
                await _two_teams(http, hook)


async def _two_teams(http: httpx.AsyncClient, hook) -> None:
    sessions = {}
    for who in ("GLOBEX_ALICE_TOKEN", "ACME_ALICE_TOKEN"):
        sent = await http.post(PAYMENTS, json={"message": PAYMENT}, headers=bearer(who))
        assert sent.status_code == 200, sent.text
        sessions[who] = (sent.json()["session_id"], sent.json()["interrupts"][0]["ref"])
    globex, globex_ref = sessions["GLOBEX_ALICE_TOKEN"]
    acme, acme_ref = sessions["ACME_ALICE_TOKEN"]

    async def listed(who: str) -> list[tuple[str, str, str | None]]:
        found = (await http.get(PAYMENTS, headers=bearer(who))).json()["sessions"]
        return sorted((s["session_id"], s["owner"], s["tenant"]) for s in found)

    assert await listed("ACME_ALICE_TOKEN") == [(acme, "alice", "acme")]
    assert await listed("GLOBEX_ALICE_TOKEN") == [(globex, "alice", "globex")]
    assert await listed("ACME_DESK_TOKEN") == [(acme, "alice", "acme")]
    assert await listed("ONCALL_TOKEN") == sorted([(acme, "alice", "acme"), (globex, "alice", "globex")])
    assert (await http.get(f"{PAYMENTS}/{globex}", headers=bearer("ACME_ALICE_TOKEN"))).status_code == 404

    def approve(session: str, ref: str) -> str:
        return f"{PAYMENTS}/{session}/interrupts/{ref}/approve"

    # acme's alice holds treasury in acme only; globex's alice holds nothing; an operator answers nothing
    assert (
        await http.post(approve(globex, globex_ref), json={}, headers=bearer("ACME_ALICE_TOKEN"))
    ).status_code == 404
    mine = await http.post(approve(globex, globex_ref), json={}, headers=bearer("GLOBEX_ALICE_TOKEN"))
    assert mine.status_code == 403 and mine.json()["error"]["details"]["reason"] == "role", mine.text
    assert (await http.post(approve(acme, acme_ref), json={}, headers=bearer("ONCALL_TOKEN"))).status_code == 403
    assert (await http.get("/v1/ops/deliveries", headers=bearer("ONCALL_TOKEN"))).status_code == 200
    for who, session, ref in (("GLOBEX_BOB_TOKEN", globex, globex_ref), ("ACME_ALICE_TOKEN", acme, acme_ref)):
        done = await http.post(approve(session, ref), json={}, headers=bearer(who))
        assert done.status_code == 200 and done.json()["finish_reason"] == "stop", done.text
    metrics = (await http.get("/metrics")).text
    assert re.search(r'pausepoint_pauses_opened_total\{agent="paymentsAgent",tenant="globex",tool="pay_invoice"\}',
                     metrics), metrics  # fmt: skip
    # The acme webhook heard acme's pause, and nothing of globex's (announced first).
    assert hook.arrived.wait(30)
    [(path, headers, body)] = hook.posts
    event = verify_signature(ENV["ACME_WEBHOOK_SECRET"], body, {k.lower(): v for k, v in headers.items()})
    assert (path, event["type"], event["session_id"], event["tenant"]) == ("/acme", "pause", acme, "acme")


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ('[principals."acme/bob"]\ntoken_env = "TOKEN"\n[tenants.acme]\n', 2,
         "principals.\"acme/bob\": a name with '/' reads as a tenant's principal"),
        ('[tenants.acme]\n[[webhooks]]\nname = "o"\nurl = "https://o.example"\nsecret_env = "TOKEN"\n'
         'tenants = ["acme", "initech"]\n', 7, "webhooks[0].tenants: no tenant 'initech' (tenants: acme)"),
        ('[tenants.acme.principals.alice]\ntoken_env = "TOKEN"\nroles = ["tresury"]\n', 4,
         "tenants.acme.principals.alice.roles: no agent's approval policy defines the role(s) tresury"),
        ("[tenants.acme.principals.alice]\n\n", 2,
         "tenants.acme.principals.alice: no token_env, and no [auth.oidc] to sign in through"),
    ],
)  # fmt: skip
def test_tenant_mistakes_are_named_at_their_key_and_line(tmp_path, text, line, message):
    config = write(tmp_path / "team.toml", 'app = "tests.cli.apps:pay_ai"\n' + text)
    done = pausepoint("config", "check", str(config), env={"TOKEN": "t0ken"})
    assert done.returncode == 2, done.stdout
    assert f"{config}:{line}: {message}" in done.stderr, done.stderr


def test_a_flag_names_a_tenants_principal_as_tenant_slash_name(tmp_path):
    config = write(tmp_path / "team.toml", 'app = "tests.cli.apps:pay_ai"\n[tenants.acme]\n')
    unknown = pausepoint("serve", "--config", str(config), "--token", "initech/bob=t0ken", env={"TOKEN": "t"})
    assert unknown.returncode == 2 and "'initech/bob': no tenant 'initech' (tenants: acme)" in unknown.stderr
    spanning = pausepoint("serve", "--config", str(config), "--operator", "acme/bob", "--token", "acme/bob=t0k")
    assert spanning.returncode == 2 and "--operator acme/bob: an operator spans tenants" in spanning.stderr


def test_an_operator_flag_names_someone_who_signs_in(tmp_path):
    """Found by a probe: ``--operator alcie`` (a typo, no token) served, nobody could reach
    /v1/ops, and the generated token's principal was no operator any more; the config file's
    equivalent is refused. Refused alike now, naming the flag (one given a token is taken:
    ``test_operate``)."""
    typo = pausepoint("serve", "tests.cli.apps:bank_ai", "--operator", "alcie", "--token", "alice=t0ken-a")
    assert typo.returncode == 2
    assert "--operator alcie: nobody signs in as 'alcie': give them a token (--token alcie=..." in typo.stderr
    alone = pausepoint("serve", "tests.cli.apps:bank_ai", "--operator", "alcie")
    assert alone.returncode == 2 and "nobody signs in as 'alcie'" in alone.stderr
