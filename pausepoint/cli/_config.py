"""The schema of ``pausepoint serve``'s configuration file (TOML; docs/config.md documents
every key, and examples/pausepoint.toml is a team's file).

Each section is a pydantic model that refuses keys it does not know. Secrets are never written
in the file: a key ending in ``_env`` names the environment variable holding one (``token_env =
"ALICE_TOKEN"``), and a secret written in the file (``token = "..."``) is refused, saying so.
Validation reads the environment (``context={"env": ...}``): a variable named but not set is
an error at its key, and so is a secret that could not work as it is (white space at either
end, a control character: ``webhooks.value_problem``), named by its variable, never shown.

The single sign-on section is the server's own ``OidcSettings`` (``pausepoint.server``), with
the approver roles added: the server checks tokens with exactly the settings validated here.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    TypeAdapter,
    ValidationInfo,
    field_validator,
)

from ..server._auth import is_principal_name, is_tenant_name
from ..server._limits import Limits
from ..server._oidc import OidcSettings
from ..server._retention import MAX_KEEP
from ..stores._url import schema_problem
from ..webhooks import EVENT_KINDS, header_name_problem, value_problem
from ._logging import LEVELS
from ._store_url import synchronous_level

__all__ = [
    "NAME_RULE",
    "Auth",
    "ConfigFile",
    "Delivery",
    "Email",
    "Expiry",
    "LimitsSection",
    "Listen",
    "Links",
    "Log",
    "MetricsSection",
    "Notifiers",
    "Oidc",
    "Principal",
    "Server",
    "Slack",
    "Store",
    "Tenant",
    "TenantPrincipal",
    "Tracing",
    "WebhookSection",
    "name_problem",
]

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TARGET = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")
# Request headers that carry credentials: their values go in headers_env, never in the file.
_SECRET_HEADERS = {"authorization", "proxy-authorization", "cookie", "x-api-key", "api-key"}


def _env_is_set(name: str, info: ValidationInfo) -> str:
    if not _ENV_NAME.fullmatch(name):
        raise ValueError(f"{name!r} is not the name of an environment variable (letters, digits and _)")
    env: Mapping[str, str] | None = (info.context or {}).get("env")
    if env is not None and not env.get(name):
        raise ValueError(f"the environment variable {name} is not set (or is empty)")
    return name


#: the name of an environment variable that holds a secret, and is set
EnvName = Annotated[str, AfterValidator(_env_is_set)]


def _works_as_it_is(fails: str, *, ascii_only: bool) -> AfterValidator:
    """Refuses a variable whose secret would not work as it is (``value_problem``: white space
    at either end, as a secret file's last line break, a control character...), saying what
    would ``fail``, never showing it. Served, it would fail every time, and the error of a
    request carrying it could show it in a log line."""

    def check(name: str, info: ValidationInfo) -> str:
        env: Mapping[str, str] | None = (info.context or {}).get("env")
        value = env.get(name) if env is not None else None
        why = value_problem(value, ascii_only=ascii_only) if value else None
        if why is not None:
            raise ValueError(f"${name} {why}: {fails} (what it holds is a secret: not shown)")
        return name

    return AfterValidator(check)


#: a variable holding a header's value (a credential a request carries)
HeaderEnv = Annotated[EnvName, _works_as_it_is("no request could carry it as it is", ascii_only=True)]
#: a variable holding a key that signs or checks signatures (a webhook's, the links', Slack's)
SigningEnv = Annotated[EnvName, _works_as_it_is("signatures would never match the real key's", ascii_only=False)]
#: a variable holding a password (SMTP's login takes ASCII only)
PasswordEnv = Annotated[EnvName, _works_as_it_is("the server would never take it", ascii_only=True)]


def _usable_schema(name: str | None) -> str | None:
    """A PostgreSQL schema's name the store can take (``stores._url.schema_problem``)."""
    if name is not None and (problem := schema_problem(name)) is not None:
        raise ValueError(problem)
    return name


def _secret_here(use: str) -> BeforeValidator:
    """Refuses a key that would hold a secret in the file, pointing at ``use``."""

    def refuse(_value: Any) -> None:
        raise ValueError(
            f"a secret is never written in the file: put it in an environment variable and name the variable "
            f'with {use} = "..."'
        )

    return BeforeValidator(refuse)


# Keys that would hold a secret (given: refused, naming the key to use instead).
TokenHere = Annotated[None, _secret_here("token_env")]
SecretHere = Annotated[None, _secret_here("secret_env")]
SigningSecretHere = Annotated[None, _secret_here("signing_secret_env")]
PasswordHere = Annotated[None, _secret_here("password_env")]


#: what a principal's (or a role's) name may be
NAME_RULE = "1 to 128 printable characters, not starting or ending in a space"


def name_problem(value: str) -> str | None:
    """What is wrong with ``value`` as a name (a principal's, a role's), in words; None: nothing.
    The file's keys and the flags that name a principal (``--token NAME=...``) say the same."""
    return None if is_principal_name(value) else f"{value!r} is not a name: {NAME_RULE}"


def _name(value: str) -> str:
    problem = name_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


Name = Annotated[str, AfterValidator(_name)]


def _tenant_name(value: str) -> str:
    if not is_tenant_name(value):
        raise ValueError(
            f"{value!r} is not a tenant's name: 1 to 128 printable characters, no '/' (it joins a tenant to "
            "a principal's name: acme/alice), not starting or ending in a space"
        )
    return value


TenantName = Annotated[str, AfterValidator(_tenant_name)]

#: the tenant label the metrics give every tenant the file does not name (``PrometheusMetrics``)
OTHER_TENANT = "other"


def _declared_tenant(value: str) -> str:
    if value == OTHER_TENANT:
        raise ValueError(
            f"{OTHER_TENANT!r} is what the metrics call every tenant the file does not name: this tenant's "
            "pauses would be counted with theirs; give it another name"
        )
    return value


#: the name of a tenant ``[tenants.TENANT]`` declares
DeclaredTenantName = Annotated[TenantName, AfterValidator(_declared_tenant)]


def _hears_some(value: list[str], info: ValidationInfo) -> list[str]:
    """A webhook's (or a notifier's) ``agents`` or ``tenants``: an empty list would hear nothing, ever."""
    if not value:
        every = "every agent's sessions" if info.field_name == "agents" else "the sessions of every tenant and of none"
        raise ValueError(f"an empty list: it would hear no session, ever; leave {info.field_name} out for {every}")
    return value


#: a webhook's (or a notifier's) agents or tenants: some, or None (all)
Agents = Annotated[list[str], AfterValidator(_hears_some)]
Tenants = Annotated[list[TenantName], AfterValidator(_hears_some)]

#: seconds a config gives: a finite number above 0, at most a day
Seconds = Annotated[float, Field(gt=0, le=86_400, allow_inf_nan=False)]
#: seconds to wait, 0 for none: at most a day
Wait = Annotated[float, Field(ge=0, le=86_400, allow_inf_nan=False)]
#: how often a loop looks again: from a hundredth of a second to a day
Interval = Annotated[float, Field(ge=0.01, le=86_400, allow_inf_nan=False)]


def _no_password(url: str, instead: str) -> str:
    """``url``, unless it holds a password (a secret written in the file); ``instead`` says what to do."""
    if urlsplit(url).password is not None:
        raise ValueError(f"this URL holds a password, a secret: {instead}")
    return url


_IN_ENV = "give the whole URL in an environment variable (url_env)"
_USERINFO = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*@")


def _one_or_list(one: Any, several: Any, what: str) -> PlainValidator:
    """A key that takes one value or a list of them, checked as the one given: a problem is
    named at the key, or at the list's element (as a union, it would be named at pydantic's
    names for each kind it tried too)."""
    single, listed = TypeAdapter(one), TypeAdapter(several)

    def check(value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, str):
            return single.validate_python(value, strict=True, context=info.context)
        if isinstance(value, list):
            return listed.validate_python(value, strict=True, context=info.context)
        raise ValueError(f"{what}, or a list of them")

    return PlainValidator(check)


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, populate_by_name=True)


# A host name as RFC 1123 writes one (labels of letters, digits and inner hyphens), or an address.
_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST_NAME = re.compile(rf"(?=.{{1,253}}$){_LABEL}(\.{_LABEL})*\.?")


def _host(value: str) -> str:
    """``value`` if it reads as a host name or an IP address (what ``serve`` then resolves)."""
    try:
        ipaddress.ip_address(value)
    except ValueError:
        if not _HOST_NAME.fullmatch(value):
            raise ValueError(f"{value!r} is no host name or IP address") from None
    return value


class Listen(Section):
    """``[listen]``: where ``serve`` listens (``--host``, ``--port``)."""

    host: Annotated[str, Field(min_length=1), AfterValidator(_host)] = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65535)] = 8000


class Server(Section):
    """``[server]``: what the app serves besides the API (``--no-console``, ``--mcp``)."""

    console: bool = True
    mcp: bool = False


class Store(Section):
    """``[store]``: every agent's store (``--store``): ``url`` or ``url_env``, and the backend's
    options."""

    url: str | None = None
    url_env: EnvName | None = None
    schema_: Annotated[str | None, Field(alias="schema", min_length=1), AfterValidator(_usable_schema)] = None
    prefix: Annotated[str | None, Field(min_length=1)] = None
    synchronous: Annotated[Literal["FULL", "NORMAL"] | None, BeforeValidator(synchronous_level)] = None

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return None if value is None else _no_password(value, _IN_ENV)


class Principal(Section):
    """``[principals.NAME]``: someone who signs in, and what they may do."""

    token_env: EnvName | None = None
    token: TokenHere = None
    roles: list[Name] = Field(default_factory=list)
    approver: bool = False  # after roles: its check reads them
    operator: bool = False

    @field_validator("approver")
    @classmethod
    def _approver(cls, value: bool, info: ValidationInfo) -> bool:
        if not value and info.data.get("roles"):
            raise ValueError("roles make their holder an approver: drop approver = false (or the roles)")
        return value

    @property
    def is_approver(self) -> bool:
        """As ``--approver``: named one, or holding a role of the agents' approval policies."""
        return self.approver or bool(self.roles)


class TenantPrincipal(Principal):
    """``[tenants.TENANT.principals.NAME]``: someone of the tenant, as ``[principals.NAME]``
    says, but an operator (operators span tenants: they are declared in ``[principals]``)."""

    @field_validator("operator")
    @classmethod
    def _operator(cls, value: bool) -> bool:
        if value:
            raise ValueError("an operator spans tenants: declare it in [principals], not in a tenant")
        return value


class Tenant(Section):
    """``[tenants.TENANT]``: a tenant the server knows by name — its principals (with their
    approver rights and roles, which hold in its sessions only)."""

    principals: dict[Name, TenantPrincipal] = Field(default_factory=dict)


class Oidc(OidcSettings):
    """``[auth.oidc]``: single sign-on (``pausepoint.server.OidcSettings``), and the token roles
    that make their holder an approver."""

    audience: Annotated[str | list[str], _one_or_list(str, list[str], "a name")]
    approver_roles: list[Name] = Field(default_factory=list)

    def server_settings(self) -> OidcSettings:
        return OidcSettings(**self.model_dump(exclude={"approver_roles"}))


class Auth(Section):
    """``[auth]``: how people sign in besides the principals' tokens."""

    oidc: Oidc | None = None


EventKindName = Literal[EVENT_KINDS]  # type: ignore[valid-type]


class WebhookSection(Section):
    """``[[webhooks]]``: one ``pausepoint.webhooks.Webhook``."""

    name: str
    url: str | None = None
    url_env: EnvName | None = None
    secret_env: SigningEnv | None = None
    secret: SecretHere = None
    events: Annotated[list[EventKindName], Field(min_length=1)] | None = None
    agents: Agents | None = None
    tenants: Tenants | None = None
    format: Literal["json", "slack"] = "json"
    timeout_seconds: Seconds = 10.0
    max_attempts: Annotated[int, Field(ge=1)] = 10
    backoff_seconds: Wait = 2.0
    max_backoff_seconds: Wait = 600.0
    headers: dict[str, str] = Field(default_factory=dict)
    headers_env: dict[str, HeaderEnv] = Field(default_factory=dict)

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if (urlsplit(value).hostname or "").lower() == "hooks.slack.com":
            raise ValueError("a Slack incoming-webhook URL is a secret (anyone holding it posts): use url_env")
        return _no_password(value, _IN_ENV)

    @field_validator("headers", "headers_env")
    @classmethod
    def _headers(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        """Headers a request can carry, as ``Webhook`` takes them (``headers``: no credential)."""
        for name, given in value.items():
            problem = header_name_problem(name)
            if problem is not None:
                raise ValueError(problem)
            if info.field_name == "headers_env":
                continue
            if name.lower() in _SECRET_HEADERS:
                raise ValueError(f"the {name} header carries a credential: give it in headers_env")
            why = value_problem(given)
            if why is not None:
                raise ValueError(f"the value of the {name} header {why}: no request could carry it as it is")
        return value


class Delivery(Section):
    """``[delivery]``: this process's webhook sender (``WebhookSender``)."""

    enabled: bool = True
    lease_seconds: Annotated[float, Field(ge=0.01, le=86_400, allow_inf_nan=False)] = 60.0
    batch: Annotated[int, Field(ge=1, le=1000)] = 20
    interval_seconds: Interval = 5.0


class Tracing(Section):
    """``[tracing]``: spans sent to an OpenTelemetry collector over OTLP."""

    exporter: Literal["otlp"] = "otlp"
    endpoint: str | None = None
    protocol: Literal["http/protobuf", "grpc"] = "http/protobuf"
    headers_env: dict[str, HeaderEnv] = Field(default_factory=dict)
    service_name: Annotated[str, Field(min_length=1)] = "pausepoint"
    sample_ratio: Annotated[float, Field(ge=0, le=1)] = 1.0
    capture_content: bool = False
    timeout_seconds: Seconds = 10.0

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, value: str | None) -> str | None:
        if value is not None and urlsplit(value).scheme not in ("http", "https"):
            raise ValueError("the collector's URL: http(s)://host:port")
        credential = "send the credential in a header instead, its value in an environment variable (headers_env)"
        return None if value is None else _no_password(value, credential)


class MetricsSection(Section):
    """``[metrics]``: Prometheus metrics at ``/metrics`` (``--metrics``)."""

    enabled: bool = False


class Log(Section):
    """``[log]``: what is logged, and how (``--log-level``, ``--log-format``)."""

    level: Literal[LEVELS] = "info"  # type: ignore[valid-type]
    format: Literal["text", "json"] = "text"
    requests: bool = True


_LIMITS = Limits()


class LimitsSection(Section):
    """``[limits]``: ``pausepoint.server.Limits``."""

    max_body_bytes: Annotated[int, Field(ge=1)] = _LIMITS.max_body_bytes
    max_message_bytes: Annotated[int, Field(ge=1)] = _LIMITS.max_message_bytes
    max_history: Annotated[int, Field(ge=1)] = _LIMITS.max_history
    max_page: Annotated[int, Field(ge=1)] = _LIMITS.max_page


class Expiry(Section):
    """``[expiry]``: the sweep that settles expired pauses."""

    enabled: bool = True
    interval_seconds: Interval = 30.0


class Retention(Section):
    """``[retention]``: how long the stores keep their events once delivered (``keep_events``)."""

    events_days: Annotated[float, Field(allow_inf_nan=False)] | None = None

    @field_validator("events_days")
    @classmethod
    def _days(cls, value: float | None) -> float | None:
        """As ``create_app(keep_events=...)`` takes it (at most ``MAX_KEEP``), from a second."""
        if value is not None and not 1 / 86_400 <= value <= MAX_KEEP.days:
            raise ValueError(f"a number of days from a second's worth (0.0000116) to {MAX_KEEP.days}")
        return value


class Links(Section):
    """``[notifiers.links]``: ``pausepoint.webhooks.ApprovalLinks``, signed links from a
    notification to its pause's card in the console."""

    secret_env: Annotated[
        SigningEnv | list[SigningEnv],
        _one_or_list(
            SigningEnv, Annotated[list[SigningEnv], Field(min_length=1)], "the name of an environment variable"
        ),
    ]
    secret: SecretHere = None
    console_url: str
    ttl_seconds: Annotated[float, Field(gt=0, le=366 * 86_400, allow_inf_nan=False)] = 7 * 24 * 3600.0

    @field_validator("console_url")
    @classmethod
    def _console_url(cls, value: str) -> str:
        if _USERINFO.match(value):
            raise ValueError(
                "this URL holds a user name or password: every approval link would carry it to whoever is "
                "notified; give the console's address without it (people sign in to the console)"
            )
        return value


class Slack(Section):
    """``[notifiers.slack]``: ``pausepoint.webhooks.SlackApp``, whose Approve / Deny buttons
    decide pauses (``POST /v1/slack/actions``)."""

    signing_secret_env: SigningEnv
    signing_secret: SigningSecretHere = None
    users: dict[str, Name]
    teams: list[str] | None = None


class Email(Section):
    """``[[notifiers.email]]``: one ``pausepoint.webhooks.EmailNotifier`` (SMTP)."""

    name: str
    host: str
    port: Annotated[int, Field(ge=1, le=65535)] = 587
    security: Literal["starttls", "ssl", "none"] = "starttls"
    sender: str
    to: Annotated[list[str], Field(min_length=1)]
    username: str | None = None
    password_env: PasswordEnv | None = None
    password: PasswordHere = None
    events: Annotated[list[EventKindName], Field(min_length=1)] | None = None
    agents: Agents | None = None
    tenants: Tenants | None = None
    timeout_seconds: Seconds = 10.0
    max_attempts: Annotated[int, Field(ge=1)] = 10
    backoff_seconds: Wait = 2.0
    max_backoff_seconds: Wait = 600.0


class Notifiers(Section):
    """``[notifiers]``: reaching approvers where they are — links, Slack's buttons, email."""

    links: Links | None = None
    slack: Slack | None = None
    email: list[Email] = Field(default_factory=list)


class ConfigFile(Section):
    """The whole file."""

    app: str | None = None
    listen: Listen = Listen()
    server: Server = Server()
    store: Store | None = None
    principals: dict[Name, Principal] = Field(default_factory=dict)
    auth: Auth = Auth()
    webhooks: list[WebhookSection] = Field(default_factory=list)
    delivery: Delivery = Delivery()
    tracing: Tracing | None = None
    metrics: MetricsSection = MetricsSection()
    log: Log = Log()
    limits: LimitsSection = LimitsSection()
    expiry: Expiry = Expiry()
    retention: Retention = Retention()
    notifiers: Notifiers = Notifiers()
    tenants: dict[DeclaredTenantName, Tenant] = Field(default_factory=dict)

    @field_validator("app")
    @classmethod
    def _app(cls, value: str | None) -> str | None:
        if value is not None and not _TARGET.fullmatch(value):
            raise ValueError(f"module:attribute (like myapp:ai), not {value!r}")
        return value
