"""Single sign-on: bearer JWTs from an OpenID Connect provider, through real HTTP against a
served app, with a real provider on loopback (``oidc_issuer``) signing with keys made here.

Every refusal is a 401 ``unauthenticated`` with ``WWW-Authenticate: Bearer`` and a message
saying why; none is a 500.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import jwt
import pytest

from pausepoint import ApprovalPolicy, Pausepoint, Role
from pausepoint.errors import DefinitionError
from pausepoint.server import BearerTokens, FirstOf, OidcBearer, OwnerPolicy, create_app, current_identity, token_roles
from pausepoint.stores import SessionSummary
from tests.approval_apps import build
from tests.server.harness import serve_in_thread
from tests.server.oidc_issuer import AUDIENCE, LocalIssuer, local_issuer

SESSIONS = "/v1/agents/bank/sessions"


class Recording(OwnerPolicy):
    """``OwnerPolicy`` that notes the identity each request it was asked about carried."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.seen: list[Any] = []

    def inbox_owner(self, principal: str) -> str | None:
        self.seen.append(current_identity())
        return super().inbox_owner(principal)


class Bank:
    """The approval tests' bank behind ``OidcBearer``: a transfer needs one of treasury, and who
    holds treasury is what the caller's token says (``token_roles``); a treasury token also
    makes its bearer an approver (``approver_roles``)."""

    def __init__(self, issuer: LocalIssuer, **options: Any) -> None:
        ai = Pausepoint()
        policy = ApprovalPolicy(roles={"treasury": Role(tools=["transfer_money"])}, members=token_roles)
        _, _, self.ledger = build(policy=policy, app=ai)
        self.policy = Recording(approver_roles={"treasury"})
        self.ai = ai
        self.auth: Any = OidcBearer(issuer=issuer.url, audience=AUDIENCE, tenant_claim="org", **options)

    def app(self) -> Any:
        return create_app(self.ai, auth=self.auth, policy=self.policy, console=False)


@pytest.fixture
def issuer() -> Iterator[LocalIssuer]:
    with local_issuer() as found:
        yield found


@pytest.fixture
def bank(issuer: LocalIssuer) -> Iterator[tuple[str, Bank]]:
    served = Bank(issuer)
    with serve_in_thread(served.app) as url:
        yield url, served


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def refused(url: str, token: str, why: str) -> None:
    """``token`` is refused with a 401 whose message says ``why``."""
    async with httpx.AsyncClient(base_url=url) as http:
        reply = await http.get("/v1/agents", headers=bearer(token))
    assert reply.status_code == 401, reply.text
    assert reply.headers["www-authenticate"].startswith("Bearer")
    error = reply.json()["error"]
    assert error["code"] == "unauthenticated" and why in error["message"], error


async def test_a_good_token_from_the_provider_names_the_principal(bank, issuer):
    url, served = bank
    async with httpx.AsyncClient(base_url=url) as http:
        token = (await http.post(f"{issuer.url}/token", json={"sub": "alice", "org": "acme"})).json()["access_token"]
        sent = await http.post(SESSIONS, json={"message": "hello"}, headers=bearer(token))
        assert sent.status_code == 200, sent.text
        session = await http.get(f"{SESSIONS}/{sent.json()['session_id']}", headers=bearer(token))
        assert session.json()["session"]["owner"] == "alice"
        listed = await http.get(SESSIONS, headers=bearer(token))
        assert listed.status_code == 200
    [identity] = served.policy.seen
    assert (identity.principal, identity.roles, identity.tenant) == ("alice", frozenset(), "acme")
    assert issuer.paths[:2] == ["/token", "/.well-known/openid-configuration"] and issuer.jwks_fetches == 1


async def test_an_expired_token_is_refused(bank, issuer):
    url, _ = bank
    now = int(time.time())
    await refused(url, issuer.mint(exp=now - 120, iat=now - 600), "the token expired")


async def test_expiry_and_not_before_have_a_small_leeway(bank, issuer):
    url, _ = bank
    now = int(time.time())
    async with httpx.AsyncClient(base_url=url) as http:
        for token in (issuer.mint(exp=now - 10), issuer.mint(nbf=now + 10)):  # within the 30 s leeway
            assert (await http.get("/v1/agents", headers=bearer(token))).status_code == 200


async def test_a_token_not_valid_yet_is_refused(bank, issuer):
    url, _ = bank
    await refused(url, issuer.mint(nbf=int(time.time()) + 600), "not valid yet")


async def test_a_token_for_another_audience_is_refused(bank, issuer):
    url, _ = bank
    await refused(url, issuer.mint(aud="another-service"), "another audience")


async def test_a_token_from_another_issuer_is_refused(bank, issuer):
    url, _ = bank
    await refused(url, issuer.mint(iss="https://login.evil.example"), "another issuer")


async def test_a_token_without_a_signature_alg_none_is_refused(bank, issuer):
    url, _ = bank
    unsigned = issuer.forge({"alg": "none", "typ": "JWT", "kid": "key-1"}, issuer.claims(), secret=None)
    await refused(url, unsigned, "algorithm 'none' is not allowed")


async def test_a_critical_header_extension_is_refused_for_what_it_is(bank, issuer):
    """Found by a probe: a well-formed token whose header names an extension in ``crit`` was said
    to be "not a well-formed JWT"."""
    url, _ = bank
    critical = issuer.forge({"alg": "RS256", "kid": "key-1", "crit": ["foo"], "foo": 1}, issuer.claims(), secret=None)
    await refused(url, critical, "the bearer token's header is refused: Unsupported critical extension: foo")


async def test_hs256_keyed_with_the_public_key_is_refused(bank, issuer):
    """Algorithm confusion: the provider's public key (which anyone can read in its JWKS) used as
    an HMAC secret. HS* is never allowed, whatever the key."""
    url, _ = bank
    for public in (issuer.public_pem(), issuer.public_pem().strip()):
        forged = issuer.forge({"alg": "HS256", "typ": "JWT", "kid": "key-1"}, issuer.claims(), secret=public)
        await refused(url, forged, "algorithm 'HS256' is not allowed")


async def test_a_tampered_token_is_refused(bank, issuer):
    url, _ = bank
    header, _, signature = issuer.mint("alice").split(".")
    import base64
    import json

    claims = issuer.claims("mallory")
    payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    await refused(url, f"{header}.{payload}.{signature}", "signature does not verify")


async def test_a_key_that_does_not_sign_the_algorithm_is_refused(bank, issuer):
    """An ES256 header on a token whose kid names an RSA key: the key's type must fit."""
    url, _ = bank
    issuer.add_key("ec-1", kind="EC", publish=False)
    token = issuer.mint(kid="ec-1")  # signed by an EC key the provider does not publish ...
    header = issuer.forge({"alg": "ES256", "kid": "key-1"}, {}, None).split(".")[0]  # ... claiming RSA key-1
    _, payload, signature = token.split(".")
    served = Bank(issuer, algorithms=["RS256", "ES256"])
    with serve_in_thread(served.app) as other:
        await refused(other, f"{header}.{payload}.{signature}", "is a RSA key, which does not sign ES256")
    await refused(url, token, "algorithm 'ES256' is not allowed")  # the default pins RS256


async def test_a_rotated_key_is_fetched_and_a_withdrawn_one_refused(issuer):
    """The provider rotates: a token signed with its new key (a kid the server has not seen)
    makes the server fetch the JWKS again, and is accepted; a token of the withdrawn key is
    refused. Fetching again on an unknown kid is rate-limited: made-up kids do not reach the
    provider while the cooldown runs."""
    served = Bank(issuer, jwks_cooldown_seconds=2.0)
    with serve_in_thread(served.app) as url:
        async with httpx.AsyncClient(base_url=url) as http:
            old = issuer.mint("alice")
            assert (await http.get("/v1/agents", headers=bearer(old))).status_code == 200
            assert issuer.jwks_fetches == 1
            issuer.rotate("key-2")
            for n in range(20):  # within the cooldown: refused without asking the provider
                await refused(url, issuer.mint(kid="key-2") if n == 0 else _made_up(issuer, n), "not one the issuer")
            assert issuer.jwks_fetches == 1
            await asyncio.sleep(2.1)
            new = issuer.mint("alice", kid="key-2")
            assert (await http.get("/v1/agents", headers=bearer(new))).status_code == 200
            assert issuer.jwks_fetches == 2
            await refused(url, old, "key 'key-1' is not one the issuer publishes")
            assert issuer.jwks_fetches == 2  # the cooldown holds again after that fetch


def _made_up(issuer: LocalIssuer, n: int) -> str:
    """A token naming a key the provider never published."""
    return jwt.encode(issuer.claims(), issuer.keys["key-2"], algorithm="RS256", headers={"kid": f"made-up-{n}"})


async def test_a_principal_without_the_role_may_not_approve(bank, issuer):
    """Roles come from the token: the owner (no role) may see her pause but not approve it
    (403); a colleague whose token holds treasury is an approver and approves it; one with no
    role does not see the session at all (404)."""
    url, served = bank
    alice, bob, carol = issuer.mint("alice"), issuer.mint("bob", roles=["treasury"]), issuer.mint("carol")
    async with httpx.AsyncClient(base_url=url) as http:
        sent = (await http.post(SESSIONS, json={"message": "pay 500 to savings"}, headers=bearer(alice))).json()
        [pause] = sent["interrupts"]
        session = f"{SESSIONS}/{sent['session_id']}"
        approve = f"{session}/interrupts/{pause['ref']}/approve"
        mine = await http.post(approve, json={}, headers=bearer(alice))
        assert mine.status_code == 403, mine.text
        error = mine.json()["error"]
        assert (error["code"], error["details"]["reason"]) == ("approval_forbidden", "role")
        assert (await http.get(session, headers=bearer(carol))).status_code == 404
        inbox = (await http.get(SESSIONS, params={"pending": "true"}, headers=bearer(bob))).json()
        assert [s["session_id"] for s in inbox["sessions"]] == [sent["session_id"]]
        done = await http.post(approve, json={}, headers=bearer(bob))
        assert done.status_code == 200, done.text
        assert done.json()["finish_reason"] == "stop"
    assert served.ledger == ["500->savings"]
    entries = await served.ai.agents["bank"].chat(sent["session_id"]).audit_trail()
    assert [e.principal for e in entries if e.decision == "approve"] == ["bob"]


async def test_static_tokens_and_the_provider_side_by_side(issuer):
    """``FirstOf(BearerTokens, OidcBearer)``: a static token and a JWT both sign in; a
    credential neither accepts is the usual 401."""
    served = Bank(issuer)
    served.auth = FirstOf(BearerTokens({"bot-token": "ci-bot"}), served.auth)
    with serve_in_thread(served.app) as url:
        async with httpx.AsyncClient(base_url=url) as http:
            for token in ("bot-token", issuer.mint("alice")):
                assert (await http.get("/v1/agents", headers=bearer(token))).status_code == 200
        await refused(url, "not-a-token", "missing or invalid credentials")
        await refused(url, issuer.mint(aud="elsewhere"), "another audience")


async def test_an_unreachable_provider_is_a_401_never_a_500(issuer):
    served = Bank(issuer)
    token = issuer.mint("alice")
    issuer.stop()
    with serve_in_thread(served.app) as url:
        await refused(url, token, "cannot be reached")
        await refused(url, token, "cannot be reached")  # not asked again at once


async def test_a_key_rotated_in_while_the_provider_is_down_is_unreachable_not_unknown(issuer, caplog):
    """The server knows the key set, the provider goes down, and a token names a key it rotated
    in: the key cannot be checked — "cannot be reached", logged — not "not one the issuer
    publishes" (found by a probe: a valid key was called forged, and nothing was logged)."""
    served = Bank(issuer, jwks_cooldown_seconds=0.0)
    with serve_in_thread(served.app) as url:
        async with httpx.AsyncClient(base_url=url) as http:
            assert (await http.get("/v1/agents", headers=bearer(issuer.mint("alice")))).status_code == 200
        issuer.rotate("key-2")
        rotated = issuer.mint("alice", kid="key-2")
        issuer.stop()
        with caplog.at_level("WARNING", logger="pausepoint"):
            await refused(url, rotated, "cannot be reached")
        assert any("keys could not be read" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("served_instead", [b"<html>not json</html>", b"[1, 2]", b'{"keys": []}', b'{"keys": [{}]}'])
async def test_a_provider_serving_a_broken_key_set_is_a_401_never_a_500(issuer, served_instead):
    issuer.broken_jwks = served_instead
    served = Bank(issuer, jwks_cooldown_seconds=5.0)
    with serve_in_thread(served.app) as url:
        await refused(url, issuer.mint("alice"), "cannot be reached")
        await refused(url, issuer.mint("alice"), "cannot be reached")
    assert issuer.jwks_fetches == 1  # not asked again while the cooldown runs


async def test_claims_map_to_the_principal_roles_and_tenant(issuer):
    """Claim names are configurable, dotted paths included (Keycloak's realm_access.roles)."""
    served = Bank(issuer, principal_claim="preferred_username", roles_claim="realm_access.roles")
    with serve_in_thread(served.app) as url:
        dora = issuer.mint("id-1", preferred_username="dora", realm_access={"roles": ["treasury"]}, org="acme")
        erin = issuer.mint("id-2", preferred_username="erin", realm_access={"roles": "treasury auditor"})
        async with httpx.AsyncClient(base_url=url) as http:
            for token in (dora, erin):
                assert (await http.get(SESSIONS, headers=bearer(token))).status_code == 200
        for bad, why in (
            (issuer.mint("id-3"), "'preferred_username' claim names no principal"),
            (issuer.mint("id-4", preferred_username="\x1b[31mroot"), "'preferred_username' claim names no principal"),
            # a name no config file could give (found by a probe: "alice " signed in, beside acme's alice)
            (issuer.mint("id-7", preferred_username="alice "), "'preferred_username' claim names no principal"),
            (issuer.mint("id-8", preferred_username="a" * 129), "'preferred_username' claim names no principal"),
            (issuer.mint("id-5", preferred_username="x", realm_access={"roles": [1]}), "not a list of role names"),
            (issuer.mint("id-6", preferred_username="x", org=["a", "b"]), "'org' claim names no tenant"),
            # a reason a person can read, not the library's class name (found by a probe)
            (issuer.mint(123, preferred_username="x"), "the token's 'sub' claim is not a string"),  # type: ignore[arg-type]
        ):
            await refused(url, bad, why)
    seen = [(i.principal, i.roles, i.tenant) for i in served.policy.seen]
    assert seen == [("dora", frozenset({"treasury"}), "acme"), ("erin", frozenset({"treasury", "auditor"}), None)]


async def test_the_console_sign_in_settings_come_from_discovery(issuer):
    bearer_auth = OidcBearer(issuer=issuer.url, audience=AUDIENCE, console_client_id="pausepoint-console")
    found = await bearer_auth.sign_in_settings()
    assert found == {
        "name": "127.0.0.1",  # the issuer's host, without console_provider_name
        "issuer": issuer.url,
        "authorization_endpoint": issuer.url + "/authorize",
        "token_endpoint": issuer.url + "/token",
        "end_session_endpoint": None,
        "client_id": "pausepoint-console",
        "scopes": ["openid", "profile", "email"],
        "redirect_uri": None,  # the console's own address
        "audience": [AUDIENCE],
    }
    assert await OidcBearer(issuer=issuer.url, audience=AUDIENCE).sign_in_settings() is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"algorithms": ["none"]}, "'none' is no signature"),
        ({"algorithms": ["HS256"]}, "'HS256' is keyed with a shared secret"),
        ({"issuer": "http://login.example.com"}, "issuer must use https"),
        ({"audience": ""}, "audience names what tokens"),
        ({"leeway_seconds": 3600}, "leeway_seconds"),
        ({"roles_claim": "a..b"}, "a claim name"),
    ],
)
def test_settings_that_cannot_work_are_refused(options, message):
    settings = {"issuer": "https://login.example.com", "audience": AUDIENCE, **options}
    with pytest.raises(DefinitionError, match=message):
        OidcBearer(**settings)


def test_the_policy_reads_roles_only_from_the_callers_own_token():
    """``token_roles`` outside a request, or for another principal, gives nothing."""
    assert token_roles("bob") == frozenset()
    now = datetime.now(UTC)
    summary = SessionSummary(session_id="s", agent="a", owner="alice", version=1, created_at=now, updated_at=now)
    assert not OwnerPolicy(approver_roles={"treasury"}).can_view("bob", summary)
