"""Reading a configuration file: TOML (``tomllib``), then the schema (``_config``), each
problem reported at its key and line.

``load_config(path, env)`` returns a ``LoadedConfig`` or raises ``CliError`` listing every
problem, one a line, as ``FILE:LINE: key.path: what is wrong`` (a key the file lacks is shown
at the table that should hold it). The checks that need more than the file — the app's roles
and agents, a store's options — name a problem through ``LoadedConfig.problem`` in the same
form, and keep going: each is kept in ``Problems`` (``ServeSettings.problems``) and all are
raised together once the app's checks ran.
"""

from __future__ import annotations

import difflib
import re
import tomllib
import types
import typing
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
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
    variables not needed. Raises ``CliError`` for a file that cannot be read, is not TOML, or
    breaks the schema."""
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
        config = ConfigFile.model_validate(data, context={"env": env})
    except ValidationError as exc:
        found = sorted(
            ((line_of(lines, e["loc"]) or 0, _problem(e)) for e in exc.errors(include_url=False)),
            key=lambda p: p[0],
        )
        problems = Problems(path)
        for line, what in found:
            problems.add(CliError(f"{path}:{line}: {what}" if line else f"{path}: {what}"))
        raise problems.error() from None
    return LoadedConfig(path, config, lines)


def dotted(path: Sequence[str | int]) -> str:
    """A key's path as the file writes it: ``principals.alice.roles``, ``webhooks[1].url``."""
    shown = ""
    for part in path:
        if isinstance(part, int):
            shown += f"[{part}]"
        else:
            key = part if _BARE.fullmatch(part) else '"' + part.replace("\\", "\\\\").replace('"', '\\"') + '"'
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
