"""``pausepoint serve module:app``: serve a Pausepoint app (or any ASGI app) over HTTP, set up
by its flags and, for a team, by one config file (``--config FILE``; the flags win over it)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from ..runtime._app import Pausepoint
from . import _logging
from ._config import name_problem
from ._errors import CliError, named_at
from ._serve_app import build_app, prepare
from ._serving import listen, port_number, serve_until_stopped
from ._settings import GENERATED, ServeSettings, resolve
from ._store_url import FORMS, open_store
from ._targets import load_target, not_an_app, prepare_model, replace_stores
from ._web import base_url, need_mcp

__all__ = ["add_parser", "asgi_only", "check_agents", "run"]


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="serve an app's agents over HTTP",
        description=(
            "Serve TARGET over HTTP. TARGET is module:attribute naming a Pausepoint app (served with "
            "pausepoint.server.create_app: the agent endpoints, the REST approvals API and the console) "
            "or any ASGI app (served as it is). --config FILE sets it all up from one TOML file "
            "(docs/config.md); a flag given beside it wins over the file."
        ),
    )
    parser.add_argument(
        "target", metavar="TARGET", nargs="?", help="module:attribute, like myapp:ai (or the file's app)"
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="a TOML config file: app, listen address, store, principals, sign-in, webhooks, tracing, ... "
        "('pausepoint config check FILE' shows what it would run)",
    )
    parser.add_argument("--host", help="address to listen on (default: 127.0.0.1)")
    parser.add_argument("--port", type=port_number, help="port to listen on; 0 picks one (default: 8000)")
    parser.add_argument(
        "--store",
        metavar="URL",
        help=f"use this store for every agent: {FORMS}",
    )
    parser.add_argument(
        "--token",
        action="append",
        default=[],
        metavar="NAME=TOKEN",
        help="accept 'Authorization: Bearer TOKEN' as the principal NAME (repeatable; default: one generated token)",
    )
    parser.add_argument(
        "--approver",
        action="append",
        default=[],
        metavar="NAME:TOKEN[:ROLE,...]",
        help="an approver: 'Authorization: Bearer TOKEN' is the principal NAME, who sees every session and "
        "answers its pauses, holding ROLEs of the agents' approval policies (repeatable)",
    )
    parser.add_argument("--no-console", action="store_true", help="do not serve the web console")
    parser.add_argument(
        "--metrics",
        action="store_true",
        help="serve Prometheus metrics at /metrics (pip install 'pausepoint[metrics]')",
    )
    parser.add_argument(
        "--operator",
        action="append",
        default=[],
        metavar="NAME",
        help="a principal who may see and retry webhook deliveries at /v1/ops/deliveries (repeatable; "
        "default: the generated token's principal)",
    )
    parser.add_argument(
        "--mcp",
        action="store_true",
        help="also serve the agents as an MCP server at /mcp (streamable HTTP, the same tokens; "
        "pip install 'pausepoint[mcp]')",
    )
    parser.add_argument(
        "--mcp-stdio",
        metavar="PRINCIPAL",
        help="serve the agents as an MCP server over stdin/stdout instead of HTTP, for an MCP client that "
        "starts this process; PRINCIPAL is who that client acts as",
    )
    parser.add_argument(
        "--log-level", choices=_logging.LEVELS, help="what to log (default: info, which logs each request)"
    )
    parser.add_argument("--log-format", choices=("text", "json"), help="log lines as text or JSON (default: text)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    settings = resolve(args, os.environ)
    _logging.configure(settings.log_level, settings.log_format)
    with settings.problems.last(), named_at(settings.app_at):  # the file's problems are named with the app's
        target = load_target(settings.target)
    if args.mcp_stdio is not None:
        return _serve_stdio(target, settings, args)
    provider = None
    if isinstance(target, Pausepoint):
        with settings.problems.last():
            check_agents(target)
        provider = prepare(target, settings)
        app = build_app(target, settings)
        agents = ", ".join(target.agents)
    elif callable(target):
        asgi_only(settings, args)
        app, agents = target, "an ASGI app"
    else:
        with named_at(settings.app_at):
            raise not_an_app(settings.target, target)
    sock = listen(settings.host, settings.port)
    base = base_url(settings.host, sock.getsockname()[1])
    try:
        return serve_until_stopped(
            app, sock, lambda: _banner(settings, base, agents, isinstance(target, Pausepoint)), settings.log_level
        )
    finally:
        if provider is not None:
            provider.shutdown()  # sends the spans still waiting


def check_agents(target: Pausepoint) -> None:
    """An app to serve has agents, and their models can be used (a cloud model has its key)."""
    if not target.agents:
        raise CliError("the app defines no agents: define one with ai.define_agent(...) before it is served")
    for agent in target.agents.values():
        prepare_model(agent)


def _banner(settings: ServeSettings, base: str, agents: str, served_app: bool) -> None:
    print(f"pausepoint: serving {settings.target} ({agents}) at {base}")
    if settings.loaded is not None:
        print(f"  config   {settings.loaded.path}")
    for name, roles in settings.approvers.items():
        print(f"  approver {name}" + (f" ({', '.join(roles)})" if roles else ""))
    if settings.oidc is not None:
        console = settings.oidc.console_client_id
        shown = f"; the console signs in as client {console}" if console and settings.console else ""
        print(f"  sign-in  {settings.oidc.issuer} (OpenID Connect, audience {settings.oidc.audience}{shown})")
    if served_app and settings.generated is not None:  # an ASGI app checks no token of ours
        print(f"  token    {settings.generated}  (principal '{GENERATED}'; pass --token NAME=TOKEN to choose your own)")
    if served_app and settings.console:
        hint = f"#token={settings.generated}" if settings.generated else ""
        print(f"  console  {base}/console/{hint}")
    if settings.mcp:
        print(f"  mcp      {base}/mcp  (streamable HTTP; the same bearer token)")
    print("Ctrl+C stops the server.", flush=True)


def asgi_only(settings: ServeSettings, args: argparse.Namespace) -> None:
    """An ASGI app brings its own store, auth and routes: refuse what would set them. Raises
    ``CliError`` naming every problem (with those ``settings.problems`` holds)."""
    given = (
        args.store is not None
        or args.token
        or args.approver
        or args.no_console
        or args.metrics
        or args.operator
        or args.mcp
    )
    if given:
        raise CliError(
            "--store, --token and --no-console apply to a Pausepoint app (so do --approver, --metrics, "
            "--operator and --mcp); an ASGI app brings its own"
        )
    loaded = settings.loaded
    if loaded is not None:
        for key in ("store", "principals", "tenants", "auth", "webhooks", "tracing", "metrics", "server", "limits",
                    "expiry", "retention"):  # fmt: skip
            if key in loaded.config.model_fields_set:
                settings.problems.add(loaded.problem((key,), f"{settings.target} is an ASGI app: it brings its "
                                                     "own; only app, listen and log apply"))  # fmt: skip
    settings.problems.raise_found()


def _serve_stdio(target: Any, settings: ServeSettings, args: argparse.Namespace) -> int:
    """The agents as an MCP server on stdin/stdout (stdout carries the protocol: nothing else
    is printed there)."""
    if not isinstance(target, Pausepoint):
        raise CliError("--mcp-stdio serves a Pausepoint app's agents, not an ASGI app")
    if args.mcp or args.token or args.port is not None or args.host is not None:
        raise CliError("--mcp-stdio speaks over stdin/stdout: --mcp, --token, --host and --port do not apply")
    if not args.mcp_stdio:
        raise CliError("--mcp-stdio wants the principal the MCP client acts as, like --mcp-stdio alice")
    if (problem := name_problem(args.mcp_stdio)) is not None:  # the name a principal of the file could have
        raise CliError(f"--mcp-stdio {args.mcp_stdio!r}: {problem}")
    settings.problems.raise_found()
    check_agents(target)
    need_mcp()
    if settings.store is not None:
        with named_at(settings.store_at):
            replace_stores(list(target.agents.values()), open_store(settings.store))
    from ..server._mcp import mcp_server

    mcp_server(target, principal=args.mcp_stdio).run("stdio")
    return 0
