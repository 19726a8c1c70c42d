"""``pausepoint demo``: the banking agent with the web console (or ``--terminal``), on a local SQLite file.

The file outlives a run: pauses an earlier run left open (a transfer never answered, or one a
model made up) would wait in the new run's inbox. A new run says what it found and offers to
clear them — asked on a terminal, with ``--fresh`` otherwise — recorded as cancelled ("cleared
when a new demo started"), so nothing of them runs and the history stays whole.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from .. import demo
from ..errors import SessionNotFound, StoreError
from ..runtime._agent import Agent
from ..runtime._app import Pausepoint
from ..stores import SqliteSessionStore
from . import _logging
from ._errors import CliError
from ._models import choose_model
from ._serving import listen, port_number, serve_until_stopped
from ._targets import session_to_continue, sqlite_file
from ._terminal import TerminalChat
from ._web import base_url, http_app, open_browser

__all__ = ["add_parser", "run"]

PRINCIPAL = "demo"
TRY = "Transfer $500 to savings."
CLEARED = "cleared when a new demo started"
T = TypeVar("T")


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
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="cancel the pauses earlier runs left open in the SQLite file (kept in its history as cancelled)",
    )
    parser.add_argument("--terminal", action="store_true", help="chat in this terminal instead of the console")
    parser.add_argument(
        "--session", metavar="ID", help="with --terminal: continue this session (a chat's end prints its id)"
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="CPU threads for the local model (default: one less than the cores)"
    )
    _logging.add_arguments(parser, default="warning")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.session is not None and not args.terminal:
        raise CliError("--session continues a chat in the terminal: give --terminal too (the console lists sessions)")
    sqlite_file(args.db)  # one the demo's end could not be continued from: refused before it starts
    session_to_continue(args.session)  # as chat --session says it
    _logging.configure(args.log_level, args.log_format)
    try:  # the first read of the file: one that is no database, or in no folder, is said so here
        _earlier_pauses(args.db, fresh=args.fresh)
    except StoreError as exc:
        raise CliError(f"the session store cannot be used: {exc}") from exc
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
        try:
            return asyncio.run(TerminalChat(agent, session_id=args.session, principal=PRINCIPAL).run())
        except SessionNotFound as exc:
            raise CliError(f"no session {args.session!r} in {args.db}") from exc
    return _serve_demo(args, ai, header)


def _serve_demo(args: argparse.Namespace, ai: Pausepoint, header: str) -> int:
    token = secrets.token_urlsafe(18)
    app = http_app(ai, {token: PRINCIPAL})
    sock = listen(args.host, args.port)
    port = sock.getsockname()[1]
    host = "127.0.0.1" if args.host in ("0.0.0.0", "::", "") else args.host  # noqa: S104 - only compared
    base = base_url(host, port)
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


def _earlier_pauses(db: str, *, fresh: bool) -> None:
    """Say which pauses earlier runs left open in ``db``, and clear them when asked to (``fresh``,
    or a yes on a terminal). Read with the offline stand-in model: no model is loaded for it."""
    found = asyncio.run(_in_demo_db(db, _open_pauses))
    if not found:
        return
    count = sum(len(titles) for _, titles in found)
    noun = "open pause" if count == 1 else "open pauses"
    print(f"{db} holds {count} {noun} from earlier runs (they would wait in the inbox):")
    for session_id, titles in found:
        for title in titles:
            print(f"  “{title}” (session {session_id[:8]}…)")
    if not fresh and not (sys.stdin.isatty() and sys.stdout.isatty()):
        print("Start with --fresh to clear them: they are recorded as cancelled, and nothing of them runs.\n")
        return
    if not fresh:
        try:
            answer = input("Clear them? They are recorded as cancelled, and nothing of them runs. [y/N] ")
        except EOFError:  # Ctrl+D: no
            answer = ""
            print()
        if answer.strip().lower() not in ("y", "yes"):
            print("Kept: they wait in the inbox.\n")
            return

    async def clear(agent: Agent) -> None:
        for session_id, _ in found:
            await agent.chat(session_id).cancel_pending(CLEARED, principal=PRINCIPAL, via="demo")

    asyncio.run(_in_demo_db(db, clear))
    print(f"Cleared {count} {noun} (recorded as cancelled: {CLEARED}).\n")


async def _in_demo_db(db: str, work: Callable[[Agent], Awaitable[T]]) -> T:
    """``work`` done on the demo's agent over ``db`` (the stand-in model), the file closed after."""
    store = SqliteSessionStore(db)
    try:
        _, agent = demo.build(store)
        return await work(agent)
    finally:
        await store.close()


async def _open_pauses(agent: Agent) -> list[tuple[str, list[str]]]:
    """The sessions with open pauses, each with its pauses' titles."""
    found = []
    for summary in await agent.list_sessions(has_pending=True):
        pauses = await agent.chat(summary.session_id).interrupts()
        found.append((summary.session_id, [agent.view(p).title for p in pauses]))
    return found
