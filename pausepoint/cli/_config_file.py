"""Reading a configuration file: TOML (``tomllib``), then the schema (``_config``), each
problem reported at its key and line.

``load_config(path, env)`` returns a ``LoadedConfig``; each problem is named as ``FILE:LINE:
key.path: what is wrong`` (a key the file lacks is shown at the table that should hold it). A
file that cannot be read or is not TOML raises ``CliError``. A file that breaks the schema does
not: its problems are kept in ``LoadedConfig.problems``, and the part of the file each is in —
a principal, a tenant, a webhook, an email notifier, ``[notifiers.links]`` or
``[notifiers.slack]``, else its whole section — is left out (``LoadedConfig.broken``), so that
the checks of the other parts still run. A check that reads across parts (a webhook's tenants
against ``[tenants]``) asks ``LoadedConfig.intact`` first: it does not guess about a part left
out. The checks that need more than the file — the app's roles and agents, a store's options —
name a problem through ``LoadedConfig.problem`` in the same form, and keep going: each is kept
in ``Problems`` (``ServeSettings.problems``) and all are raised together once the app's checks
ran.
"""

from __future__ import annotations

import difflib
import json
import re
import tomllib
import types
import typing
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from ._config import ConfigFile
from ._errors import CliError, Problems
from ._toml_lines import Path, key_lines, line_of

__all__ = ["LoadedConfig", "dotted", "load_config"]

_BARE = re.compile(r"[A-Za-z0-9_-]+")


@dataclass(frozen=True)
class LoadedConfig:
    """A valid file: its ``path``, what it says (``config``) and the line of each key."""

    path: str
    config: ConfigFile
    lines: dict[Path, int]
    problems: tuple[str, ...] = ()  # the schema's, each as FILE:LINE: key.path: what is wrong
    broken: frozenset[Path] = frozenset()  # the parts of the file left out for them
    kept: Mapping[Path, tuple[int, ...]] = field(default_factory=dict)  # a list -> the file's index of each kept

    def intact(self, *path: str | int) -> bool:
        """Whether the part of the file at ``path`` (a section, a principal...) is whole: nothing
        in it, or around it, was left out for a problem of the schema."""
        return not any(part[: len(path)] == path[: len(part)] for part in self.broken)

    def index(self, path: Path, position: int) -> int:
        """The index in the file of the element at ``position`` of the list at ``path`` (elements
        left out for a problem shift the others)."""
        kept = self.kept.get(path)
        return kept[position] if kept is not None else position

    def where(self, path: Sequence[str | int]) -> str:
        """``FILE:LINE: key.path`` for a key (or where the table that would hold it is)."""
        line = line_of(self.lines, path)
        return f"{self.path}:{line}: {dotted(path)}" if line else f"{self.path}: {dotted(path)}"

    def problem(self, path: Sequence[str | int], message: str) -> CliError:
        """The error to raise for ``message`` about the key at ``path``."""
        return CliError(f"{self.where(path)}: {message}")


def load_config(path: str, env: Mapping[str, str], replaced: Collection[str] = ()) -> LoadedConfig:
    """The file at ``path``, checked against the schema with the environment ``env``; its
    ``replaced`` sections (a flag's: ``--store`` replaces ``[store]``) are left out, their
    variables not needed. Raises ``CliError`` for a file that cannot be read or is not TOML; the
    schema's problems are kept in the ``LoadedConfig`` (their parts left out of it)."""
    try:
        with open(path, "rb") as file:
            raw = file.read()
    except OSError as exc:
        raise CliError(f"cannot read the config file {path}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
        data = tomllib.loads(text)
    except UnicodeDecodeError:
        raise CliError(f"{path}: not UTF-8 text (a TOML file is UTF-8)") from None
    except tomllib.TOMLDecodeError as exc:
        raise CliError(f"{path}: not valid TOML: {exc}") from None
    lines = key_lines(text)
    for section in replaced:
        data.pop(section, None)
    try:
        return LoadedConfig(path, ConfigFile.model_validate(data, context={"env": env}), lines)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
    found = sorted(((line_of(lines, e["loc"]) or 0, _problem(e)) for e in errors), key=lambda p: p[0])
    problems = tuple(f"{path}:{line}: {what}" if line else f"{path}: {what}" for line, what in found)
    broken = frozenset(_part(e["loc"]) for e in errors)
    kept = _leave_out(data, broken)
    try:  # the other parts, as the file gives them
        config = ConfigFile.model_validate(data, context={"env": env})
    except ValidationError:  # (never seen: every part left out has a default)
        found_all = Problems(path)
        for problem in problems:
            found_all.add(CliError(problem))
        raise found_all.error() from None
    return LoadedConfig(path, config, lines, problems, broken, kept)


# The parts of the file a problem of the schema leaves out (the first that holds its key; "*"
# any name or index), else its whole section: the others are checked without them.
_PARTS: tuple[tuple[str, ...], ...] = (
    ("tenants", "*", "principals", "*"),
    ("tenants", "*"),
    ("principals", "*"),
    ("webhooks", "*"),
    ("notifiers", "email", "*"),
    ("notifiers", "links"),
    ("notifiers", "slack"),
)


def _part(loc: Sequence[str | int]) -> Path:
    """The part of the file that the key at ``loc`` is in, to be left out."""
    for part in _PARTS:
        if len(loc) >= len(part) and all(p == "*" or p == at for p, at in zip(part, loc, strict=False)):
            return tuple(loc[: len(part)])
    return tuple(loc[:1])


def _leave_out(data: dict[str, Any], parts: Collection[Path]) -> dict[Path, tuple[int, ...]]:
    """Remove ``parts`` from ``data``; returns, for each list that lost elements, the index each
    one it keeps has in the file."""
    lists: dict[Path, set[int]] = {}
    for part in filter(None, parts):
        holder: Any = data
        try:
            for key in part[:-1]:
                holder = holder[key]
        except (KeyError, IndexError, TypeError):  # (a key the schema named otherwise: its whole section)
            data.pop(str(part[0]), None)
            continue
        if isinstance(holder, list) and isinstance(part[-1], int):
            lists.setdefault(part[:-1], set()).add(part[-1])
        elif isinstance(holder, dict):
            holder.pop(part[-1], None)
    kept: dict[Path, tuple[int, ...]] = {}
    for at, gone in lists.items():
        holder = data
        for key in at:
            holder = holder.get(key) if isinstance(holder, dict) else None
        if not isinstance(holder, list):  # (left out whole)
            continue
        kept[at] = tuple(i for i in range(len(holder)) if i not in gone)
        holder[:] = [holder[i] for i in kept[at]]
    return kept


def dotted(path: Sequence[str | int]) -> str:
    """A key's path as the file writes it: ``principals.alice.roles``, ``webhooks[1].url``."""
    shown = ""
    for part in path:
        if isinstance(part, int):
            shown += f"[{part}]"
        else:
            # quoted as TOML writes a basic string (JSON's escapes are TOML's): a control
            # character shows as an escape, never as itself
            key = part if _BARE.fullmatch(part) else json.dumps(part, ensure_ascii=False)
            shown += ("." if shown else "") + key
    return shown or "(the file)"


def _problem(error: ErrorDetails) -> str:
    """What is wrong at ``error``'s key, in words (never the value: it may be a secret)."""
    path = [p for p in error["loc"] if not (isinstance(p, str) and p == "[key]")]
    kind, message = error["type"], error["msg"]
    if kind == "extra_forbidden":
        known = _known_keys(path[:-1])
        near = difflib.get_close_matches(str(path[-1]), known, n=1)
        hint = f" (did you mean {near[0]}?)" if near else f" (the keys here: {', '.join(known)})" if known else ""
        message = "unknown key" + hint
    elif kind == "missing":
        message = "required, and missing"
    elif message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    return f"{dotted(path)}: {message}"


def _known_keys(path: Sequence[str | int]) -> list[str]:
    """The keys the schema takes in the table at ``path`` (empty where it cannot tell)."""
    node: Any = ConfigFile
    for part in path:
        if isinstance(node, _ElementsOf):
            node = node.model  # ``part`` is an element's index, or a name of a table of tables
        elif isinstance(node, type) and issubclass(node, BaseModel) and part in _fields(node):
            node = _model_of(_fields(node)[part])
        else:
            return []
    return sorted(_fields(node)) if isinstance(node, type) and issubclass(node, BaseModel) else []


def _fields(model: type[BaseModel]) -> dict[str, Any]:
    return {(f.alias or name): f.annotation for name, f in model.model_fields.items()}


def _model_of(annotation: Any) -> Any:
    """The model inside ``annotation`` (through Optional, list[...], dict[str, ...], Annotated)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _model_of(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        found = [m for a in typing.get_args(annotation) if (m := _model_of(a)) is not None]
        return found[0] if found else None
    if origin in (list, dict):
        return _ElementsOf(_model_of(typing.get_args(annotation)[-1]))
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


class _ElementsOf:
    """A list or table of ``model``: the next part of a path is an index or a name."""

    def __init__(self, model: Any) -> None:
        self.model = model
