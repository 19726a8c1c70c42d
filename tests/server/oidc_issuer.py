"""An OpenID Connect provider on loopback, for the single sign-on tests: a real HTTP server
serving its discovery document, its JWKS and a token endpoint, signing with keys made here
(``cryptography``). It counts what it was asked for, and its keys can be rotated.

It signs people in as a browser does it, too (authorization code with PKCE, public clients):
``/authorize`` takes a registered client and redirect URI (``register``) and an S256 code
challenge, and shows a login page listing the people it knows (``person``) — or signs
``auto_user`` in without asking — then sends the browser back with a code; ``/token`` (a form
post, answered with CORS headers) exchanges that code once, for its client and redirect URI,
when the code verifier hashes to the challenge, for an access token (``aud``: ``AUDIENCE``) and
an ID token (``aud``: the client, with the nonce) carrying the person's claims. A JSON post to
``/token`` mints a token for the claims it names (the API tests' shortcut).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import html
import json
import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

AUDIENCE = "pausepoint"


#: what an authorization request carries, kept through the login page
AUTHORIZE = ("response_type", "client_id", "redirect_uri", "scope", "state", "nonce", "code_challenge",
             "code_challenge_method")  # fmt: skip
CODE_SECONDS = 60


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@dataclass(frozen=True)
class Code:
    """An authorization code given and not yet exchanged: what its exchange must match."""

    client_id: str
    redirect_uri: str
    challenge: str
    user: str
    nonce: str | None
    scope: str
    expires: float


class LocalIssuer:
    """The provider. ``url`` is its issuer; ``mint(...)`` signs a token with a published key
    (or any key made here); ``rotate(kid)`` publishes a new key and withdraws the others."""

    def __init__(self) -> None:
        self.keys: dict[str, Any] = {}  # kid -> private key
        self.published: list[str] = []
        self.paths: list[str] = []  # every path asked for, in order
        self.broken_jwks: bytes | None = None  # served instead of the key set, when set
        self.clients: dict[str, set[str]] = {}  # client id -> its registered redirect URIs
        self.people: dict[str, dict[str, Any]] = {}  # who may sign in -> the claims of their tokens
        self.auto_user: str | None = None  # signed in without the login page, when set
        self.token_seconds = 300  # how long the tokens it gives stay valid
        self.opaque_access = False  # give access tokens that are no JWT (the ID token is then the one)
        self.codes: dict[str, Code] = {}
        self.exchanges: list[tuple[int, dict[str, str]]] = []  # each code exchange: (status, form)
        self.lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self.add_key("key-1", publish=True)

    # -- keys --------------------------------------------------------------------------------------

    def add_key(self, kid: str, *, kind: str = "RSA", publish: bool = True) -> Any:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048) if kind == "RSA" else (
            ec.generate_private_key(ec.SECP256R1())
        )  # fmt: skip
        with self.lock:
            self.keys[kid] = key
            if publish:
                self.published.append(kid)
        return key

    def rotate(self, kid: str) -> None:
        """Publish a new key ``kid`` and withdraw every other."""
        self.add_key(kid, publish=False)
        with self.lock:
            self.published = [kid]

    def jwks(self) -> dict[str, Any]:
        with self.lock:
            published = [(kid, self.keys[kid]) for kid in self.published]
        found = []
        for kid, key in published:
            codec = RSAAlgorithm if isinstance(key, rsa.RSAPrivateKey) else ECAlgorithm
            jwk = codec.to_jwk(key.public_key(), as_dict=True)
            found.append({**jwk, "kid": kid, "use": "sig"})
        return {"keys": found}

    def public_pem(self, kid: str = "key-1") -> bytes:
        return (
            self.keys[kid]
            .public_key()
            .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        )

    @property
    def jwks_fetches(self) -> int:
        with self.lock:
            return self.paths.count("/jwks")

    # -- tokens ------------------------------------------------------------------------------------

    def claims(self, sub: str = "alice", **extra: Any) -> dict[str, Any]:
        now = int(time.time())
        return {"iss": self.url, "aud": AUDIENCE, "sub": sub, "iat": now, "exp": now + self.token_seconds, **extra}

    def mint(self, sub: str = "alice", *, kid: str | None = None, alg: str | None = None, **extra: Any) -> str:
        """A token for ``sub`` signed with key ``kid`` (default: the newest published one)."""
        kid = kid or self.published[-1]
        key = self.keys[kid]
        alg = alg or ("RS256" if isinstance(key, rsa.RSAPrivateKey) else "ES256")
        return jwt.encode(self.claims(sub, **extra), key, algorithm=alg, headers={"kid": kid})

    def forge(self, header: dict[str, Any], claims: dict[str, Any], secret: bytes | None) -> str:
        """A token with any header, signed with HMAC-SHA256 keyed by ``secret`` (or unsigned)."""
        signing_input = b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(claims).encode())
        signature = b"" if secret is None else hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
        return signing_input + "." + b64url(signature)

    # -- signing people in (authorization code with PKCE) ---------------------------------------------

    def register(self, client_id: str, redirect_uri: str) -> None:
        """A public client, and a redirect URI it may ask to come back to."""
        with self.lock:
            self.clients.setdefault(client_id, set()).add(redirect_uri)

    def person(self, name: str, **claims: Any) -> None:
        """Someone the login page offers; their tokens carry ``claims`` (``sub`` is ``name``)."""
        with self.lock:
            self.people[name] = claims

    def authorize(self, asked: dict[str, str], user: str | None) -> tuple[int, str]:
        """An authorization request (``asked``): (400, why) when it names no registered client
        and redirect URI (the browser is never sent to one not registered); else (302, where the
        browser goes back to) with a code for ``user`` — or an error when the request is not
        one it takes, or ``user`` is None (the person cancelled)."""
        unknown = self.unknown_client(asked)
        if unknown:
            return 400, unknown
        client, redirect = asked["client_id"], asked["redirect_uri"]
        back: dict[str, str] = {"state": asked["state"]} if "state" in asked else {}
        if asked.get("response_type") != "code":
            back["error"] = "unsupported_response_type"
        elif not asked.get("code_challenge") or asked.get("code_challenge_method") != "S256":
            back.update(error="invalid_request", error_description="PKCE with S256 is required")
        elif user is None or user not in self.people:
            back["error"] = "access_denied"
        else:
            code = secrets.token_urlsafe(24)
            with self.lock:
                self.codes[code] = Code(client, redirect, asked["code_challenge"], user, asked.get("nonce"),
                                        asked.get("scope", ""), time.time() + CODE_SECONDS)  # fmt: skip
            back = {"code": code, **back}
        return 302, redirect + ("&" if "?" in redirect else "?") + urlencode(back)

    def unknown_client(self, asked: dict[str, str]) -> str:
        """Why ``asked`` names no registered client and redirect URI ("" when it does)."""
        client, redirect = asked.get("client_id", ""), asked.get("redirect_uri", "")
        with self.lock:
            known = redirect in self.clients.get(client, set())
        return "" if known else f"unknown client {client!r} or redirect URI {redirect!r}"

    def exchange(self, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        """``/token``'s answer to a code exchange: the tokens, or a 400 with OAuth's error. A code
        is taken by its first exchange, whatever that exchange's outcome."""
        status, answer = self._exchange(form)
        with self.lock:
            self.exchanges.append((status, form))
        return status, answer

    def _exchange(self, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        if form.get("grant_type") != "authorization_code":
            return 400, {"error": "unsupported_grant_type"}
        with self.lock:
            code = self.codes.pop(form.get("code", ""), None)
        if code is None or code.expires < time.time():
            return 400, {"error": "invalid_grant", "error_description": "the code is unknown, used or expired"}
        if form.get("client_id") != code.client_id or form.get("redirect_uri") != code.redirect_uri:
            return 400, {"error": "invalid_grant", "error_description": "another client or redirect URI"}
        verifier = form.get("code_verifier", "")
        if not 43 <= len(verifier) <= 128 or b64url(hashlib.sha256(verifier.encode()).digest()) != code.challenge:
            return 400, {"error": "invalid_grant", "error_description": "the code verifier does not match"}
        claims = dict(self.people[code.user])
        access = secrets.token_urlsafe(32) if self.opaque_access else self.mint(code.user, **claims)
        id_token = self.mint(code.user, **{**claims, "aud": code.client_id, "azp": code.client_id, "nonce": code.nonce})
        return 200, {"access_token": access, "id_token": id_token, "token_type": "Bearer",
                     "expires_in": self.token_seconds, "scope": code.scope}  # fmt: skip

    def login_page(self, asked: dict[str, str]) -> str:
        """The login page: a button for each person it knows, and Cancel."""
        kept = "".join(
            f'<input type="hidden" name="{name}" value="{html.escape(value)}">'
            for name in AUTHORIZE
            if (value := asked.get(name)) is not None
        )
        with self.lock:
            people = list(self.people)
        buttons = "".join(
            f'<button name="user" value="{html.escape(p)}">Sign in as {html.escape(p)}</button>' for p in people
        )
        return (
            '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Local issuer</title></head><body>'
            f'<h1>Sign in to the local issuer</h1><form method="post" action="/authorize">{kept}{buttons}'
            '<button name="cancel" value="yes">Cancel</button></form></body></html>'
        )

    # -- serving -----------------------------------------------------------------------------------

    def start(self) -> LocalIssuer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextlib.contextmanager
def local_issuer() -> Iterator[LocalIssuer]:
    issuer = LocalIssuer().start()
    try:
        yield issuer
    finally:
        issuer.stop()


def _handler(issuer: LocalIssuer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            with issuer.lock:
                issuer.paths.append(self.path)
            path, _, query = self.path.partition("?")
            if path == "/.well-known/openid-configuration":
                self._json(
                    {
                        "issuer": issuer.url,
                        "jwks_uri": issuer.url + "/jwks",
                        "authorization_endpoint": issuer.url + "/authorize",
                        "token_endpoint": issuer.url + "/token",
                        "id_token_signing_alg_values_supported": ["RS256", "ES256"],
                        "code_challenge_methods_supported": ["S256"],
                    }
                )
            elif path == "/jwks" and issuer.broken_jwks is not None:
                self.send_response(200)
                self.send_header("Content-Length", str(len(issuer.broken_jwks)))
                self.end_headers()
                self.wfile.write(issuer.broken_jwks)
            elif path == "/jwks":
                self._json(issuer.jwks())
            elif path == "/authorize":
                asked = dict(parse_qsl(query))
                if issuer.auto_user is not None:
                    self._authorized(*issuer.authorize(asked, issuer.auto_user))
                    return
                unknown = issuer.unknown_client(asked)
                self._page(400, unknown) if unknown else self._page(200, issuer.login_page(asked))
            else:
                self.send_error(404)

        def do_OPTIONS(self) -> None:
            """CORS preflight for ``/token`` (a browser sends none for a plain form post)."""
            self.send_response(204)
            self._cors()
            self.send_header("Access-Control-Allow-Methods", "POST")
            self.send_header("Access-Control-Allow-Headers", "Content-Type, Accept")
            self.end_headers()

        def do_POST(self) -> None:
            """``/authorize``: the login page's form. ``/token``: a code exchange (a form), or a
            token for the claims posted as JSON (``sub``, ``roles``, ...)."""
            with issuer.lock:
                issuer.paths.append(self.path)
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path == "/authorize":
                form = dict(parse_qsl(body.decode()))
                user = None if form.get("cancel") else form.get("user", "")
                self._authorized(*issuer.authorize(form, user))
            elif self.path == "/token" and self.headers.get("Content-Type", "").startswith("application/json"):
                token = issuer.mint(**json.loads(body))
                self._json({"access_token": token, "token_type": "Bearer", "expires_in": issuer.token_seconds})
            elif self.path == "/token":
                self._json(*reversed(issuer.exchange(dict(parse_qsl(body.decode())))), cors=True)
            else:
                self.send_error(404)

        def _authorized(self, status: int, where: str) -> None:
            if status != 302:
                self._page(status, where)
                return
            assert urlsplit(where).scheme in ("http", "https")
            self.send_response(302)
            self.send_header("Location", where)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _page(self, status: int, text: str) -> None:
            body = (text if text.startswith("<!doctype") else f"<!doctype html><p>{html.escape(text)}</p>").encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _cors(self) -> None:
            self.send_header("Access-Control-Allow-Origin", "*")
            self.send_header("Cache-Control", "no-store")

        def _json(self, value: Any, status: int = 200, *, cors: bool = False) -> None:
            body = json.dumps(value).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            if cors:
                self._cors()
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler
