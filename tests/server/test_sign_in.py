"""The console's sign-in through the OpenID Connect provider, server side, over real HTTP: what
``GET /v1/console/sign-in`` publishes (without credentials), the console's CSP letting it reach
the token endpoint and nothing else, and the authorization code flow with PKCE against the
loopback provider (``oidc_issuer``) whose access token the API takes — a code used once, for its
client and redirect URI, with the verifier that hashes to its challenge. (The browser's side:
tests/console/test_console_signin.py.)"""

from __future__ import annotations

import base64
import hashlib
import secrets
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from pausepoint import Pausepoint
from pausepoint.errors import DefinitionError
from pausepoint.server import BearerTokens, FirstOf, OidcBearer, create_app
from tests.approval_apps import build
from tests.server.oidc_issuer import AUDIENCE, LocalIssuer, local_issuer

CLIENT = "pausepoint-console"
SIGN_IN = "/v1/console/sign-in"


@pytest.fixture
def issuer() -> Iterator[LocalIssuer]:
    with local_issuer() as found:
        yield found


def app(issuer: LocalIssuer, *, console: bool = True, **options: Any) -> Any:
    ai = Pausepoint()
    build(app=ai)
    sso = OidcBearer(issuer=issuer.url, audience=AUDIENCE, **options)
    return create_app(ai, auth=FirstOf(BearerTokens({"bot-token": "bot"}), sso), console=console)


def client(served: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=served), base_url="http://test")


async def test_the_console_learns_where_to_sign_in_without_credentials(issuer):
    served = app(issuer, console_client_id=CLIENT, console_provider_name="Acme SSO",
                 console_redirect_uri="https://pp.example.com/console/")  # fmt: skip
    async with client(served) as http:
        reply = await http.get(SIGN_IN)
        document = (await http.get("/openapi.json")).json()
        page = await http.get("/console/")
    assert reply.status_code == 200 and reply.headers["cache-control"] == "no-store"
    assert reply.json() == {
        "provider": {
            "name": "Acme SSO",
            "issuer": issuer.url,
            "authorization_endpoint": issuer.url + "/authorize",
            "token_endpoint": issuer.url + "/token",
            "end_session_endpoint": None,
            "client_id": CLIENT,
            "scopes": ["openid", "profile", "email"],
            "redirect_uri": "https://pp.example.com/console/",
            "audience": [AUDIENCE],
        }
    }
    operation = document["paths"][SIGN_IN]["get"]
    assert operation["security"] == [] and set(operation["responses"]) == {"200", "415", "500", "501", "503"}
    # The console may reach the provider's token endpoint, and nothing else but this server.
    csp = page.headers["content-security-policy"]
    assert csp.endswith(f"; connect-src 'self' {issuer.url}") and "default-src 'self'" in csp


async def test_without_a_console_client_the_console_takes_a_token_as_before(issuer):
    async with client(app(issuer)) as http:
        assert (await http.get(SIGN_IN)).json() == {"provider": None}
        assert "connect-src" not in (await http.get("/console/")).headers["content-security-policy"]
    async with client(app(issuer, console=False, console_client_id=CLIENT)) as http:
        assert (await http.get(SIGN_IN)).status_code == 404  # no console, no sign-in for it
    assert issuer.paths == []  # the provider was never asked


async def test_a_provider_that_cannot_be_reached_is_a_503_naming_it(issuer):
    served = app(issuer, console_client_id=CLIENT)
    issuer.stop()
    async with client(served) as http:
        reply = await http.get(SIGN_IN)
        page = await http.get("/console/")
    assert reply.status_code == 503, reply.text
    error = reply.json()["error"]
    assert error["code"] == "identity_provider_unavailable" and "cannot be reached" in error["message"]
    assert page.status_code == 200  # the console still opens (a token can be pasted)
    assert page.headers["content-security-policy"].endswith(f"connect-src 'self' {issuer.url}")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"console_redirect_uri": "https://pp.example.com/console/"}, "needs console_client_id"),
        ({"console_client_id": CLIENT, "console_redirect_uri": "http://pp.example.com/console/"}, "must use https"),
        ({"console_client_id": CLIENT, "console_redirect_uri": "https://pp.example.com/console/#x"}, "fragment"),
        ({"console_client_id": CLIENT, "console_scopes": ["openid profile"]}, "is not a scope"),
        ({"console_client_id": CLIENT, "console_scopes": []}, "console_scopes"),
        ({"console_client_id": " "}, "printable characters"),
    ],
)
def test_console_settings_that_cannot_work_are_refused(options, message):
    with pytest.raises(DefinitionError, match=message):
        OidcBearer(issuer="https://login.example.com", audience=AUDIENCE, **options)


# -- the code flow, as the console runs it (without a browser) ------------------------------------


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


async def authorize(http: httpx.AsyncClient, issuer: LocalIssuer, redirect: str, **extra: str) -> httpx.Response:
    query = {"response_type": "code", "client_id": CLIENT, "redirect_uri": redirect, "scope": "openid",
             "state": "s-1", "nonce": "n-1", **extra}  # fmt: skip
    return await http.get(issuer.url + "/authorize", params=query)


async def test_a_code_is_exchanged_once_with_its_verifier_for_a_token_the_api_takes(issuer):
    redirect = "https://pp.example.com/console/"
    issuer.register(CLIENT, redirect)
    issuer.person("dana", email="dana@example.com", roles=["treasury"])
    issuer.auto_user = "dana"
    verifier, challenge = pkce()
    served = app(issuer, console_client_id=CLIENT, principal_claim="email")
    async with client(served) as api, httpx.AsyncClient() as http:
        back = await authorize(http, issuer, redirect, code_challenge=challenge, code_challenge_method="S256")
        assert back.status_code == 302
        where = urlsplit(back.headers["location"])
        answer = {k: v[0] for k, v in parse_qs(where.query).items()}
        assert where._replace(query="").geturl() == redirect and answer["state"] == "s-1"
        form = {"grant_type": "authorization_code", "code": answer["code"], "redirect_uri": redirect,
                "client_id": CLIENT, "code_verifier": verifier}  # fmt: skip
        tokens = await http.post(issuer.url + "/token", data=form)
        assert tokens.status_code == 200 and tokens.headers["access-control-allow-origin"] == "*"
        listing = await api.get("/v1/agents", headers={"Authorization": f"Bearer {tokens.json()['access_token']}"})
        assert listing.status_code == 200 and listing.json()["principal"] == "dana@example.com"
        again = await http.post(issuer.url + "/token", data=form)
        assert again.status_code == 400 and again.json()["error"] == "invalid_grant"  # one use

        async def exchanged(**changed: str) -> httpx.Response:
            back = await authorize(http, issuer, redirect, code_challenge=challenge, code_challenge_method="S256")
            code = parse_qs(urlsplit(back.headers["location"]).query)["code"][0]
            return await http.post(issuer.url + "/token", data={**form, "code": code, **changed})

        for changed in ({"code_verifier": pkce()[0]}, {"redirect_uri": redirect + "x"}, {"client_id": "another"}):
            refused = await exchanged(**changed)
            assert refused.status_code == 400 and refused.json()["error"] == "invalid_grant", changed
        # Without PKCE the provider sends the browser back with an error; to a URI it does not know, nowhere.
        plain = await authorize(http, issuer, redirect)
        assert "error=invalid_request" in plain.headers["location"] and "code=" not in plain.headers["location"]
        assert (await authorize(http, issuer, "https://evil.example/", code_challenge=challenge)).status_code == 400
