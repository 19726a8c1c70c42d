"""What ``serve`` runs: the config file's settings with the command line's flags over them.

A flag always wins: ``--host``, ``--port``, ``--store``, ``--log-level`` and ``--log-format``
replace the file's value; ``--no-console``, ``--metrics`` and ``--mcp`` turn their setting
off or on whatever the file says; ``--token``, ``--approver`` and ``--operator`` add to the
file's principals, and where they name a principal the file declares, the flag's token (and an
``--approver``'s roles) replace the file's. Secrets are read from the environment here.

A tenant's principals (``[tenants.TENANT.principals.NAME]``) are kept under ``"TENANT/NAME"``,
the name the access policy and the role membership know them by; a flag names one so too, and
takes only the names the file takes (``name_problem``). A token that could never sign in (white
space at an end, a control character, beyond ASCII: ``token_problem``) is refused wherever it
comes from.

A problem of the file (a key the schema refuses, a key's value that cannot run) does not stop the
checks: each is kept in ``ServeSettings.problems``, and ``prepare`` (or ``asgi_only``) raises them
all, with the problems the app's checks find (a role no policy defines, a webhook's unknown agent),
before anything runs. A check that reads across the file's parts skips a part the schema left out
(``LoadedConfig.intact``): what it would say about it would be a guess.
"""

from __future__ import annotations

import argparse
import secrets
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from ..errors import DefinitionError
from ..server._limits import Limits
from ..webhooks import ApprovalLinks, EmailNotifier, SlackApp, Webhook, is_http_url, value_problem
from ._config import ConfigFile, Delivery, Email, Oidc, Tracing, WebhookSection, name_problem
from ._config_file import LoadedConfig, load_config
from ._errors import CliError, Problems
from ._store_url import OPTIONS, StoreSpec, backend_of, check_trimmed, parse_store, redacted

__all__ = [
    "GENERATED",
    "FileWebhook",
    "Principal",
    "ServeSettings",
    "parse_approvers",
    "parse_tokens",
    "resolve",
    "token_problem",
]

#: the principal of the token ``serve`` makes up when nobody else can sign in
GENERATED = "admin"


@dataclass
class Principal:
    """Someone who signs in: their bearer token (None: they sign in through the identity
    provider), whether they are an approver and of which roles, and where they were declared
    (a flag, or the file's key and line) for messages about them: ``where`` about their rights
    (their roles), ``token_at`` about their token (its ``token_env`` key, or the flag that gave it)."""

    token: str | None
    where: str
    token_from: str = ""
    approver: bool = False
    roles: tuple[str, ...] = ()
    tenant: str | None = None  # a tenant's principal (kept as "tenant/name")
    token_at: str = ""  # "": where


@dataclass(frozen=True)
class FileWebhook:
    """A webhook the config file declares: where, and its URL as it may be shown (one read
    from the environment is a secret: only its variable is named)."""

    webhook: Webhook
    where: str
    shown_url: str


@dataclass
class ServeSettings:
    """Everything ``serve`` needs to build and serve the app, from the file and the flags."""

    target: str
    host: str
    port: int
    store: StoreSpec | None = None
    principals: dict[str, Principal] = field(default_factory=dict)
    operators: list[str] = field(default_factory=list)
    oidc: Oidc | None = None
    console: bool = True
    mcp: bool = False
    metrics: bool = False
    log_level: str = "info"
    log_format: str = "text"
    request_log: bool = True
    limits: Limits = field(default_factory=Limits)
    expiry_interval: float | None = 30.0
    keep_events: timedelta | None = None
    webhooks: list[FileWebhook] = field(default_factory=list)
    delivery: Delivery = field(default_factory=Delivery)
    tracing: Tracing | None = None
    links: ApprovalLinks | None = None
    slack: SlackApp | None = None
    loaded: LoadedConfig | None = None
    generated: str | None = None  # the token made up for GENERATED
    tenants: list[str] = field(default_factory=list)  # the tenants the file names
    problems: Problems = field(default_factory=Problems)  # found so far, raised by prepare / asgi_only
    app_at: str | None = None  # the file's app key, where the file names the app (None: a TARGET)
    store_at: str | None = None  # the file's store.url (or url_env) key, where the file names the store

    @property
    def tokens(self) -> dict[str, str]:
        """token -> principal (a tenant's as "tenant/name"), as ``BearerTokens`` takes them."""
        return {p.token: name for name, p in self.principals.items() if p.token is not None}

    @property
    def approvers(self) -> dict[str, list[str]]:
        """The approvers (a tenant's as "tenant/name"), each with the roles they hold."""
        return {name: list(p.roles) for name, p in self.principals.items() if p.approver}

    def tenant_of(self, name: str) -> str | None:
        """The tenant a principal's name ``"tenant/name"`` names (None: a principal of none)."""
        tenant, sep, _ = name.partition("/")
        return tenant if sep and tenant in self.tenants else None


def resolve(args: argparse.Namespace, env: Mapping[str, str]) -> ServeSettings:
    """The settings of ``serve``'s command line ``args`` (and of ``--config FILE``, if given).
    Raises ``CliError`` for a file that cannot be read or is no TOML, and for a malformed flag;
    every other problem, named at its flag or the file's key and line, is kept in ``problems``
    (its part of the settings left out), for ``prepare`` or ``asgi_only`` to raise with the app's."""
    replaced = ["store"] if getattr(args, "store", None) else []  # --store replaces the section whole
    loaded = load_config(args.config, env, replaced) if getattr(args, "config", None) else None
    file = loaded.config if loaded is not None else ConfigFile()
    target = args.target or file.app or ""  # "": the file's app is wrong, its problem raised with the others below
    if not target and loaded is not None and loaded.intact("app"):
        raise CliError(f'{args.config} names no app: add app = "module:attr" to it (or give serve a TARGET)')
    if not target and loaded is None:
        raise CliError('the following arguments are required: TARGET (or app = "module:attr" in --config FILE)')
    settings = ServeSettings(
        target=target,
        host=args.host if args.host is not None else file.listen.host,
        port=args.port if args.port is not None else file.listen.port,
        oidc=file.auth.oidc,
        console=file.server.console and not args.no_console,
        mcp=bool(args.mcp) or file.server.mcp,
        metrics=bool(args.metrics) or file.metrics.enabled,
        log_level=args.log_level or file.log.level,
        log_format=args.log_format or file.log.format,
        request_log=file.log.requests,
        limits=Limits(**file.limits.model_dump()),
        expiry_interval=file.expiry.interval_seconds if file.expiry.enabled else None,
        keep_events=None if file.retention.events_days is None else timedelta(days=file.retention.events_days),
        delivery=file.delivery,
        tracing=file.tracing,
        loaded=loaded,
        tenants=list(file.tenants),
        problems=Problems(loaded.path if loaded is not None else None),
    )
    problems = settings.problems
    if not args.target and loaded is not None and file.app is not None:
        settings.app_at = loaded.where(("app",))
    for problem in loaded.problems if loaded is not None else ():  # the schema's first, each at its line
        problems.add(CliError(problem))
    with problems.each():
        settings.store, settings.store_at = _store(args, loaded, env, problems)
    _principals(settings, args, loaded, env)
    if loaded is not None:
        made = [_webhook(hook, loaded.index(("webhooks",), i), loaded, env, problems)
                for i, hook in enumerate(file.webhooks)]  # fmt: skip
        made += [_email(mail, loaded.index(("notifiers", "email"), i), loaded, env, problems)
                 for i, mail in enumerate(file.notifiers.email)]  # fmt: skip
        settings.webhooks = [webhook for webhook in made if webhook is not None]
        _check_names(settings, problems)
        _check_delivery(settings, loaded, problems)
        settings.links = _links(loaded, env, problems)
        settings.slack = _slack(loaded, env, problems, settings.principals)
    if not target:  # the file's app is wrong: there is nothing to load, the problems found are all
        problems.raise_found()
    return settings


def _store(
    args: argparse.Namespace, loaded: LoadedConfig | None, env: Mapping[str, str], problems: Problems
) -> tuple[StoreSpec | None, str | None]:
    """The store to serve from, and where the file names it (None: the flag, or no store)."""
    if args.store is not None:  # "" too: an unset variable ($DATABASE_URL) is no store to serve from
        return parse_store(args.store), None
    if loaded is None or loaded.config.store is None:
        return None, None
    store = loaded.config.store
    if (store.url is None) == (store.url_env is None):
        raise loaded.problem(("store",), "give the store's URL as url or url_env (one of them)")
    url = store.url if store.url is not None else env[store.url_env or ""]
    where = loaded.where(("store", "url" if store.url is not None else "url_env"))
    check_trimmed(url, where)
    try:
        backend = backend_of(url)
    except CliError as exc:
        raise CliError(f"{where}: {exc}") from None
    options = {"schema": store.schema_, "prefix": store.prefix, "synchronous": store.synchronous}
    wrong = [name for name, value in options.items() if value is not None and OPTIONS[name] != backend]
    for name in wrong:  # each of them, not the first only
        takes = f"a {backend} store takes no {name!r} option (it is {OPTIONS[name]}'s)"
        problems.add(loaded.problem(("store", name), takes))
    return (None if wrong else parse_store(url, where, **options)), where


def _principals(
    settings: ServeSettings, args: argparse.Namespace, loaded: LoadedConfig | None, env: Mapping[str, str]
) -> None:
    """The file's principals, then the flags' over them; a token made up if nobody can sign in."""
    found = settings.principals
    if loaded is not None:
        _file_principals(settings, loaded, env)
    for token, name in parse_tokens(args.token).items():
        tenant = _flag_tenant(settings, name, "--token")
        old = found.get(name)  # the file's: its token is replaced, its roles kept
        given = f"--token {name}=..."
        if old is None:
            found[name] = Principal(token, given, "--token", tenant=tenant)
        else:
            found[name] = Principal(token, old.where, "--token", old.approver, old.roles, old.tenant, given)
    flagged = {name: token for token, name in parse_tokens(args.token).items()}
    for name, (token, roles) in parse_approvers(args.approver).items():
        if flagged.get(name, token) != token:
            raise CliError(f"--token {name} and --approver {name} give two tokens: give {name} one")
        found[name] = Principal(token, f"--approver {name}", "--approver", True, tuple(roles),
                                _flag_tenant(settings, name, "--approver"))  # fmt: skip
    for name in args.operator:
        if settings.tenant_of(name) is not None:
            raise CliError(f"--operator {name}: an operator spans tenants: name a principal of no tenant")
        _flag_tenant(settings, name, "--operator")
    settings.operators += [name for name in args.operator if name not in settings.operators]
    seen: dict[str, str] = {}
    # The file's tokens first, then the flags' (given over the file): a token given twice is
    # named where it was given the second time.
    for name, principal in sorted(found.items(), key=lambda item: (item[1].token_at or item[1].where).startswith("--")):
        if principal.token is None:
            continue
        if principal.token in seen:
            settings.problems.add(CliError(
                f"{principal.token_at or principal.where}: the token of {name!r} is given twice "
                f"(it is also the token of {seen[principal.token]!r})"
            ))  # fmt: skip
            continue
        seen[principal.token] = name
    if not seen and settings.oidc is None:
        settings.generated = secrets.token_urlsafe(18)
        found[GENERATED] = Principal(settings.generated, "the generated token", "generated")
        settings.operators = settings.operators or [GENERATED]
    if settings.oidc is None:  # without a sign-in provider, only those given a token sign in
        for name in args.operator:
            if name not in found:  # said with the file's problems (an ASGI app refuses the flag first)
                settings.problems.add(CliError(
                    f"--operator {name}: nobody signs in as {name!r}: give them a token (--token {name}=..., or "
                    "[principals] in the config file)"
                ))  # fmt: skip


def _file_principals(settings: ServeSettings, loaded: LoadedConfig, env: Mapping[str, str]) -> None:
    """The file's principals: ``[principals.NAME]``, then each tenant's, as ``"tenant/name"``."""
    config = loaded.config
    declared_by: list[tuple[tuple[str, ...], str, str | None, Any]] = [
        (("principals", name), name, None, declared) for name, declared in config.principals.items()
    ]
    for tenant_name, held in config.tenants.items():
        declared_by += [(("tenants", tenant_name, "principals", name), f"{tenant_name}/{name}", tenant_name, declared)
                        for name, declared in held.principals.items()]  # fmt: skip
    for path, key, tenant, declared in declared_by:
        if tenant is None and config.tenants and "/" in key:
            settings.problems.add(loaded.problem(
                path, "a name with '/' reads as a tenant's principal (tenant/name): declare a tenant's principals "
                "in [tenants.TENANT.principals]"
            ))  # fmt: skip
            continue
        if declared.token_env is None and settings.oidc is None and loaded.intact("auth"):
            settings.problems.add(loaded.problem(path, "no token_env, and no [auth.oidc] to sign in through: give one"))
            continue
        token = env[declared.token_env] if declared.token_env else None
        token_at = loaded.where((*path, "token_env"))
        unusable = token_problem(key, token) if token is not None else None
        if unusable is not None:
            settings.problems.add(CliError(f"{token_at}: {unusable}"))
        where = loaded.where((*path, "roles") if declared.roles else path)
        settings.principals[key] = Principal(
            token, where, f"${declared.token_env}" if token else "", declared.is_approver,
            tuple(sorted(set(declared.roles))), tenant, token_at,
        )  # fmt: skip
        if declared.operator:
            settings.operators.append(key)


def _flag_tenant(settings: ServeSettings, name: str, flag: str) -> str | None:
    """The tenant of the principal ``flag`` names (``tenant/name``: one the file declares), or None.
    With tenants declared, a name with '/' must name one of them; and the name (a tenant's: its
    part after ``tenant/``) is one the file would take. Else ``CliError``."""
    tenant = settings.tenant_of(name)
    if tenant is None and settings.tenants and "/" in name:
        raise CliError(
            f"{flag} {name!r}: no tenant {name.partition('/')[0]!r} (tenants: {', '.join(settings.tenants)}); a "
            "tenant's principal is named tenant/name"
        )
    problem = name_problem(name if tenant is None else name[len(tenant) + 1 :])
    if problem is not None:
        raise CliError(f"{flag} {name!r}: {problem}")
    return tenant


def token_problem(name: str, token: str) -> str | None:
    """Why the token of the principal ``name`` could never sign in (None: it can), in words that
    never show the token: the check of every value a header carries (``value_problem``) — the
    server strips the token a request sends, and a header carries neither a control character
    (a line break) nor, as clients send it, one beyond ASCII."""
    why = value_problem(token)
    return None if why is None else f"the token of {name!r} {why}: it could never sign in"


def parse_tokens(values: list[str]) -> dict[str, str]:
    """``NAME=TOKEN`` options as BearerTokens wants them: token -> principal."""
    tokens: dict[str, str] = {}
    for value in values:
        name, sep, token = value.partition("=")
        if not sep or not name or not token:  # (the value is never shown: it may be a token)
            missing = "no '='" if not sep else "no NAME before '='" if not name else f"no token after {name}="
            raise CliError(f"--token wants NAME=TOKEN: {missing}")
        unusable = token_problem(name, token)
        if unusable is not None:
            raise CliError(f"--token {name}=...: {unusable}")
        if token in tokens:
            raise CliError(f"the token of {name!r} is given twice")
        if name in tokens.values():  # found by a probe: the last one taken, the first refused (401), unsaid
            raise CliError(f"--token {name} is given twice, with two tokens")
        tokens[token] = name
    return tokens


def parse_approvers(values: list[str]) -> dict[str, tuple[str, list[str]]]:
    """``NAME:TOKEN[:ROLE,...]`` options: name -> (token, roles)."""
    approvers: dict[str, tuple[str, list[str]]] = {}
    for value in values:
        name, _, rest = value.partition(":")
        token, _, roles = rest.partition(":")
        held = [r.strip() for r in roles.split(",") if r.strip()]
        if not name or not token or (roles and not held):  # (the value is never shown: it may hold a token)
            missing = "no NAME" if not name else f"no token after {name}:" if not token else "no ROLE after the token"
            raise CliError(f"--approver wants NAME:TOKEN or NAME:TOKEN:ROLE[,ROLE...]: {missing}")
        unusable = token_problem(name, token)
        if unusable is not None:
            raise CliError(f"--approver {name}:...: {unusable}")
        before = approvers.get(name)
        if before is not None and before[0] != token:
            raise CliError(f"--approver {name} is given twice, with two tokens")
        approvers[name] = (token, sorted({*(before[1] if before else []), *held}))
    return approvers


def _webhook(
    hook: WebhookSection, index: int, loaded: LoadedConfig, env: Mapping[str, str], problems: Problems
) -> FileWebhook | None:
    """The webhook ``[[webhooks]]`` number ``index`` declares (None where it cannot be made);
    each of its problems is kept in ``problems``."""
    at = ("webhooks", index)
    if (hook.url is None) == (hook.url_env is None):
        problems.add(loaded.problem(at, "give the webhook's URL as url or url_env (one of them)"))
        return None
    unsigned = hook.format == "json" and hook.secret_env is None
    if unsigned:
        needs = "a json webhook signs its requests: name the secret's variable with secret_env"
        problems.add(loaded.problem(at, needs))
    if hook.url_env is not None and not is_http_url(env[hook.url_env]):
        said = f"${hook.url_env} must hold an http(s) URL (what it holds is a secret: not shown)"
        problems.add(loaded.problem((*at, "url_env"), said))
        return None
    headers = dict(hook.headers)
    for name, variable in hook.headers_env.items():
        if name in headers:
            problems.add(loaded.problem((*at, "headers_env", name), "this header is in headers too: give it once"))
        headers[name] = env[variable]
    try:
        made = Webhook(
            hook.name,
            hook.url if hook.url is not None else env[hook.url_env or ""],
            # Unsigned, it is made as if signed, so that its other problems are named too; it
            # never runs: its missing secret_env is a problem, raised before anything runs.
            secret=env[hook.secret_env] if hook.secret_env else "no secret_env" if unsigned else None,
            events=tuple(hook.events) if hook.events is not None else Webhook.events,
            format=hook.format,
            headers=headers,
            **_delivery(hook, at, loaded, problems),
        )
    except DefinitionError as exc:
        problems.add(loaded.problem(at, exc.message))
        return None
    shown = redacted(hook.url) if hook.url is not None else f"${hook.url_env} ********"
    return FileWebhook(made, loaded.where(at), shown)


def _email(
    mail: Email, index: int, loaded: LoadedConfig, env: Mapping[str, str], problems: Problems
) -> FileWebhook | None:
    """The notifier ``[[notifiers.email]]`` number ``index`` declares (None where it cannot be
    made); each of its problems is kept in ``problems``."""
    at = ("notifiers", "email", index)
    if (mail.username is None) != (mail.password_env is None):
        problems.add(loaded.problem(at, "give username and password_env together (or neither)"))
        return None
    options = {"events": tuple(mail.events)} if mail.events is not None else {}
    try:
        made = EmailNotifier(
            mail.name,
            host=mail.host,
            port=mail.port,
            security=mail.security,
            sender=mail.sender,
            to=tuple(mail.to),
            username=mail.username,
            password=env[mail.password_env] if mail.password_env else None,
            **_delivery(mail, at, loaded, problems),
            **options,  # type: ignore[arg-type]
        )
    except DefinitionError as exc:
        problems.add(loaded.problem(at, exc.message))
        return None
    return FileWebhook(made, loaded.where(at), f"smtp://{mail.host}:{mail.port} to {', '.join(mail.to)}")


def _delivery(
    section: WebhookSection | Email, at: tuple[str | int, ...], loaded: LoadedConfig, problems: Problems
) -> dict[str, Any]:
    """What a webhook and an email notifier are both given: whose events they hear (``agents``,
    ``tenants``) and how each delivery is tried (timeout, attempts, backoff)."""
    return {
        "agents": section.agents,
        "tenants": _known_tenants(section.tenants, (*at, "tenants"), loaded, problems),
        "timeout": section.timeout_seconds,
        "max_attempts": section.max_attempts,
        "backoff": section.backoff_seconds,
        "max_backoff": section.max_backoff_seconds,
    }


def _known_tenants(
    tenants: list[str] | None, at: tuple[str | int, ...], loaded: LoadedConfig, problems: Problems
) -> list[str] | None:
    """``tenants`` of a webhook; one the file does not name in ``[tenants]`` is a problem (a typo
    would make a webhook that never hears anything)."""
    unknown = sorted(set(tenants or ()) - set(loaded.config.tenants))
    if unknown and loaded.intact("tenants"):
        known = ", ".join(loaded.config.tenants) or "none: name them in [tenants.NAME]"
        problems.add(loaded.problem(at, f"no tenant {', '.join(map(repr, unknown))} (tenants: {known})"))
    return tenants


def _check_names(settings: ServeSettings, problems: Problems) -> None:
    """Webhooks and email notifiers share one outbox: each needs a name of its own."""
    seen: dict[str, str] = {}
    for declared in settings.webhooks:
        name = declared.webhook.name
        if name in seen:
            problems.add(CliError(f"{declared.where}: {seen[name].split(': ', 1)[1]} has the name {name!r} already"))
        else:
            seen[name] = declared.where


def _links(loaded: LoadedConfig, env: Mapping[str, str], problems: Problems) -> ApprovalLinks | None:
    links = loaded.config.notifiers.links
    if links is None:
        return None
    names = [links.secret_env] if isinstance(links.secret_env, str) else links.secret_env
    try:
        return ApprovalLinks([env[name] for name in names], links.console_url, timedelta(seconds=links.ttl_seconds))
    except DefinitionError as exc:
        problems.add(loaded.problem(("notifiers", "links"), exc.message))
        return None


def _slack(
    loaded: LoadedConfig, env: Mapping[str, str], problems: Problems, principals: Collection[str]
) -> SlackApp | None:
    """The Slack app; each Slack user must map to a principal of the file (or its flags), unless
    people also sign in through ``[auth.oidc]`` (whose names the file does not list)."""
    slack = loaded.config.notifiers.slack
    if slack is None:
        return None
    if loaded.config.notifiers.links is None and loaded.intact("notifiers", "links"):
        needs = "Slack's buttons carry approval links: add [notifiers.links]"
        problems.add(loaded.problem(("notifiers", "slack"), needs))
    whole = loaded.intact("tenants") and loaded.intact("principals") and loaded.intact("auth")
    unknown = False  # a user mapped to no principal, named at its key (not again as the app's)
    for user, principal in slack.users.items() if whole else ():  # (with a part left out: no guess whom they name)
        tenant, slash, _ = principal.partition("/")
        if slash and tenant not in loaded.config.tenants:
            known = ", ".join(loaded.config.tenants) or "none: name them in [tenants.NAME]"
            problems.add(loaded.problem(
                ("notifiers", "slack", "users", user),
                f"{principal!r} names a principal of tenant {tenant!r}, which is not declared (tenants: {known})",
            ))  # fmt: skip
            unknown = True
        elif loaded.config.auth.oidc is None and principal not in principals:
            listed = ", ".join(sorted(principals)) or "none"
            problems.add(loaded.problem(
                ("notifiers", "slack", "users", user),
                f"{principal!r} is no principal of this file (principals: {listed}): that user could decide nothing",
            ))  # fmt: skip
            unknown = True
    if unknown:
        return None
    try:
        return SlackApp(env[slack.signing_secret_env], dict(slack.users), teams=slack.teams)
    except DefinitionError as exc:
        problems.add(loaded.problem(("notifiers", "slack"), exc.message))
        return None


def _check_delivery(settings: ServeSettings, loaded: LoadedConfig, problems: Problems) -> None:
    """A claimed delivery must stay this process's while its attempt runs."""
    if not loaded.intact("delivery"):  # (the lease the file meant is not known)
        return
    slowest = max((hook.webhook.timeout for hook in settings.webhooks), default=0.0)
    if settings.delivery.enabled and settings.webhooks and settings.delivery.lease_seconds <= slowest:
        problems.add(loaded.problem(
            ("delivery", "lease_seconds"),
            f"the lease must outlast the slowest webhook's attempt (timeout_seconds = {slowest:g})",
        ))  # fmt: skip
