"""Where each key of a TOML file is written: the line of every table and key, by its path.

``tomllib`` parses a file into values and forgets where they came from; a configuration error
must say where to look. This reads the text once more, as TOML's own grammar lays it out —
``[table]`` and ``[[array.of.tables]]`` headers (each ``[[...]]`` a new element), ``key =``
lines with bare, quoted and dotted keys, single-line inline tables — skipping comments,
strings, and the lines inside multi-line arrays and strings. Only a file ``tomllib`` accepted
is read, so nothing here reports syntax.

``key_lines(text)`` maps paths like ``("webhooks", 0, "secret_env")`` to 1-based lines;
``line_of(lines, path)`` finds the nearest: an array's element or a key the file lacks is
shown at the key or table that holds it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["Path", "key_lines", "line_of"]

Path = tuple[str | int, ...]

_BARE = re.compile(r"[A-Za-z0-9_-]+")
_SPACE = re.compile(r"[ \t]*")


def key_lines(text: str) -> dict[Path, int]:
    """The line of every table header and key in ``text`` (a valid TOML document)."""
    found: dict[Path, int] = {}
    table: Path = ()
    arrays: dict[tuple[str, ...], int] = {}  # an array of tables' path (without indexes) -> its last index
    depth = 0  # open brackets of a value that spans lines
    closing = ""  # the delimiter that ends a multi-line string, while inside one
    for number, line in enumerate(text.splitlines(), start=1):
        if closing:
            end = line.find(closing)
            if end < 0:
                continue
            closing = ""
            line = line[end + 3 :]
            if depth == 0:
                continue
        if depth:
            depth, closing = _scan_value(line, 0, depth)
            continue
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("["):
            table = _header(stripped, arrays)
            for cut in range(1, len(table) + 1):
                found.setdefault(table[:cut], number)
            continue
        keys, at = _key(line, 0)
        if not keys or at >= len(line) or line[at] != "=":
            continue
        path = table + tuple(keys)
        for cut in range(len(table) + 1, len(path) + 1):
            found.setdefault(path[:cut], number)
        _inline_keys(line, at + 1, path, number, found)
        depth, closing = _scan_value(line, at + 1, 0)
    return found


def line_of(lines: dict[Path, int], path: Sequence[str | int]) -> int | None:
    """The line of ``path``, or of the nearest table or key holding it (None: none is written)."""
    for cut in range(len(path), 0, -1):
        found = lines.get(tuple(path[:cut]))
        if found is not None:
            return found
    return None


def _header(stripped: str, arrays: dict[tuple[str, ...], int]) -> Path:
    """The path a ``[table]`` or ``[[array]]`` header opens, with the index of each array of
    tables it passes through (``[webhooks.headers]`` after two ``[[webhooks]]`` is in the second)."""
    double = stripped.startswith("[[")
    keys, _ = _key(stripped, 2 if double else 1)
    names = tuple(keys)
    if double:
        arrays[names] = arrays.get(names, -1) + 1
        for held in [a for a in arrays if len(a) > len(names) and a[: len(names)] == names]:
            del arrays[held]  # a new element: the arrays of tables nested in the last one start again
    path: list[str | int] = []
    for cut in range(1, len(names) + 1):
        path.append(names[cut - 1])
        if names[:cut] in arrays:
            path.append(arrays[names[:cut]])
    return tuple(path)


def _key(line: str, at: int) -> tuple[list[str], int]:
    """The dotted key starting at ``at`` (after spaces), and where it ends (past the spaces
    after it). An empty list when there is none."""
    keys: list[str] = []
    while True:
        at = _SPACE.match(line, at).end()  # type: ignore[union-attr]
        if at < len(line) and line[at] in "\"'":
            quote = line[at]
            end = at + 1
            while end < len(line) and line[end] != quote:
                end += 2 if quote == '"' and line[end] == "\\" else 1
            raw = line[at + 1 : end]
            keys.append(_unescape(raw) if quote == '"' else raw)
            at = end + 1
        else:
            bare = _BARE.match(line, at)
            if bare is None:
                return keys, at
            keys.append(bare.group())
            at = bare.end()
        at = _SPACE.match(line, at).end()  # type: ignore[union-attr]
        if at >= len(line) or line[at] != ".":
            return keys, at
        at += 1


def _unescape(raw: str) -> str:
    if "\\" not in raw:
        return raw
    try:
        return raw.encode("latin-1", "backslashreplace").decode("unicode_escape")
    except UnicodeDecodeError:
        return raw


def _inline_keys(line: str, at: int, path: Path, number: int, found: dict[Path, int]) -> None:
    """The keys of an inline table (``{ a = 1, b = { c = 2 } }``) that starts at ``at``."""
    at = _SPACE.match(line, at).end()  # type: ignore[union-attr]
    if at >= len(line) or line[at] != "{":
        return
    at += 1
    while at < len(line):
        keys, at = _key(line, at)
        if not keys or at >= len(line) or line[at] != "=":
            return
        inner = path + tuple(keys)
        found.setdefault(inner, number)
        _inline_keys(line, at + 1, inner, number, found)
        at = _skip_value(line, at + 1)
        if at >= len(line) or line[at] != ",":
            return
        at += 1


def _skip_value(line: str, at: int) -> int:
    """Where the value starting at ``at`` ends (at the ``,`` or ``}`` after it)."""
    depth = 0
    while at < len(line):
        char = line[at]
        if char in "\"'":
            at = _string_end(line, at)
            continue
        if char in "[{":
            depth += 1
        elif char in "]}":
            if depth == 0:
                return at
            depth -= 1
        elif char == "," and depth == 0:
            return at
        at += 1
    return at


def _string_end(line: str, at: int) -> int:
    """Just past the one-line string starting at ``at``."""
    quote = line[at]
    end = at + 1
    while end < len(line) and line[end] != quote:
        end += 2 if quote == '"' and line[end] == "\\" else 1
    return end + 1


def _scan_value(line: str, at: int, depth: int) -> tuple[int, str]:
    """The brackets still open after this line's value, and the delimiter of a multi-line
    string it leaves open (``""`` if none)."""
    while at < len(line):
        char = line[at]
        if char == "#":
            break
        if line.startswith(('"""', "'''"), at):
            delimiter = line[at : at + 3]
            end = line.find(delimiter, at + 3)
            if end < 0:
                return depth, delimiter
            at = end + 3
            continue
        if char in "\"'":
            at = _string_end(line, at)
            continue
        if char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
        at += 1
    return max(depth, 0), ""
