"""``pausepoint chat module:agent``: chat with an agent in the terminal, answering its pauses."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import os
import re
from typing import Any

from ..errors import SessionNotFound, StoreError
from ..runtime._agent import Agent
from ._config import name_problem
from ._errors import CliError
from ._store_url import FORMS, StoreSpec, open_store, parse_store
from ._targets import load_target, pick_agent, prepare_model, replace_stores, session_to_continue, sqlite_file
from ._terminal import TerminalChat

__all__ = ["add_parser", "run"]

# a scheme, as a URL starts (postgresql://, sqlite:///); a path (C:\sessions.db too) has no "://"
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "chat",
        help="chat with an agent in the terminal, approving its pauses",
        description=(
            "Chat with an agent in the terminal: its text streams in, and each pause is shown as a card to "
            "approve, deny (with a reason), answer with JSON, edit (where the tool allows) or skip. "
            "Reads lines from stdin, so it can be scripted too."
        ),
    )
    parser.add_argument("target", metavar="TARGET", help="module:attribute naming an Agent, or a Pausepoint app")
    parser.add_argument("--agent", help="the agent's name, when TARGET is an app with several")
    parser.add_argument("--session", metavar="ID", help="continue this session")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--db", metavar="PATH", help="keep sessions in this SQLite file (instead of the agent's store)")
    where.add_argument(
        "--store",
        metavar="URL",
        help=f"keep sessions in this store (as serve --store takes it): {FORMS}",
    )
    parser.add_argument("--principal", help="who you are, for the audit trail (default: your user name)")
    parser.add_argument("--message", "-m", action="append", default=[], help="send this first (repeatable)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    agent = pick_agent(load_target(args.target), args.agent)
    if args.db is not None:  # '' too (an unset variable): refused, never the agent's own store
        if _URL.match(args.db):
            scheme = args.db.split(":", 1)[0]
            raise CliError(f"--db takes a SQLite file's path, not a URL: for a {scheme}:// store, use --store URL")
        path = sqlite_file(args.db, instead=" (--store memory: keeps sessions in memory)")
        replace_stores([agent], open_store(StoreSpec(path, "sqlite")))  # checked as --store's file is
    elif args.store is not None:
        replace_stores([agent], open_store(parse_store(args.store)))
    principal = _principal(args.principal)
    session_to_continue(args.session)
    prepare_model(agent)
    terminal = TerminalChat(agent, session_id=args.session, principal=principal)
    try:
        return asyncio.run(_chat(agent, terminal, args.message))
    except SessionNotFound as exc:
        if "agent" in exc.details:  # there is one, of another agent: say whose (as REST does)
            raise CliError(exc.message) from exc
        raise CliError(f"no session {args.session!r} in the agent's store") from exc


async def _chat(agent: Agent, terminal: TerminalChat, first_messages: list[str]) -> int:
    """The chat, once the store answered (an unreachable store is an error before any prompt)."""
    try:
        await agent.store.get_summary(terminal.chat.session_id or "")
    except StoreError as exc:
        raise CliError(f"the session store cannot be used: {exc}") from exc
    try:
        return await terminal.run(first_messages)
    finally:
        await agent.store.close()


def _principal(given: str | None) -> str:
    """Who is typing: ``--principal``, else the user's name, each checked by the rule a principal's
    name keeps (as serve's ``--token NAME=...`` is), so a name no session could record is said
    before any prompt, with where it came from — not refused at each message after it."""
    if given is not None:
        if (problem := name_problem(given)) is not None:
            raise CliError(f"--principal names who you are: {problem}")
        return given
    name, source = _user()
    if (problem := name_problem(name)) is not None:
        raise CliError(f"your user name (from {source}) names who you are by default: {problem}; "
                       "say who you are with --principal NAME")  # fmt: skip
    return name


def _user() -> tuple[str, str]:
    """The user's name and where it came from, as ``getpass.getuser`` finds it: the first of its
    environment variables set, else the system's user database ("terminal" where neither says)."""
    for variable in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        if name := os.environ.get(variable):
            return name, f"${variable}"
    try:
        return getpass.getuser(), "the system's user database"
    except (KeyError, OSError):
        return "terminal", "no user database"
