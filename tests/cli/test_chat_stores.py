"""``pausepoint chat --store URL`` takes the URLs ``serve --store`` takes, with the same meaning:
the backend's options in the query — a SQLite file's durability, a PostgreSQL schema, a Redis key
prefix (on real servers: ``PAUSEPOINT_TEST_POSTGRES_URL`` and ``PAUSEPOINT_TEST_REDIS_URL``;
without them those tests skip). An option a store does not take, or a URL given to ``--db``,
is a usage error before any prompt."""

from __future__ import annotations

import re

import pytest

from pausepoint.stores import SqliteSessionStore
from tests.cli.config_files import pausepoint
from tests.stores.backends import make_backend

BANK = "tests.cli.apps:bank_agent"


def with_option(url: str, name: str, value: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{name}={value}"


def session_of(output: str) -> str:
    match = re.search(r"--session (\S+)", output)
    assert match, output
    return match[1]


async def test_chat_on_a_sqlite_url_with_its_durability(tmp_path):
    db = tmp_path / "chat.db"
    url = f"sqlite:///{db}?synchronous=NORMAL"
    done = pausepoint("chat", BANK, "--store", url, "-m", "Hello", "--principal", "carol")
    assert done.returncode == 0, done.stderr
    store = SqliteSessionStore(db)  # the file the URL names (its query is no part of the path)
    [summary] = await store.list_sessions()
    assert (summary.session_id, summary.owner) == (session_of(done.stdout), "carol")
    await store.close()


@pytest.mark.parametrize(("backend_name", "option"), [("postgres", "schema"), ("redis", "prefix")])
async def test_chat_keeps_its_sessions_where_the_url_says(backend_name, option, tmp_path):
    """The schema (PostgreSQL) or key prefix (Redis) in the URL is the store's, as for serve:
    another one than the default, which the test's own store on that place then finds."""
    backend = make_backend(backend_name, tmp_path)  # a fresh schema or prefix, removed at the end
    place = backend.spec()[option]
    try:
        url = with_option(backend.spec()["url"], option, place)
        done = pausepoint("chat", BANK, "--store", url, "-m", "Hello", "--principal", "carol")
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
        store = await backend.open()
        [summary] = await store.list_sessions()
        assert (summary.session_id, summary.owner) == (session_of(done.stdout), "carol")
        await store.close()
    finally:
        await backend.cleanup()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--store", "redis://127.0.0.1:1/0?schema=x"],
         "--store: a redis store takes no 'schema' option (the options: schema (postgresql), prefix (redis)"),
        (["--store", "postgresql://u@127.0.0.1:1/db?prefix=x:"],
         "--store: a postgresql store takes no 'prefix' option"),
        (["--store", "redis://127.0.0.1:1/0?prefix="], "--store: prefix is empty"),
        (["--store", "redis://127.0.0.1:1/0?prefix=a:&bogus=1"],
         "the Redis driver takes no 'bogus' option in the store's URL (pausepoint's: prefix)"),
        (["--store", "redis://127.0.0.1:1/0?socket_timeout=soon"],
         "the Redis driver refuses the store's URL: Invalid value for 'socket_timeout'"),
        (["--store", "sqlite:///chat.db?cache=shared"], "--store: a sqlite store takes no 'cache' option"),
        (["--store", "sqlite:///chat.db?synchronous=OFF"], "--store: synchronous must be FULL or NORMAL, not 'OFF'"),
        (["--db", "postgresql://postgres@127.0.0.1:1/pp"],
         "--db takes a SQLite file's path, not a URL: for a postgresql:// store, use --store URL"),
        (["--db", "sqlite:///chat.db"], "--db takes a SQLite file's path, not a URL: for a sqlite:// store"),
    ],
)  # fmt: skip
def test_a_store_option_or_url_it_cannot_take_is_a_usage_error(args, message):
    done = pausepoint("chat", BANK, *args, "-m", "Hello")
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"pausepoint chat: error: {message}" in done.stderr
    assert "Traceback" not in done.stderr
    assert "you>" not in done.stdout and "--session" not in done.stdout


def test_db_in_a_folder_that_does_not_exist_says_what_to_fix_as_store_does(tmp_path):
    """Found by a probe: ``--db nodir/x.db`` said "unable to open database file" naming the file's
    last part only, where ``--store sqlite:///nodir/x.db`` names the missing folder."""
    missing = tmp_path / "nodir" / "x.db"
    said = []
    for args in (["--db", str(missing)], ["--store", f"sqlite:///{missing}"]):
        done = pausepoint("chat", BANK, *args, "-m", "Hello")
        assert done.returncode == 2, done.stdout + done.stderr
        assert "you>" not in done.stdout and "Traceback" not in done.stderr
        said.append(done.stderr)
    assert said[0] == said[1]
    assert f"pausepoint chat: error: the SQLite file's folder {tmp_path / 'nodir'} does not exist" in said[0]
    done = pausepoint("chat", BANK, "--db", str(tmp_path), "-m", "Hello")  # a folder, not a file
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"pausepoint chat: error: {tmp_path} is a folder, not a SQLite file" in done.stderr
    assert "you>" not in done.stdout
