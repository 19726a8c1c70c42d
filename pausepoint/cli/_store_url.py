"""The store ``serve`` and ``chat`` use, from ``--store URL`` or the config file's ``[store]``:
a URL with the backend's options (``parse_store``, then ``open_store``; ``store_from_url`` does
both).

Every process of a deployment must share the same store *and* the same PostgreSQL schema or
Redis key prefix (docs/deploy.md), so the URL carries them as query parameters that pausepoint
takes out before the driver sees the URL::

    postgresql://db.internal/pausepoint?schema=payments     PostgresSessionStore(url, schema=...)
    redis://cache.internal:6379/0?prefix=payments:           RedisSessionStore(url, prefix=...)
    sqlite:///sessions.db?synchronous=NORMAL                 SqliteSessionStore(path, synchronous=...)

Other query parameters stay in the URL for the driver (``sslmode=require``); a SQLite URL has
no driver to take them (the rest of it is a file's path), so it takes none. An option the
backend does not take is refused, naming it (one the Redis driver does not know too: it would
fail at the first use, not here).
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass
from typing import Literal, assert_never
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..stores import InMemorySessionStore, SessionStore, SqliteSessionStore
from ..stores._url import postgres_url_problem, schema_problem
from ..webhooks import value_problem
from ._errors import CliError

__all__ = [
    "FORMS",
    "OPTIONS",
    "StoreSpec",
    "backend_of",
    "check_store",
    "check_trimmed",
    "open_store",
    "parse_store",
    "redacted",
    "store_from_url",
    "synchronous_level",
]

Backend = Literal["sqlite", "postgresql", "redis", "memory"]

#: each option and the backend that takes it
OPTIONS: dict[str, Backend] = {"schema": "postgresql", "prefix": "redis", "synchronous": "sqlite"}

#: the URLs ``--store`` takes, as ``--help`` says it
FORMS = (
    "sqlite:///file.db, postgresql://..., redis://..., memory:; options in the query: ?schema=NAME (PostgreSQL), "
    "?prefix=KEYS: (Redis), ?synchronous=NORMAL (SQLite)"
)


@dataclass(frozen=True)
class StoreSpec:
    """A store to open: its URL (without pausepoint's options), the backend, and the options."""

    url: str
    backend: Backend
    schema: str | None = None
    prefix: str | None = None
    synchronous: Literal["FULL", "NORMAL"] | None = None

    def describe(self) -> str:
        """The store as ``config check`` and the banner show it (never a password)."""
        options = [f"{name} {value!r}" for name in OPTIONS if (value := getattr(self, name)) is not None]
        return redacted(self.url) + (f" ({', '.join(options)})" if options else "")


def parse_store(text: str, what: str = "--store", **given: str | None) -> StoreSpec:
    """The store ``text`` names, with the options in its query and those ``given`` (the config
    file's keys; saying one in both places is refused). Raises ``CliError`` naming ``what``."""
    check_trimmed(text, what)
    backend = backend_of(text)
    if backend == "sqlite" and "://" not in text and text.lower().startswith("sqlite:"):
        # a URL without its slashes: not a file named "sqlite:name.db" in the working directory
        named = text.split(":", 1)[1].lstrip("/")
        raise CliError(f"{what}: {text!r} lacks the slashes of a URL: use sqlite:///{named}")
    url, options = text, {k: v for k, v in given.items() if v is not None}
    if backend in ("sqlite", "postgresql", "redis") and "?" in text:
        parts = urlsplit(text)
        kept = []
        in_url: set[str] = set()
        for name, value in parse_qsl(parts.query, keep_blank_values=True):
            if name not in OPTIONS:
                kept.append((name, value))
            elif name in options:
                where = "in the URL" if name in in_url else "in the URL and beside it"
                raise CliError(f"{what}: {name} is given twice ({where}): say it once")
            else:
                options[name] = value
                in_url.add(name)
        if backend == "sqlite":
            if kept:  # SQLite has no driver URL: the rest of the URL is a file's path
                raise CliError(f"{what}: a sqlite store takes no {kept[0][0]!r} option (its one option: synchronous)")
            url = text.split("?", 1)[0]  # as written: urlunsplit would make sqlite:////abs relative
        else:
            url = urlunsplit(parts._replace(query=urlencode(kept)))
    for name, value in options.items():
        if OPTIONS.get(name) != backend:
            takes = ", ".join(f"{o} ({b})" for o, b in OPTIONS.items())
            raise CliError(f"{what}: a {backend} store takes no {name!r} option (the options: {takes})")
        if not value:
            raise CliError(f"{what}: {name} is empty")
    if backend == "sqlite" and "://" in url:
        rest = url.split("://", 1)[1]
        if not rest.lstrip("/"):
            raise CliError(f"{what}: no file in {url!r}: use sqlite:///path/to/file.db")  # as serve would
        if not rest.startswith("/"):  # sqlite://name.db: a host, in a URL (a file here, until now)
            raise CliError(
                f"{what}: {url!r} has two slashes: use sqlite:///{rest} (relative to the working directory) "
                f"or sqlite:////abs/path/{rest.rsplit('/', 1)[-1]} (absolute)"
            )
    if backend == "memory" and text.lower() != "memory:":
        raise CliError(f"{what}: memory: takes nothing after it (sessions die with the process), not {text!r}")
    try:
        synchronous = synchronous_level(options.get("synchronous"))
    except ValueError as exc:
        raise CliError(f"{what}: synchronous {exc}") from None
    return StoreSpec(url, backend, schema=options.get("schema"), prefix=options.get("prefix"), synchronous=synchronous)


def check_trimmed(text: str, what: str) -> None:
    """Raises ``CliError`` naming ``what`` for a URL with white space at either end (a variable
    read from a file's line, a quoted flag) or a control character: taken as it is, it names
    another store than the one meant (for SQLite, a file whose name ends in it), and the
    processes whose URL differs so would each work alone. The URL is not shown (it may hold a
    password)."""
    why = value_problem(text, ascii_only=False)
    if why is not None:
        raise CliError(f"{what}: the store's URL {why}: it would name another store than the one meant; remove it")


def synchronous_level(value: object) -> Literal["FULL", "NORMAL"] | None:
    """A SQLite store's ``synchronous`` as pausepoint takes it wherever it is written (a URL's
    query, the config file's key): FULL or NORMAL in any case. Raises ``ValueError`` for any
    other value."""
    if value is None:
        return None
    level = value.upper() if isinstance(value, str) else None
    if level == "FULL":
        return "FULL"
    if level == "NORMAL":
        return "NORMAL"
    raise ValueError(f"must be FULL or NORMAL, not {value!r}")


def store_from_url(url: str) -> SessionStore:
    """The session store a URL names, as ``--store`` takes it: ``sqlite:///relative.db``,
    ``sqlite:////absolute/path.db`` (or a plain path ending in ``.db``/``.sqlite``),
    ``postgresql://...``, ``redis://...`` / ``rediss://...`` or ``memory:`` (sessions die with
    the process), with the backend's options in the query (``?schema=``, ``?prefix=``,
    ``?synchronous=``). No connection is made until the store is used. Raises ``CliError`` for
    any other URL, an option the backend does not take, and a missing driver (naming the extra)."""
    return open_store(parse_store(url, "the store URL"))


def check_store(spec: StoreSpec) -> None:
    """Raises ``CliError`` when the store's driver is missing (naming the extra), or does not
    take the URL; opens nothing."""
    try:
        if spec.backend == "postgresql":
            import asyncpg  # noqa: F401
        elif spec.backend == "redis":
            import redis  # noqa: F401
    except ImportError:
        extra = "postgres" if spec.backend == "postgresql" else "redis"
        raise CliError(f"a {spec.backend} store needs its driver: pip install 'pausepoint[{extra}]'") from None
    if spec.backend == "postgresql" and spec.schema is not None and (problem := schema_problem(spec.schema)):
        raise CliError(f"the store's schema {spec.schema[:80]!r} cannot be used: {problem}")
    if spec.backend == "redis":
        database = urlsplit(spec.url).path.strip("/")
        # the driver would use 0 for words; Redis refuses a number past a 32-bit one at every use
        digits = database.lstrip("0") or "0"
        if database and not (database.isascii() and database.isdigit() and len(digits) <= 10 and int(digits) < 2**31):
            raise CliError(f"a Redis URL's path is its database's number (redis://host:6379/0), not {database[:40]!r}")
        _check_redis_url(spec.url)
    if spec.backend == "postgresql":
        _check_postgres_query(spec.url)
    if spec.backend == "sqlite":
        path = os.path.abspath(_sqlite_path(spec.url))
        if os.path.isdir(path):
            raise CliError(f"{path} is a folder, not a SQLite file: name a file in it, like {path}/sessions.db")
        folder = os.path.dirname(path)
        if not os.path.isdir(folder):  # SQLite makes the file, not its folder: every request would fail
            raise CliError(
                f"the SQLite file's folder {folder} does not exist (sqlite:///name.db is relative to the working "
                f"directory, {os.getcwd()}; sqlite:////abs/name.db is absolute)"
            )


def _check_redis_url(url: str) -> None:
    """The Redis driver reads the URL's query when the store is made, but passes an option it
    does not know on to each connection it makes, which fails then (at the first use): make one
    now (making one opens nothing) so that such an option is refused here, naming it."""
    from redis.asyncio import ConnectionPool

    try:
        pool = ConnectionPool.from_url(url)
        pool.connection_class(**pool.connection_kwargs)
    except TypeError as exc:
        unknown = re.search(r"keyword argument '([^']*)'", str(exc))
        if unknown is None:
            raise
        raise CliError(
            f"the Redis driver takes no {unknown[1]!r} option in the store's URL (pausepoint's: prefix)"
        ) from None
    except ValueError as exc:
        raise CliError(f"the Redis driver refuses the store's URL: {exc}") from None
    database = pool.connection_kwargs.get("db", 0)  # ?db= in the query names it before the path
    if not isinstance(database, int) or not 0 <= database < 2**31:
        raise CliError(f"a Redis database's number (?db= or the URL's path) is 0 to {2**31 - 1}, not {database!r}")


def _check_postgres_query(url: str) -> None:
    """A PostgreSQL URL, as far as it can be judged without connecting: what asyncpg would
    refuse at every connection or read otherwise (``stores._url.postgres_url_problem``: ports,
    ``sslmode``, ``target_session_attrs``); and asyncpg sends any parameter it does not know to
    the server as a setting, which the server refuses when it names none (a misspelt
    ``schema``: every request would fail, not this check)."""
    if (problem := postgres_url_problem(url)) is not None:
        raise CliError(problem)
    for name, _ in parse_qsl(urlsplit(url).query, keep_blank_values=True):
        near = difflib.get_close_matches(name, [o for o, backend in OPTIONS.items() if backend == "postgresql"], 1, 0.7)
        if near:
            raise CliError(f"the store's URL names {name[:40]!r}: did you mean pausepoint's option {near[0]!r}?")


def open_store(spec: StoreSpec) -> SessionStore:
    """The store ``spec`` names (no connection is made until it is used). Raises ``CliError``
    as ``check_store`` does."""
    check_store(spec)
    match spec.backend:
        case "sqlite":
            path = _sqlite_path(spec.url)
            if spec.synchronous is None:
                return SqliteSessionStore(path)
            return SqliteSessionStore(path, synchronous=spec.synchronous)
        case "postgresql":
            from ..stores.postgres import PostgresSessionStore

            if spec.schema is None:
                return PostgresSessionStore(spec.url)
            return PostgresSessionStore(spec.url, schema=spec.schema)
        case "redis":
            from ..stores.redis import RedisSessionStore

            if spec.prefix is None:
                return RedisSessionStore(spec.url)
            return RedisSessionStore(spec.url, prefix=spec.prefix)
        case "memory":
            return InMemorySessionStore()
        case _:
            assert_never(spec.backend)


def _sqlite_path(url: str) -> str:
    """The file a SQLite URL (without its query) or a plain path names."""
    if "://" not in url:
        return url
    path = url.split("://", 1)[1]
    path = path[1:] if path.startswith("/") else path  # sqlite:///rel.db -> rel.db; sqlite:////abs -> /abs
    if not path:
        raise CliError(f"no file in {url!r}: use sqlite:///path/to/file.db")
    return path


def redacted(url: str) -> str:
    """``url`` with its password, if any, shown as ``****``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:****@{host}"))


def backend_of(url: str) -> Backend:
    """The backend a store URL names. Raises ``CliError`` for a URL no backend takes."""
    scheme = urlsplit(url).scheme.lower() if "://" in url or url.startswith("memory:") else ""
    if scheme == "sqlite" or (scheme == "" and url.endswith((".db", ".sqlite", ".sqlite3"))):
        return "sqlite"
    if scheme in ("postgres", "postgresql"):
        return "postgresql"
    if scheme in ("redis", "rediss"):
        return "redis"
    if scheme == "memory":
        return "memory"
    raise CliError(
        f"unknown store URL {redacted(url)!r}: use sqlite:///file.db, postgresql://..., redis://... or memory:"
    )
