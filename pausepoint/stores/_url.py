"""A store's own option in its connection URL (PostgreSQL's ``?schema=``, Redis's ``?prefix=``),
as ``pausepoint serve --store`` reads it: taken out of the query before the driver sees it (no
option of the driver's: it would refuse it); the names PostgreSQL takes for a schema; and what
of a PostgreSQL URL asyncpg would refuse at every use or read otherwise than it says (a port past
65535 reached port modulo 65536 on uvloop, and was an ``OverflowError`` on asyncio's loop: found
by a probe) — each checked where a store is made and where a config file or a URL names one.
"""

from __future__ import annotations

import urllib.parse

__all__ = ["option_in", "postgres_url_problem", "schema_problem"]


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


# libpq's sslmode values and asyncpg's target_session_attrs (any other fails every connection)
SSLMODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")
SESSION_ATTRS = ("any", "primary", "standby", "prefer-standby", "read-write", "read-only")


def postgres_url_problem(url: str) -> str | None:
    """Why asyncpg could not use the PostgreSQL URL ``url`` as it says (None: as far as can be
    told without connecting, it can): a port that is no number from 1 to 65535 (in the host
    list, ``host:port,host:port``, or ``?port=``), an ``sslmode`` or ``target_session_attrs``
    it refuses, or one of those named twice with two values. Never names the URL (a password)."""
    parts = urllib.parse.urlsplit(url)
    ports = [_port_of(host) for host in parts.netloc.rpartition("@")[2].split(",")]
    said: dict[str, str] = {}
    for name, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True):
        if name == "port":
            ports += value.split(",")
        if name in ("sslmode", "target_session_attrs", "port") and said.setdefault(name, value) != value:
            return f"the URL names {name} twice, {said[name][:40]!r} and {value[:40]!r}: name it once"
        if name == "sslmode" and value.replace("_", "-") not in SSLMODES:
            return f"a PostgreSQL URL's sslmode is one of {', '.join(SSLMODES)}, not {value[:40]!r}"
        if name == "target_session_attrs" and value not in SESSION_ATTRS:
            return f"a PostgreSQL URL's target_session_attrs is one of {', '.join(SESSION_ATTRS)}, not {value[:40]!r}"
    for port in ports:
        if port and not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
            return f"a PostgreSQL URL's port is a number from 1 to 65535, not {port[:40]!r}"
    return None


def _port_of(host: str) -> str:
    """The port of one ``host[:port]`` of a URL's host list (``[::1]:5432`` too); "" for none."""
    if host.startswith("["):
        after = host.partition("]")[2]
        return after[1:] if after.startswith(":") else ""
    return host.rpartition(":")[2] if ":" in host else ""
