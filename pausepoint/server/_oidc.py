"""Single sign-on for the API: bearer JWTs from an OpenID Connect provider (``OidcBearer``).

A request's ``Authorization: Bearer <jwt>`` is checked with PyJWT (``pausepoint[sso]``):

- the header's ``alg`` must be one of ``algorithms`` — asymmetric ones only, so never ``none``
  and never an HMAC keyed with a public key — and fit the key's type;
- the key is the issuer's, found by the header's ``kid`` in its JWKS, whose address comes from
  the issuer's ``/.well-known/openid-configuration`` (or ``jwks_uri``). The key set is kept for
  ``jwks_cache_seconds``; a ``kid`` it does not hold fetches it again, at most once per
  ``jwks_cooldown_seconds`` (PyJWT's ``PyJWKClient``), so a rotated key is found at once and a
  flood of made-up ``kid``s costs the provider nothing;
- the signature, then ``iss`` (exactly ``issuer``), ``aud`` (one of ``audience``), ``exp`` (all
  three required) and ``nbf`` / ``iat`` when present, with ``leeway_seconds`` of clock skew.

Claims map to an ``Identity``: the principal (``principal_claim``, default ``sub``), its roles
(``roles_claim``: a list of names, or one space-separated string) and its tenant
(``tenant_claim``: the sessions its holder creates are that tenant's, and the access policy
confines them to that tenant's; a token without the claim is of no tenant). Claim names may be
dotted paths into nested objects (Keycloak's ``realm_access.roles``).

A refused token raises ``Unauthenticated`` (401, ``WWW-Authenticate: Bearer``) saying why —
expired, not yet valid, another audience or issuer, an algorithm not allowed, an unknown key, a
signature that does not verify — and so does a provider that cannot be reached (logged), never a
500. A credential that is no JWT at all is not this authenticator's: it returns None, so
``FirstOf(BearerTokens(...), OidcBearer(...))`` serves both kinds.

The console signs people in through the provider (authorization code with PKCE, a public
client: no secret in the browser) when ``console_client_id`` is set: ``sign_in_settings()``
gives what the browser needs (the provider's endpoints from discovery, the client id, the
scopes, the redirect URI and the audience), served at ``GET /v1/console/sign-in``.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from starlette.requests import Request

from .._extras import missing_extra
from ..errors import DefinitionError, IdentityProviderUnavailable, Unauthenticated
from ._auth import Identity, is_principal_name, is_tenant_name

if TYPE_CHECKING:
    from jwt import PyJWK, PyJWKClient

__all__ = ["ALGORITHMS", "OidcBearer", "OidcSettings"]

log = logging.getLogger("pausepoint.server.auth")

#: The signature algorithms a provider may sign with: asymmetric only (a public key can
#: never be used as an HMAC secret, and ``none`` is no signature).
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
_KEY_TYPES = {"RS": "RSA", "PS": "RSA", "ES": "EC", "Ed": "OKP"}  # the JWK "kty" each family's keys have
_DISCOVERY = "/.well-known/openid-configuration"
_CLAIM = re.compile(r"[^.\s]+(\.[^.\s]+)*")
_UNREACHABLE = "the identity provider cannot be reached to check the token; try again later"
_SCOPE = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")  # RFC 6749's scope-token


def _http_url(value: str, what: str) -> str:
    """``value`` if it is an https URL, or an http one on this machine (a local provider)."""
    parts = urlsplit(value)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ValueError(f"{what} must be an https URL, not {value!r}")
    if parts.scheme == "http" and not _loopback(parts.hostname):
        raise ValueError(f"{what} must use https (http only on this machine: 127.0.0.1, ::1, localhost)")
    return value


def _public(value: str, what: str) -> str:
    """``value`` unless it holds a user name or password (never shown: a credential); the
    provider's discovery document and keys are public."""
    if re.match(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*@", value):
        raise ValueError(f"{what} holds a user name or password: the provider's addresses are public, give it without")
    return value


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class OidcSettings(BaseModel):
    """How ``OidcBearer`` checks tokens. ``issuer`` is the provider's issuer URL exactly as its
    tokens say it; ``audience`` what tokens for this server carry in ``aud`` (one or several)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    issuer: str
    audience: str | list[str]
    algorithms: list[str] = Field(default_factory=lambda: ["RS256"], min_length=1)
    leeway_seconds: float = Field(default=30.0, ge=0, le=300)
    principal_claim: str = "sub"
    roles_claim: str | None = "roles"
    tenant_claim: str | None = "tenant"
    jwks_uri: str | None = None
    jwks_cache_seconds: float = Field(default=300.0, gt=0)
    jwks_cooldown_seconds: float = Field(default=30.0, ge=0)
    timeout_seconds: float = Field(default=10.0, gt=0, le=120)
    console_client_id: str | None = None
    console_scopes: list[str] = Field(default_factory=lambda: ["openid", "profile", "email"], min_length=1)
    console_redirect_uri: str | None = None
    console_provider_name: str | None = None

    @field_validator("issuer")
    @classmethod
    def _issuer(cls, value: str) -> str:
        return _http_url(_public(value, "issuer"), "issuer")

    @field_validator("jwks_uri")
    @classmethod
    def _jwks_uri(cls, value: str | None) -> str | None:
        return None if value is None else _http_url(_public(value, "jwks_uri"), "jwks_uri")

    @field_validator("audience")
    @classmethod
    def _audience(cls, value: str | list[str]) -> str | list[str]:
        if not value or (isinstance(value, list) and not all(value)):
            raise ValueError("audience names what tokens for this server carry in 'aud': not empty")
        return value

    @field_validator("algorithms")
    @classmethod
    def _algorithms(cls, value: list[str]) -> list[str]:
        for name in value:
            if name not in ALGORITHMS:
                why = (
                    "is no signature"
                    if name.lower() == "none"
                    else "is keyed with a shared secret, and a provider's keys are public"
                    if name.upper().startswith("HS")
                    else "is not a signature algorithm PyJWT checks"
                )
                raise ValueError(f"{name!r} {why}: use some of {', '.join(ALGORITHMS)}")
        return value

    @field_validator("console_client_id", "console_provider_name")
    @classmethod
    def _console_name(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or len(value) > 256 or not value.isprintable()):
            raise ValueError(f"1 to 256 printable characters, not {value[:40]!r}")
        return value

    @field_validator("console_scopes")
    @classmethod
    def _scopes(cls, value: list[str]) -> list[str]:
        for scope in value:
            if not _SCOPE.fullmatch(scope):
                raise ValueError(f"{scope[:40]!r} is not a scope (printable ASCII, no spaces, quotes or backslashes)")
        return value

    @field_validator("console_redirect_uri")
    @classmethod
    def _redirect_uri(cls, value: str | None) -> str | None:
        if value is not None and "#" in value:
            raise ValueError("console_redirect_uri is the console's address, without a fragment ('#')")
        return None if value is None else _http_url(value, "console_redirect_uri")

    @model_validator(mode="after")
    def _console(self) -> OidcSettings:
        if self.console_client_id is None:
            given = [k for k in ("console_redirect_uri", "console_provider_name") if getattr(self, k) is not None]
            if given:
                raise ValueError(f"{', '.join(given)} needs console_client_id: the client the console signs in as")
        return self

    @field_validator("principal_claim", "roles_claim", "tenant_claim")
    @classmethod
    def _claim(cls, value: str | None) -> str | None:
        if value is not None and not _CLAIM.fullmatch(value):
            raise ValueError(f"a claim name, or a dotted path to one (realm_access.roles), not {value!r}")
        return value


class OidcBearer:
    """An ``Authenticator``: ``Authorization: Bearer <jwt>`` issued by an OpenID Connect
    provider, checked against its published keys (see the module's docstring for the rules).

    ``OidcBearer(issuer="https://login.example.com", audience="pausepoint")``, or an
    ``OidcSettings``. Raises ``DefinitionError`` for settings that cannot work, and an
    ``ImportError`` naming the ``sso`` extra without PyJWT.
    """

    def __init__(self, settings: OidcSettings | None = None, /, **options: Any) -> None:
        try:
            import jwt  # noqa: F401
        except ImportError as exc:
            raise missing_extra("PyJWT", "sso") from exc
        if settings is None:
            try:
                settings = OidcSettings(**options)
            except ValidationError as exc:
                raise DefinitionError(f"OidcBearer: {exc}") from None
        elif options:
            raise DefinitionError("OidcBearer takes OidcSettings or keyword options, not both")
        self.settings = settings
        self._keys = _IssuerKeys(settings)

    def __repr__(self) -> str:
        return f"OidcBearer(issuer={self.settings.issuer!r}, audience={self.settings.audience!r})"

    async def __call__(self, request: Request) -> Identity | None:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or token.count(".") != 2:
            return None  # no JWT: another authenticator's credential, or none
        return await self.identify(token)

    async def identify(self, token: str) -> Identity:
        """The identity ``token`` proves. Raises ``Unauthenticated`` saying why it does not."""
        import jwt

        try:
            header = jwt.get_unverified_header(token)
        except jwt.DecodeError:
            raise Unauthenticated("the bearer token is not a well-formed JWT") from None
        except jwt.PyJWTError as exc:  # well-formed, and refused for what its header says (e.g. crit)
            raise Unauthenticated(f"the bearer token's header is refused: {exc}") from None
        alg, kid = header.get("alg"), header.get("kid")
        if alg not in self.settings.algorithms:
            shown = alg[:20] if isinstance(alg, str) else alg
            allowed = ", ".join(self.settings.algorithms)
            raise Unauthenticated(f"the token's algorithm {shown!r} is not allowed (this server takes {allowed})")
        if not isinstance(kid, str) or not kid:
            raise Unauthenticated("the token names no key ('kid' in its header)")
        key = await self._keys.find(kid)
        if key is None:
            raise Unauthenticated(f"the token's key {kid[:64]!r} is not one the issuer publishes")
        if key.key_type != _KEY_TYPES[alg[:2]]:
            raise Unauthenticated(f"the token's key {kid[:64]!r} is a {key.key_type} key, which does not sign {alg}")
        return self._identity(self._claims(token, key, alg))

    def _claims(self, token: str, key: PyJWK, alg: str) -> dict[str, Any]:
        import jwt

        settings = self.settings
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key=key.key,
                algorithms=[alg],
                audience=settings.audience,
                issuer=settings.issuer,
                leeway=settings.leeway_seconds,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise Unauthenticated("the token expired") from None
        except jwt.ImmatureSignatureError:
            raise Unauthenticated("the token is not valid yet (nbf or iat in the future)") from None
        except jwt.InvalidAudienceError:
            raise Unauthenticated("the token is meant for another audience than this server") from None
        except jwt.InvalidIssuerError:
            raise Unauthenticated("the token was issued by another issuer than this server trusts") from None
        except jwt.InvalidSignatureError:
            raise Unauthenticated("the token's signature does not verify") from None
        except jwt.MissingRequiredClaimError as exc:
            raise Unauthenticated(f"the token lacks the {exc.claim!r} claim") from None
        except jwt.exceptions.InvalidSubjectError:
            raise Unauthenticated("the token's 'sub' claim is not a string") from None
        except jwt.PyJWTError as exc:  # what is wrong, in the library's words (never the token)
            raise Unauthenticated(f"the token is not valid: {str(exc) or type(exc).__name__}") from None
        return claims

    def _identity(self, claims: Mapping[str, Any]) -> Identity:
        settings = self.settings
        principal = _claim(claims, settings.principal_claim)
        if not is_principal_name(principal):  # the name rule of the config file's principals
            raise Unauthenticated(f"the token's {settings.principal_claim!r} claim names no principal")
        roles = _claim(claims, settings.roles_claim) if settings.roles_claim else None
        if isinstance(roles, str):
            roles = roles.split()
        if roles is None:
            roles = []
        if not isinstance(roles, list) or not all(isinstance(r, str) and r for r in roles):
            raise Unauthenticated(f"the token's {settings.roles_claim!r} claim is not a list of role names")
        tenant = _claim(claims, settings.tenant_claim) if settings.tenant_claim else None
        if tenant is not None and not is_tenant_name(tenant):
            raise Unauthenticated(f"the token's {settings.tenant_claim!r} claim names no tenant")
        return Identity(principal, frozenset(roles), tenant, dict(claims))

    async def sign_in_settings(self) -> dict[str, Any] | None:
        """What the console needs to sign people in through the provider (authorization code
        with PKCE), as ``GET /v1/console/sign-in`` serves it: the provider's ``name`` (for "Sign
        in with ..."), the ``issuer``, its ``authorization_endpoint``, ``token_endpoint`` and
        ``end_session_endpoint`` (None if it has none) from discovery, the console's public
        ``client_id``, the ``scopes``, the ``redirect_uri`` (None: the console's own address)
        and the ``audience`` (a list: the console uses the token whose ``aud`` holds one of
        them). None when no ``console_client_id`` is set. Raises
        ``IdentityProviderUnavailable`` while the provider cannot be reached, or when its
        discovery document lacks the two endpoints."""
        settings = self.settings
        if settings.console_client_id is None:
            return None
        try:
            found = await self._keys.discovery()
        except Unauthenticated:
            raise IdentityProviderUnavailable(
                "the identity provider cannot be reached to sign in; try again later"
            ) from None
        endpoints = {name: found.get(name) for name in ("authorization_endpoint", "token_endpoint")}
        for name, value in endpoints.items():
            try:
                _http_url(value if isinstance(value, str) else "", name)
            except ValueError:
                log.warning("the identity provider's discovery document has no usable %s: %r", name, value)
                raise IdentityProviderUnavailable(
                    f"the identity provider's discovery document has no usable {name}"
                ) from None
        end_session = found.get("end_session_endpoint")
        try:
            end_session = _http_url(end_session, "end_session_endpoint") if isinstance(end_session, str) else None
        except ValueError:
            end_session = None
        audience = settings.audience
        return {
            "name": settings.console_provider_name or urlsplit(settings.issuer).hostname,
            "issuer": settings.issuer,
            **endpoints,
            "end_session_endpoint": end_session,
            "client_id": settings.console_client_id,
            "scopes": list(settings.console_scopes),
            "redirect_uri": settings.console_redirect_uri,
            "audience": [audience] if isinstance(audience, str) else list(audience),
        }


def _claim(claims: Mapping[str, Any], path: str) -> Any:
    """The claim at ``path``: a top-level name, or a dotted path into nested objects (a name
    that itself holds dots, as namespaced claims do, is looked up whole first)."""
    if path in claims:
        return claims[path]
    value: Any = claims
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


class _IssuerKeys:
    """The issuer's signing keys: its discovery document read once, then its JWKS through
    PyJWT's ``PyJWKClient`` (its set cached for ``jwks_cache_seconds``; an unknown ``kid``
    fetches it again at most once per ``jwks_cooldown_seconds``).

    ``PyJWKClient`` reads with ``urllib`` (blocking): a lookup the cache answers runs here on the
    event loop, a fetch in a worker thread, one at a time."""

    def __init__(self, settings: OidcSettings) -> None:
        self._settings = settings
        self._client: PyJWKClient | None = None
        self._discovered: dict[str, Any] | None = None
        self._lock = asyncio.Lock()
        self._retry_at = 0.0  # when a failed discovery may be tried again (loop time)

    async def find(self, kid: str) -> PyJWK | None:
        """The issuer's signing key ``kid``, or None when it publishes no such key."""
        import jwt

        client = self._client or await self._connect()
        cached = _cached(client, kid)
        if cached is not None:
            return cached
        async with self._lock:  # one fetch at a time; those waiting find its result in the cache
            cached = _cached(client, kid)
            if cached is not None:
                return cached
            loop = asyncio.get_running_loop()
            if loop.time() < self._retry_at:  # the last fetch failed: the provider is not asked again yet
                raise Unauthenticated(_UNREACHABLE)
            try:
                return await asyncio.to_thread(client.get_signing_key, kid)
            except Exception as exc:
                at_hand = client.jwk_set_cache is not None and client.jwk_set_cache.get() is not None
                # A key set at hand that lacks kid says it is no key of the issuer's — unless the
                # provider could not be reached to read a newer one (a key just rotated in).
                unreached = isinstance(exc, jwt.PyJWKClientConnectionError)
                if at_hand and isinstance(exc, jwt.PyJWTError) and not unreached:
                    return None  # (fetching again may be cooling down)
                self._retry_at = loop.time() + max(self._settings.jwks_cooldown_seconds, 1.0)
                log.warning("the identity provider's keys could not be read from %s: %s", client.uri, exc)
                raise Unauthenticated(_UNREACHABLE) from None

    async def discovery(self) -> dict[str, Any]:
        """The issuer's discovery document (read once)."""
        if self._discovered is None:
            async with self._lock:
                if self._discovered is None:
                    self._discovered = await self._discover()
        return self._discovered

    async def _connect(self) -> PyJWKClient:
        from jwt import PyJWKClient

        settings = self._settings
        jwks_uri = settings.jwks_uri or (await self.discovery())["jwks_uri"]
        async with self._lock:
            if self._client is None:
                self._client = PyJWKClient(
                    jwks_uri,
                    cache_jwk_set=True,
                    lifespan=settings.jwks_cache_seconds,
                    timeout=settings.timeout_seconds,
                    cooldown_duration=settings.jwks_cooldown_seconds,
                )
            return self._client

    async def _discover(self) -> dict[str, Any]:
        settings = self._settings
        loop = asyncio.get_running_loop()
        if loop.time() < self._retry_at:
            raise Unauthenticated(_UNREACHABLE)
        url = settings.issuer.rstrip("/") + _DISCOVERY
        try:
            async with httpx.AsyncClient(timeout=settings.timeout_seconds, follow_redirects=False) as http:
                reply = await http.get(url, headers={"Accept": "application/json"})
            reply.raise_for_status()
            document: dict[str, Any] = _check_discovery(reply.json(), settings.issuer)
        except (httpx.HTTPError, ValueError) as exc:
            self._retry_at = loop.time() + max(settings.jwks_cooldown_seconds, 1.0)
            log.warning("the identity provider's discovery document %s could not be used: %s", url, exc)
            raise Unauthenticated(_UNREACHABLE) from None
        return document


def _check_discovery(document: Any, issuer: str) -> dict[str, Any]:
    """``document``, if it is the discovery document of ``issuer``; ``ValueError`` if not."""
    if not isinstance(document, dict):
        raise ValueError("the discovery document is not a JSON object")
    if document.get("issuer") != issuer:
        raise ValueError(f"the discovery document names the issuer {document.get('issuer')!r}, not {issuer!r}")
    jwks_uri = document.get("jwks_uri")
    if not isinstance(jwks_uri, str):
        raise ValueError("the discovery document has no jwks_uri")
    _http_url(jwks_uri, "jwks_uri")
    return document


def _cached(client: PyJWKClient, kid: str) -> PyJWK | None:
    """``kid`` in the key set ``client`` holds now (None if it holds none, or it is stale)."""
    held = client.jwk_set_cache.get() if client.jwk_set_cache is not None else None
    if held is None:
        return None
    for key in held.keys:
        if key.key_id == kid and key.public_key_use in ("sig", None):
            return key
    return None
