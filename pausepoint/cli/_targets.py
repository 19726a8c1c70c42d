"""Finding what a command runs: ``module:attr`` targets, and the agent a chat talks to."""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from typing import Any

from ..errors import InvalidSessionId, ModelError, PausepointError
from ..runtime._agent import Agent
from ..runtime._app import Pausepoint
from ..session._ids import check_session_id
from ..stores import SessionStore
from ._errors import CliError

__all__ = [
    "load_target",
    "not_an_app",
    "pick_agent",
    "prepare_model",
    "replace_stores",
    "session_to_continue",
    "sqlite_file",
]


def load_target(target: str) -> Any:
    """The object ``module:attr`` names (``attr`` may be dotted); the current directory is importable.

    Raises ``CliError`` naming what was not found.
    """
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise CliError(f"expected module:attribute (like myapp:ai), not {target!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        value: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise CliError(f"no module named {module_name!r} (looked in {os.getcwd()} and sys.path)") from exc
        # a package the app needs and this environment lacks
        raise CliError(f"importing {module_name!r} failed{_where(exc)}: no module named {exc.name!r}") from exc
    except SyntaxError as exc:  # the file and line are the error's own
        raise CliError(f"importing {module_name!r} failed (at {exc.filename}, line {exc.lineno}): {exc.msg}") from exc
    except PausepointError as exc:  # a definition pausepoint refused (a model it does not know, say)
        raise CliError(f"importing {module_name!r} failed{_where(exc)}: {exc}") from exc
    except Exception as exc:  # the app's own code failed as it ran: named, as the ones above
        raise CliError(
            f"importing {module_name!r} failed{_where(exc)}: {type(exc).__name__}: {exc} "
            f"(python -c 'import {module_name}' shows the whole traceback)"
        ) from exc
    for part in attr.split("."):
        try:
            value = getattr(value, part)
        except AttributeError as exc:
            raise CliError(f"module {module_name!r} has no attribute {attr!r}") from exc
    return value


def _where(exc: BaseException) -> str:
    """`` (at file, line N)``: the last line of the user's code the error went through."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith(package)]
    return f" (at {frames[-1].filename}, line {frames[-1].lineno})" if frames else ""


def pick_agent(target: Any, name: str | None) -> Agent:
    """The agent ``target`` is, or the agent ``name`` of the ``Pausepoint`` it is (the only one if unnamed)."""
    if isinstance(target, Agent):
        if name is not None and name != target.name:
            raise CliError(f"the target is the agent {target.name!r}, not {name!r}")
        return target
    if not isinstance(target, Pausepoint):
        raise CliError(f"expected an Agent or a Pausepoint app, got {type(target).__name__}")
    agents = target.agents
    if not agents:
        raise CliError("the app defines no agents: define one with ai.define_agent(...) before it is used")
    if name is not None:
        if name not in agents:
            raise CliError(f"no agent named {name!r}; the app has: {', '.join(agents) or 'none'}")
        return agents[name]
    if len(agents) != 1:
        raise CliError(f"the app has {len(agents)} agents; pick one with --agent ({', '.join(agents)})")
    return next(iter(agents.values()))


def replace_stores(agents: list[Agent], store: SessionStore) -> None:
    """Give ``agents`` the store ``store`` (before any session is used: the agents cache none yet)."""
    for agent in agents:
        agent.store = store


def sqlite_file(path: str, *, instead: str = "") -> str:
    """``path``, the SQLite file ``--db`` names. An empty one (an unset variable: ``--db "$DB"``)
    or ``:memory:`` names SQLite's in-memory database, which ends with the command: a session it
    kept could not be continued (the chat's end offers ``--session``). Either is a ``CliError``
    (as ``--store ''`` is), never a chat on a store nobody meant; ``instead`` adds what else may do."""
    if path == "":
        raise CliError(f"--db is empty: give a SQLite file's path{instead}")
    if path == ":memory:":
        raise CliError(
            "--db ':memory:' is a database that ends with this command, so no --session could continue "
            f"its sessions: give a SQLite file's path{instead}"
        )
    return path


def session_to_continue(session_id: str | None) -> str | None:
    """``--session``'s id, checked before anything is printed or opened: one no session can have
    is a ``CliError`` saying why (else "no session" would hide it, as for an unknown id)."""
    if session_id is not None:
        try:
            check_session_id(session_id)
        except InvalidSessionId as exc:
            raise CliError(str(exc)) from None
    return session_id


def prepare_model(agent: Agent) -> None:
    """Check ``agent``'s model before anything is served or asked: a cloud model without its key
    (or a local model that cannot load) is an error now, not at the first message."""
    prepare = getattr(agent.model, "prepare", None)
    if not callable(prepare):
        return
    try:
        prepare()
    except ModelError as exc:
        raise CliError(f"the model {agent.model.name} cannot be used: {exc}") from exc


def not_an_app(target: str, found: Any) -> CliError:
    """The error for a ``serve`` target that is neither a ``Pausepoint`` nor an ASGI app."""
    kind = type(found).__name__
    if isinstance(found, Agent):
        return CliError(
            f"{target} is an Agent ({found.name!r}), not a Pausepoint app or an ASGI app: serve the Pausepoint "
            "it was defined on (the object whose define_agent made it, like myapp:ai)"
        )
    article = "an" if kind[:1].lower() in "aeiou" else "a"
    return CliError(f"{target} is {article} {kind}, not a Pausepoint app or an ASGI app")
