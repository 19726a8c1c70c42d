"""``pausepoint serve module:app``: serve a Pausepoint app (or any ASGI app) over HTTP."""

from __future__ import annotations

import argparse
import secrets
from typing import Any

from ..errors import DefinitionError
from ..runtime._app import Pausepoint
from . import _logging
from ._errors import CliError
from ._serving import listen, port_number, serve_until_stopped
from ._targets import load_target, replace_stores, store_from_url
from ._web import http_app, need_mcp

__all__ = ["add_parser", "run"]


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="serve an app's agents over HTTP",
        description=(
            "Serve TARGET over HTTP. TARGET is module:attribute naming a Pausepoint app (served with "
            "pausepoint.server.create_app: the agent endpoints, the REST approvals API and the console) "
            "or any ASGI app (served as it is)."
        ),
    )
    parser.add_argument("target", metavar="TARGET", help="module:attribute, like myapp:ai")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    parser.add_argument(
        "--port", type=port_number, default=8000, help="port to listen on; 0 picks one (default: %(default)s)"
    )
    parser.add_argument(
        "--store",
        metavar="URL",
        help="use this store for every agent: sqlite:///file.db, postgresql://..., redis://..., memory:",
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
    _logging.add_arguments(parser, default="info")
    parser.set_defaults(run=run)


def parse_tokens(values: list[str]) -> dict[str, str]:
    """``NAME=TOKEN`` options as BearerTokens wants them: token -> principal."""
    tokens: dict[str, str] = {}
    for value in values:
        name, sep, token = value.partition("=")
        if not sep or not name or not token:
            raise CliError(f"--token wants NAME=TOKEN, not {value!r}")
        if token in tokens:
            raise CliError(f"the token of {name!r} is given twice")
        tokens[token] = name
    return tokens


def parse_approvers(values: list[str], tokens: dict[str, str]) -> dict[str, list[str]]:
    """``NAME:TOKEN[:ROLE,...]`` options: their tokens go into ``tokens``; returns name -> roles."""
    approvers: dict[str, list[str]] = {}
    for value in values:
        name, _, rest = value.partition(":")
        token, _, roles = rest.partition(":")
        held = [r.strip() for r in roles.split(",") if r.strip()]
        if not name or not token or (roles and not held):
            raise CliError(f"--approver wants NAME:TOKEN or NAME:TOKEN:ROLE[,ROLE...], not {value!r}")
        if token in tokens:
            raise CliError(f"the token of {name!r} is given twice")
        tokens[token] = name
        approvers[name] = sorted({*approvers.get(name, []), *held})
    return approvers


def add_approvers(ai: Pausepoint, approvers: dict[str, list[str]]) -> None:
    """Make each approver a member of their roles in every agent's approval policy; a role no
    agent's policy defines is a ``CliError`` (a typo would give nobody the right to approve)."""
    defined = {role for agent in ai.agents.values() for role in agent.approval_policy.roles}
    for name, roles in approvers.items():
        unknown = sorted(set(roles) - defined)
        if unknown:
            known = ", ".join(sorted(defined)) or "none"
            raise CliError(f"--approver {name}: no agent's approval policy defines the role(s) "
                           f"{', '.join(unknown)} (roles: {known})")  # fmt: skip
    members = {name: roles for name, roles in approvers.items() if roles}
    if not members:
        return
    for agent in ai.agents.values():
        try:
            agent.approval_policy = agent.approval_policy.with_members(members)
        except DefinitionError as exc:
            raise CliError(f"--approver: {exc}") from None


def run(args: argparse.Namespace) -> int:
    _logging.configure(args.log_level, args.log_format)
    tokens = parse_tokens(args.token)
    approvers = parse_approvers(args.approver, tokens)
    target = load_target(args.target)
    generated = None
    if args.mcp_stdio is not None:
        return _serve_stdio(target, args)
    if isinstance(target, Pausepoint):
        if args.store:
            replace_stores(list(target.agents.values()), store_from_url(args.store))
        add_approvers(target, approvers)
        operators = list(args.operator)
        if not tokens:
            generated = secrets.token_urlsafe(18)
            tokens = {generated: "admin"}
            operators = operators or ["admin"]
        app = http_app(
            target,
            tokens,
            console=not args.no_console,
            metrics=args.metrics,
            operators=operators,
            approvers=set(approvers),
            mcp=args.mcp,
        )
        agents = ", ".join(target.agents) or "no agents"
    elif callable(target):
        if args.store or tokens or args.no_console or args.metrics or args.operator or args.mcp:
            raise CliError(
                "--store, --token and --no-console apply to a Pausepoint app (so do --approver, --metrics, "
                "--operator and --mcp); an ASGI app brings its own"
            )
        app, agents = target, "an ASGI app"
    else:
        raise CliError(f"{args.target} is a {type(target).__name__}, not a Pausepoint app or an ASGI app")
    sock = listen(args.host, args.port)
    base = f"http://{args.host}:{sock.getsockname()[1]}"

    def ready() -> None:
        print(f"pausepoint: serving {args.target} ({agents}) at {base}")
        for name, roles in approvers.items():
            print(f"  approver {name}" + (f" ({', '.join(roles)})" if roles else ""))
        if generated is not None:
            print(f"  token    {generated}  (principal 'admin'; pass --token NAME=TOKEN to choose your own)")
        if isinstance(target, Pausepoint) and not args.no_console:
            hint = f"#token={generated}" if generated else ""
            print(f"  console  {base}/console/{hint}")
        if args.mcp:
            print(f"  mcp      {base}/mcp  (streamable HTTP; the same bearer token)")
        print("Ctrl+C stops the server.", flush=True)

    return serve_until_stopped(app, sock, ready, args.log_level)


def _serve_stdio(target: Any, args: argparse.Namespace) -> int:
    """The agents as an MCP server on stdin/stdout (stdout carries the protocol: nothing else
    is printed there)."""
    if not isinstance(target, Pausepoint):
        raise CliError("--mcp-stdio serves a Pausepoint app's agents, not an ASGI app")
    if args.mcp or args.token or args.port != 8000 or args.host != "127.0.0.1":
        raise CliError("--mcp-stdio speaks over stdin/stdout: --mcp, --token, --host and --port do not apply")
    if not args.mcp_stdio:
        raise CliError("--mcp-stdio wants the principal the MCP client acts as, like --mcp-stdio alice")
    need_mcp()
    if args.store:
        replace_stores(list(target.agents.values()), store_from_url(args.store))
    from ..server._mcp import mcp_server

    mcp_server(target, principal=args.mcp_stdio).run("stdio")
    return 0
