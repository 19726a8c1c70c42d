"""``pausepoint demo``: the banking agent with the web console (or ``--terminal``), on a local SQLite file."""

from __future__ import annotations

import argparse
import asyncio
import secrets
from typing import Any

from .. import demo
from ..runtime._app import Pausepoint
from ..stores import SqliteSessionStore
from . import _logging
from ._models import choose_model
from ._serving import listen, port_number, serve_until_stopped
from ._terminal import TerminalChat
from ._web import http_app, open_browser

__all__ = ["add_parser", "run"]

PRINCIPAL = "demo"
TRY = "Transfer $500 to savings."


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="the banking example with the web console",
        description=(
            "The banking example: transfer_money is guarded by a userApproval pause. Serves it with the "
            "web console (or runs it in the terminal with --terminal); sessions are kept in a SQLite file."
        ),
    )
    parser.add_argument(
        "--model",
        default="local",
        help="local (default: Qwen2.5-Coder-1.5B-Instruct, offline; it decides by itself), local/smollm2 "
        "(tiny and fast, guided: the demo picks its tool calls), scripted (an offline stand-in), "
        "local/<file.gguf>, openai/<model>, anthropic/<model>, googleai/<model> (with its API key set), "
        "ollama/<model>",
    )
    parser.add_argument("--db", default="pausepoint-demo.db", help="the SQLite file (default: %(default)s)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    parser.add_argument(
        "--port", type=port_number, default=8765, help="port to listen on; 0 picks one (default: %(default)s)"
    )
    parser.add_argument("--no-open", action="store_true", help="do not open a browser")
    parser.add_argument("--terminal", action="store_true", help="chat in this terminal instead of the console")
    parser.add_argument(
        "--threads", type=int, default=None, help="CPU threads for the local model (default: one less than the cores)"
    )
    _logging.add_arguments(parser, default="warning")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    _logging.configure(args.log_level, args.log_format)
    choice = choose_model(args.model, threads=args.threads)
    options: dict[str, Any] = {}
    if choice.guided:
        options["description"] = choice.guided  # the console shows the agent's description
    ai, agent = demo.build(SqliteSessionStore(args.db), model=choice.model, plugins=choice.plugins, **options)
    header = f"pausepoint demo: {agent.name} on {choice.label}; sessions in {args.db}"
    if choice.guided:
        header += f"\n{choice.guided}"
    if args.terminal:
        print(header)
        print(f'Try: "{TRY}" It pauses for your approval. /help lists the commands.\n')
        return asyncio.run(TerminalChat(agent, principal=PRINCIPAL).run())
    return _serve_demo(args, ai, header)


def _serve_demo(args: argparse.Namespace, ai: Pausepoint, header: str) -> int:
    token = secrets.token_urlsafe(18)
    app = http_app(ai, {token: PRINCIPAL})
    sock = listen(args.host, args.port)
    port = sock.getsockname()[1]
    host = "127.0.0.1" if args.host in ("0.0.0.0", "::", "") else args.host  # noqa: S104 - only compared
    base = f"http://{host}:{port}"
    console = f"{base}/console/#token={token}"

    def ready() -> None:
        print(header)
        print()
        print(f"  console  {console}")
        print(f"  API      {base}  (Authorization: Bearer {token}; see {base}/openapi.json)")
        print()
        print(f'Try: "{TRY}" The transfer pauses; approve or deny it in the console.')
        print("Ctrl+C stops the server.", flush=True)
        if not args.no_open and not open_browser(console):
            print("(no browser here: open the console URL above yourself)", flush=True)

    return serve_until_stopped(app, sock, ready, args.log_level)
