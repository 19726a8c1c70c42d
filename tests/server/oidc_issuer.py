"""An OpenID Connect provider on loopback, for the single sign-on tests: a real HTTP server
serving its discovery document, its JWKS and a token endpoint, signing with keys made here
(``cryptography``). It counts what it was asked for, and its keys can be rotated."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

AUDIENCE = "pausepoint"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class LocalIssuer:
    """The provider. ``url`` is its issuer; ``mint(...)`` signs a token with a published key
    (or any key made here); ``rotate(kid)`` publishes a new key and withdraws the others."""

    def __init__(self) -> None:
        self.keys: dict[str, Any] = {}  # kid -> private key
        self.published: list[str] = []
        self.paths: list[str] = []  # every path asked for, in order
        self.broken_jwks: bytes | None = None  # served instead of the key set, when set
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
        return {"iss": self.url, "aud": AUDIENCE, "sub": sub, "iat": now, "exp": now + 300, **extra}

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
            if self.path == "/.well-known/openid-configuration":
                self._json(
                    {
                        "issuer": issuer.url,
                        "jwks_uri": issuer.url + "/jwks",
                        "authorization_endpoint": issuer.url + "/authorize",
                        "token_endpoint": issuer.url + "/token",
                        "id_token_signing_alg_values_supported": ["RS256", "ES256"],
                    }
                )
            elif self.path == "/jwks" and issuer.broken_jwks is not None:
                self.send_response(200)
                self.send_header("Content-Length", str(len(issuer.broken_jwks)))
                self.end_headers()
                self.wfile.write(issuer.broken_jwks)
            elif self.path == "/jwks":
                self._json(issuer.jwks())
            else:
                self.send_error(404)

        def do_POST(self) -> None:
            """``/token``: a token for the claims posted as JSON (``sub``, ``roles``, ...)."""
            with issuer.lock:
                issuer.paths.append(self.path)
            if self.path != "/token":
                self.send_error(404)
                return
            asked = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            token = issuer.mint(**asked)
            self._json({"access_token": token, "token_type": "Bearer", "expires_in": 300})

        def _json(self, value: Any) -> None:
            body = json.dumps(value).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler
