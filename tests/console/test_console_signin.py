"""Signing in to the console through an OpenID Connect provider, in a real headless Chromium: the
console tests' treasury app behind ``OidcBearer`` (its console client set), and a provider on
loopback (``tests.server.oidc_issuer``) with a login page, codes bound to PKCE challenges, and
tokens signed with keys made in the test.

Each test is a person's path: signing in and deciding as the person the token names; an answer
from the provider that this tab did not ask for, a code used twice, a verifier that is not the
code's, a provider that gives no token meant for this server, a cancelled sign-in — none signs
anything in, and the console says why; and a token that expires offers "Sign in again", through
the provider, back to where the person was.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest
from playwright.sync_api import Page, Route, expect
from starlette.applications import Starlette
from starlette.routing import Mount

from pausepoint import ApprovalPolicy
from pausepoint.server import BearerTokens, FirstOf, OidcBearer, OwnerPolicy, create_app, token_roles
from pausepoint.stores import SqliteSessionStore
from tests.console import apps
from tests.console.conftest import Shots
from tests.console.steps import approve
from tests.server.harness import TOKENS, serve_in_thread
from tests.server.oidc_issuer import AUDIENCE, LocalIssuer, local_issuer

CLIENT = "pausepoint-console"
DANA = "dana@example.com"
ALICE = {"Authorization": "Bearer alice-token"}
PENDING = "pausepoint.signIn"  # where the console keeps a sign-in it started (sessionStorage)


@dataclass
class Sso:
    """The treasury app at ``/sso`` (the API takes access tokens: ``aud`` ``pausepoint``) and at
    ``/ids`` (it takes ID tokens too: ``aud`` the console's client), both signing people in
    through ``issuer``; ``moved`` lists the transfers that ran."""

    url: str
    issuer: LocalIssuer
    moved: list[str] = field(default_factory=list)

    def console(self, app: str = "sso", fragment: str = "") -> str:
        return f"{self.url}/{app}/console/{fragment}"

    def paused(self) -> str:
        """A transfer alice asked for (her own token), waiting for treasury: its session."""
        reply = httpx.post(f"{self.url}/sso/v1/agents/treasury/sessions", json={"message": "pay 700 to savings"},
                           headers=ALICE)  # fmt: skip
        assert reply.status_code == 200 and reply.json()["finish_reason"] == "interrupted", reply.text
        return str(reply.json()["session_id"])

    def audit(self, session_id: str) -> list[dict[str, Any]]:
        url = f"{self.url}/sso/v1/agents/treasury/sessions/{session_id}/audit"
        return [e for e in httpx.get(url, headers=ALICE).json()["entries"] if e["decision"] != "message"]


@pytest.fixture
def sso(tmp_path: Path) -> Iterator[Sso]:
    with local_issuer() as issuer:
        issuer.person("dana", email=DANA, roles=["treasury"])
        issuer.person("erin", email="erin@example.com", roles=["auditor"])
        result = Sso("", issuer)

        def app(name: str, audience: list[str]) -> Starlette:
            ai = apps.build(SqliteSessionStore(tmp_path / f"{name}.db"), result.moved)
            for agent in ai.agents.values():  # who holds treasury is also what the caller's token says
                agent.approval_policy = agent.approval_policy + ApprovalPolicy(members=token_roles)
            sso = OidcBearer(issuer=issuer.url, audience=audience, principal_claim="email", leeway_seconds=0,
                             console_client_id=CLIENT, console_provider_name="Acme SSO")  # fmt: skip
            return create_app(ai, auth=FirstOf(BearerTokens(TOKENS), sso), feed_interval=0.2,
                              policy=OwnerPolicy(approver_roles={"treasury"}))  # fmt: skip

        def factory() -> Starlette:
            return Starlette(
                routes=[Mount("/sso", app("sso", [AUDIENCE])), Mount("/ids", app("ids", [AUDIENCE, CLIENT]))]
            )

        with serve_in_thread(factory) as url:
            result.url = url
            for name in ("sso", "ids"):
                issuer.register(CLIENT, result.console(name))
            yield result


def sign_in_at_the_provider(page: Page, as_user: str = "dana") -> None:
    """From the console's sign-in page, through the provider's login page, as ``as_user``."""
    page.get_by_role("button", name="Sign in with Acme SSO").click()
    expect(page.get_by_role("heading", name="Sign in to the local issuer")).to_be_visible()
    page.get_by_role("button", name=f"Sign in as {as_user}").click()


def signed_in_nothing(page: Page, why: str) -> None:
    """The console is on its sign-in page saying ``why``, holding no token, with no code in sight."""
    expect(page.locator("#signin")).to_be_visible()
    expect(page.locator("#signin-error")).to_contain_text(why)
    expect(page.locator("#signin-error")).to_contain_text("nothing was signed in")
    expect(page.locator("#app")).to_be_hidden()
    assert page.evaluate("sessionStorage.getItem('pausepoint.token')") is None
    assert "code=" not in page.url and "state=" not in page.url


def test_signing_in_through_the_provider_shows_the_person_their_inbox_and_records_their_decision(
    sso: Sso, browser, shots: Shots
):
    session = sso.paused()
    page = browser.new_page()
    page.goto(sso.console())
    expect(page.get_by_role("button", name="Sign in with Acme SSO")).to_be_visible()
    expect(page.get_by_label("Bearer token")).to_be_visible()  # a token still signs in beside it
    shots(page, "sign-in")
    with page.expect_request(lambda r: r.url.startswith(sso.issuer.url + "/authorize")) as asked:
        page.get_by_role("button", name="Sign in with Acme SSO").click()
    query = {k: v[0] for k, v in parse_qs(asked.value.url.split("?", 1)[1]).items()}
    assert [query[k] for k in ("client_id", "redirect_uri", "code_challenge_method")] == [CLIENT, sso.console(), "S256"]
    assert {"state", "nonce", "code_challenge"} <= set(query) and query["scope"] == "openid profile email"
    shots(page, "provider")
    page.get_by_role("button", name="Sign in as dana").click()

    expect(page.locator("#who")).to_have_text(DANA)  # the token's email claim names the principal
    expect(page.locator("#feed-state")).to_have_text("live")
    assert page.url == sso.console()  # code and state gone from the address bar
    assert page.evaluate(f"sessionStorage.getItem('{PENDING}')") is None  # the sign-in is used up
    [(status, form)] = sso.issuer.exchanges
    assert status == 200 and form["client_id"] == CLIENT and form["redirect_uri"] == sso.console()
    assert 43 <= len(form["code_verifier"]) <= 128
    token = page.evaluate("sessionStorage.getItem('pausepoint.token')")
    assert token.count(".") == 2 and token == _access_token_of(sso, page)

    item = page.locator("#inbox .session-item")  # dana holds treasury: alice's transfer waits for her
    expect(item).to_have_count(1)
    item.locator("a").first.click()
    card = page.locator(".card")
    expect(card).to_have_attribute("data-state", "open")
    shots(page, "inbox")
    approve(page, card)
    expect(card).to_have_attribute("data-state", "answered")
    [entry] = sso.audit(session)
    assert (entry["decision"], entry["principal"]) == ("approve", DANA)
    assert sso.moved == ["700->savings"]
    shots(page, "decided")


def _access_token_of(sso: Sso, page: Page) -> str:
    """The token the console holds is an access token for this server (aud: pausepoint)."""
    token = str(page.evaluate("sessionStorage.getItem('pausepoint.token')"))
    claims = page.evaluate("(t) => JSON.parse(atob(t.split('.')[1].replace(/-/g, '+').replace(/_/g, '/')))", token)
    assert claims["aud"] == AUDIENCE and claims["email"] == DANA
    return token


def test_an_answer_this_tab_did_not_ask_for_or_a_cancelled_sign_in_signs_nothing_in(sso: Sso, browser, shots: Shots):
    page = browser.new_page()
    page.goto(sso.console())
    page.get_by_role("button", name="Sign in with Acme SSO").click()
    page.locator("input[name=state]").evaluate("(input) => { input.value = 'forged-by-someone-else'; }")
    page.get_by_role("button", name="Sign in as dana").click()
    signed_in_nothing(page, "not started in this tab, or its answer was altered")
    assert sso.issuer.exchanges == []  # the code was never even exchanged
    shots(page, "forged-state")

    # The person cancels at the provider: it answers error=access_denied.
    page.get_by_role("button", name="Sign in with Acme SSO").click()
    page.get_by_role("button", name="Cancel").click()
    signed_in_nothing(page, "Signing in with Acme SSO was cancelled or refused")
    shots(page, "cancelled")
    sign_in_at_the_provider(page)  # and then it works
    expect(page.locator("#who")).to_have_text(DANA)


def test_a_code_is_taken_once_and_only_with_its_own_verifier(sso: Sso, browser, shots: Shots):
    first = browser.new_page()
    first.goto(sso.console())
    with first.expect_request(sso.issuer.url + "/token") as exchanged:
        sign_in_at_the_provider(first)
    expect(first.locator("#who")).to_have_text(DANA)
    used = exchanged.value.post_data or ""

    def replay(route: Route) -> None:  # another tab's sign-in, finished with the first one's code and verifier
        route.continue_(post_data=used)

    second = browser.new_page()  # a tab of its own: its own sessionStorage
    second.route(sso.issuer.url + "/token", replay)
    second.goto(sso.console())
    sign_in_at_the_provider(second)
    signed_in_nothing(second, "Acme SSO refused to finish this sign-in")
    expect(second.locator("#signin-error")).to_contain_text("Acme SSO said: “the code is unknown, used or expired”")
    shots(second, "replayed")

    def tampered(route: Route) -> None:  # the exchange carries a verifier that is not the code's
        form = {k: v[0] for k, v in parse_qs(route.request.post_data or "").items()}
        form["code_verifier"] = "x" * 64
        route.continue_(post_data=httpx.QueryParams(form).__str__())

    third = browser.new_page()
    third.route(sso.issuer.url + "/token", tampered)
    third.goto(sso.console())
    sign_in_at_the_provider(third)
    signed_in_nothing(third, "the code verifier does not match")
    assert [status for status, _ in sso.issuer.exchanges] == [200, 400, 400]
    shots(third, "wrong-verifier")


def test_the_console_sends_the_token_meant_for_the_api(sso: Sso, browser, shots: Shots):
    """The provider's access token is no JWT here: where the API takes ID tokens (its audience
    names the console's client) the console signs in with the ID token; where it does not,
    nothing is signed in, and the console says why."""
    sso.issuer.opaque_access = True
    page = browser.new_page()
    page.goto(sso.console("ids"))
    sign_in_at_the_provider(page)
    expect(page.locator("#who")).to_have_text(DANA)
    token = str(page.evaluate("sessionStorage.getItem('pausepoint.token')"))
    claims = page.evaluate("(t) => JSON.parse(atob(t.split('.')[1].replace(/-/g, '+').replace(/_/g, '/')))", token)
    assert claims["aud"] == CLIENT and claims["nonce"]

    other = browser.new_page()
    other.goto(sso.console())
    sign_in_at_the_provider(other)
    signed_in_nothing(other, "gave no token meant for this server")
    shots(other, "no-token-for-us")


def test_an_expired_sign_in_offers_to_sign_in_again_through_the_provider(sso: Sso, browser, shots: Shots):
    session = sso.paused()
    sso.issuer.token_seconds = 5
    page = browser.new_page()
    page.goto(sso.console(fragment=f"#agent=treasury&session={session}"))
    sign_in_at_the_provider(page)
    expect(page.locator("#who")).to_have_text(DANA)
    card = page.locator(".card")
    expect(card).to_have_attribute("data-state", "open")  # back where the person set out from
    assert page.url == sso.console(fragment=f"#agent=treasury&session={session}")

    signed_out = page.locator("#signed-out")  # the token runs out: the console sees it without being used
    expect(signed_out).to_be_visible(timeout=15_000)
    expect(signed_out).to_contain_text("no longer accepted")
    for button in card.get_by_role("button").all():
        expect(button).to_be_disabled()
    shots(page, "expired")

    sso.issuer.token_seconds = 300
    sso.issuer.auto_user = "dana"  # still signed in at the provider: it asks nothing
    signed_out.get_by_role("button", name="Sign in again").click()
    expect(page.locator("#who")).to_have_text(DANA)
    expect(page.locator("#signed-out")).to_be_hidden()
    expect(page.locator(".card")).to_have_attribute("data-state", "open")
    assert page.url == sso.console(fragment=f"#agent=treasury&session={session}")
    assert [status for status, _ in sso.issuer.exchanges] == [200, 200]
    approve(page, page.locator(".card"))
    expect(page.locator(".card")).to_have_attribute("data-state", "answered")
    assert [(e["decision"], e["principal"]) for e in sso.audit(session)] == [("approve", DANA)]
    shots(page, "signed-in-again")
