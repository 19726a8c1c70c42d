"""A store's own option in its connection URL (PostgreSQL's ``?schema=``, Redis's ``?prefix=``),
as ``pausepoint serve --store`` reads it: taken out of the query before the driver sees it (no
option of the driver's: it would refuse it); and the names PostgreSQL takes for a schema, checked
where a store is made and where a config file or a URL names one (no driver needed to say so).
"""

from __future__ import annotations

import urllib.parse

__all__ = ["option_in", "schema_problem"]


def option_in(url: str, name: str, given: str | None) -> tuple[str, str | None]:
    """``url`` without ``name=`` in its query, and the option's value: the one the URL names,
    unless ``given`` (the keyword) names another (``ValueError``)."""
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    named = [value for key, value in query if key == name]
    if not named:
        return url, given
    if len(set(named)) > 1 or (given is not None and given != named[0]):
        raise ValueError(f"the URL names {name} {named[-1]!r}, and {name}={given!r} another: name one")
    rest = urllib.parse.urlencode([(key, value) for key, value in query if key != name])
    return urllib.parse.urlunsplit(parts._replace(query=rest)), named[0]


def schema_problem(name: str) -> str | None:
    """Why ``name`` cannot name the store's schema (None: it can): PostgreSQL takes 1 to 63
    bytes of UTF-8 (a longer name is cut, and two schemas would be one), without NUL."""
    size = len(name.encode("utf-8", "surrogatepass"))
    if not 1 <= size <= 63:
        return f"a PostgreSQL schema's name has 1 to 63 bytes in UTF-8, not {size}"
    if "\x00" in name:
        return "a PostgreSQL schema's name holds no NUL character"
    return None
