"""``--help`` everywhere; bad usage exits 2 with a message naming the problem."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from pausepoint import Pausepoint
from pausepoint.cli import CliError, main, store_from_url
from pausepoint.errors import StoreError
from pausepoint.stores import InMemorySessionStore, SqliteSessionStore
from pausepoint.testing import ScriptedModel
from tests.cli.conftest import ROOT, cli_env


@pytest.mark.parametrize("command", [[], ["demo"], ["serve"], ["chat"]])
def test_help_for_every_command(command, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([*command, "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: pausepoint {' '.join(command)}".rstrip())
    for word in {"": ["demo", "serve", "chat"], "demo": ["--model", "--terminal", "--no-open", "--db", "--port"],
                 "serve": ["TARGET", "--store", "--token", "--host"],
                 "chat": ["TARGET", "--agent", "--session", "--db", "--store"]}[" ".join(command)]:  # fmt: skip
        assert word in out


def test_version_names_the_installed_distribution(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"pausepoint {version('pausepoint')}"


def test_the_entry_point_and_python_dash_m_run_the_same_command():
    script = Path(sys.executable).with_name("pausepoint")
    for argv in ([str(script)], [sys.executable, "-m", "pausepoint"]):
        done = subprocess.run([*argv, "--help"], capture_output=True, text=True, cwd=ROOT, env=cli_env(), timeout=60)
        assert done.returncode == 0 and "{demo,serve,chat}" not in done.stdout and "demo" in done.stdout


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "the following arguments are required: <command>"),
        (["fly"], "invalid choice: 'fly'"),
        (["serve"], "the following arguments are required: TARGET"),
        (["serve", "no_colon"], "expected module:attribute (like myapp:ai), not 'no_colon'"),
        (["serve", "no_such_module_here:app"], "no module named 'no_such_module_here'"),
        (["serve", "tests.cli.apps:missing"], "module 'tests.cli.apps' has no attribute 'missing'"),
        (["serve", "tests.cli.apps:bank_ai", "--token", "alice"], "--token wants NAME=TOKEN: no '='"),
        # a malformed flag never shows its value: it may be a token (found by a probe)
        (["serve", "tests.cli.apps:bank_ai", "--token", "=s3cret-t0ken"], "--token wants NAME=TOKEN: no NAME before"),
        (["serve", "tests.cli.apps:pay_ai", "--approver", ":s3cret-t0ken"], "wants NAME:TOKEN or NAME:TOKEN:ROLE"),
        (["serve", "tests.cli.apps:bank_ai", "--store", "ftp://x"], "unknown store URL 'ftp://x'"),
        # found by a probe: an empty URL ("$DATABASE_URL" unset) served from the app's own store, in memory
        (["serve", "tests.cli.apps:bank_ai", "--store", ""], "unknown store URL ''"),
        (["chat", "tests.cli.apps:bank_agent", "--store", ""], "unknown store URL ''"),
        (["serve", "tests.cli.apps:asgi", "--store", ""], "--store, --token and --no-console apply to a Pausepoint"),
        # ... a host where a file was meant, made ./other.db; memory:x and a database named in words were taken
        (["serve", "tests.cli.apps:bank_ai", "--store", "sqlite://other.db"], "use sqlite:///other.db (relative"),
        (["serve", "tests.cli.apps:bank_ai", "--store", "memory:x"], "memory: takes nothing after it"),
        # found by a second probe: a file named "sqlite:ok.db" made; a schema PostgreSQL cannot take was a
        # traceback at the first use (config check said ok); an option twice in the URL said "beside it"
        (
            ["serve", "tests.cli.apps:bank_ai", "--store", "sqlite:ok.db"],
            "lacks the slashes of a URL: use sqlite:///ok.db",
        ),
        (
            ["serve", "tests.cli.apps:bank_ai", "--store", f"postgresql://127.0.0.1:1/db?schema={'x' * 70}"],
            "a PostgreSQL schema's name has 1 to 63 bytes in UTF-8, not 70",
        ),
        (
            ["serve", "tests.cli.apps:bank_ai", "--store", "postgresql://127.0.0.1:1/db?schema=%00"],
            "a PostgreSQL schema's name holds no NUL character",
        ),
        (
            ["serve", "tests.cli.apps:bank_ai", "--store", "postgresql://127.0.0.1:1/db?schema=a&schema=b"],
            "schema is given twice (in the URL): say it once",
        ),
        (
            ["serve", "tests.cli.apps:bank_ai", "--store", "redis://127.0.0.1:1/notanumber"],
            "a Redis URL's path is its database's number (redis://host:6379/0), not 'notanumber'",
        ),
        (  # found by a second probe: served, /readyz 503 for ever, a traceback every 30 s
            ["serve", "tests.cli.apps:bank_ai", "--store", "redis://127.0.0.1:1/99999999999999999999"],
            "a Redis URL's path is its database's number (redis://host:6379/0), not '99999999999999999999'",
        ),
        (  # found by a probe: the query's db= passed the path's check; served, /readyz 503 for ever
            ["serve", "tests.cli.apps:bank_ai", "--store", "redis://127.0.0.1:1/0?db=4294967296"],
            "a Redis database's number (?db= or the URL's path) is 0 to 2147483647, not 4294967296",
        ),
        (  # the same probe: asyncpg refuses the mode at every connection
            ["serve", "tests.cli.apps:bank_ai", "--store", "postgresql://127.0.0.1:1/db?sslmode=bogus"],
            "a PostgreSQL URL's sslmode is one of disable, allow, prefer, require, verify-ca, verify-full, not 'bogus'",
        ),
        (  # found by a probe: on uvloop asyncpg reached port 99999 - 65536; on asyncio's loop, a 500 a request
            ["serve", "tests.cli.apps:bank_ai", "--store", "postgresql://127.0.0.1:99999/db"],
            "a PostgreSQL URL's port is a number from 1 to 65535, not '99999'",
        ),
        (
            ["serve", "tests.cli.apps:bank_ai", "--store", "postgresql://u:pw@h1:5432,[::1]:70000/db"],
            "a PostgreSQL URL's port is a number from 1 to 65535, not '70000'",
        ),
        (
            ["serve", "tests.cli.apps:bank_ai", "--store", "postgresql:///db?port=65536"],
            "a PostgreSQL URL's port is a number from 1 to 65535, not '65536'",
        ),
        (  # the same probe: asyncpg refuses it at every connection, naming a Python object's repr
            ["serve", "tests.cli.apps:bank_ai", "--store", "postgresql://127.0.0.1:1/db?target_session_attrs=foo"],
            "a PostgreSQL URL's target_session_attrs is one of any, primary, standby, prefer-standby, read-write, "
            "read-only, not 'foo'",
        ),
        (
            ["serve", "tests.cli.apps:bank_ai", "--store", "postgresql://127.0.0.1:1/db?sslmode=require&sslmode=disable"],
            "the URL names sslmode twice, 'require' and 'disable': name it once",
        ),
        (  # and asyncpg sends a misspelt option to the server as a setting it refuses
            ["serve", "tests.cli.apps:bank_ai", "--store", "postgresql://127.0.0.1:1/db?schma=payments"],
            "the store's URL names 'schma': did you mean pausepoint's option 'schema'?",
        ),
        (
            ["serve", "tests.cli.apps:bank_ai", "--store", "mysql://u:hunter2@h/x"],
            "unknown store URL 'mysql://u:****@h/x'",
        ),
        (["serve", "tests.cli.apps:pay_ai", "--approver", "alice"], "--approver wants NAME:TOKEN or NAME:TOKEN:ROLE"),
        (["serve", "tests.cli.apps:pay_ai", "--approver", "alice:a:tresury"], "defines the role(s) tresury"),
        (["serve", "tests.cli.apps:pay_ai", "--approver", "alice:a:treasury"], "needs 2 approvals, but only 1"),
        (["serve", "tests.cli.apps:pay_ai", "--token", "a=t", "--approver", "b:t"], "the token of 'b' is given twice"),
        # found by a probe: the last token taken, the first refused (401), and nothing said
        (["serve", "tests.cli.apps:bank_ai", "--token", "a=one", "--token", "a=two"], "--token a is given twice"),
        (
            ["serve", "tests.cli.apps:pay_ai", "--token", "a=one", "--approver", "a:two"],
            "--token a and --approver a give two tokens: give a one",
        ),
        (["serve", "tests.cli.apps:asgi", "--token", "a=b"], "--store, --token and --no-console apply to a Pausepoint"),
        (["serve", "tests.cli.apps:asgi", "--approver", "a:b"], "(so do --approver, --metrics, --operator and --mcp)"),
        (["serve", "tests.cli.apps:asgi", "--operator", "a"], "(so do --approver, --metrics, --operator and --mcp)"),
        (["serve", "tests.cli.apps:bank_ai", "--port", "eighty"], "argument --port: invalid int value"),
        (["serve", "tests.cli.apps:empty_ai", "--port", "0"], "the app defines no agents"),
        (["serve", "tests.cli.apps:cloud_ai", "--port", "0"], "the model openai/gpt-4o-mini cannot be used"),
        (["serve", "tests.cli.apps:empty_ai", "--mcp-stdio", "alice"], "the app defines no agents"),
        (["serve", "tests.cli.apps:bank_ai", "--mcp-stdio", " alice"], "--mcp-stdio ' alice': ' alice' is not a name"),
        (["chat", "tests.cli.apps:bank_ai", "--agent", "nobody"], "no agent named 'nobody'; the app has: bankingAgent"),
        (["chat", "tests.cli.apps:bank_agent", "--db", "a.db", "--store", "memory:"], "not allowed with argument"),
        (["chat", "pausepoint.cli:main"], "expected an Agent or a Pausepoint app, got function"),
        # an agent where its app is wanted: says which to serve (found by a probe: "is a Agent")
        (["serve", "tests.cli.apps:bank_agent"], "tests.cli.apps:bank_agent is an Agent ('bankingAgent'), not a"),
        (["serve", "tests.cli.apps:TOKENS"], "tests.cli.apps:TOKENS is a dict, not a Pausepoint app"),
        (["demo", "--model", "openai/gpt-4o-mini"], "needs an API key: set OPENAI_API_KEY"),
        (["demo", "--model", "anthropic/claude"], "needs an API key: set ANTHROPIC_API_KEY"),
        (["demo", "--model", "googleai/gemini"], "set GEMINI_API_KEY or GOOGLE_API_KEY"),
        (["demo", "--model", "gpt-5"], "unknown model 'gpt-5'"),
        (["demo", "--model", "scripted", "--session", "s1"], "--session continues a chat in the terminal"),
        (["chat", "tests.cli.apps:bank_agent", "--principal", " "], "--principal names who you are"),
        # as serve's --token names are checked (found by a probe: a line break forged audit lines)
        (["chat", "tests.cli.apps:bank_agent", "--principal", "alice\nApproved by: bob"], "is not a name: 1 to 128"),
        # pausepoint refusing the app as it is imported: where, and why (not a traceback, exit 1)
        (["serve", "tests.cli.refused_app:ai"], "importing 'tests.cli.refused_app' failed (at "),
        (["chat", "tests.cli.refused_app:agent"], "refused_app.py, line 6): no model 'nosuchprovider/x'"),
        (["serve", "tests.cli.bad_script_app:ai"], "bad_script_app.py, line 7): step 0 of the script is not a step"),
    ],
)
def test_bad_usage_exits_2_with_a_clear_message(argv, message, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    try:
        status = main(argv)
    except SystemExit as exit_:  # argparse's own errors
        status = exit_.code
    assert status == 2
    err = capsys.readouterr().err
    assert message in err and "s3cret-t0ken" not in err


def test_a_taken_port_is_a_clear_error(capsys, tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        status = main(["demo", "--model", "scripted", "--port", str(port), "--no-open", "--db", str(tmp_path / "d.db")])
    assert status == 2
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err


def test_store_from_url(tmp_path):
    relative = store_from_url("sqlite:///sessions.db")
    absolute = store_from_url(f"sqlite:///{tmp_path}/s.db")
    assert isinstance(relative, SqliteSessionStore) and relative.path == "sessions.db"
    assert isinstance(absolute, SqliteSessionStore) and absolute.path == f"{tmp_path}/s.db"
    assert isinstance(store_from_url("memory:"), InMemorySessionStore)
    assert type(store_from_url("postgresql://u@127.0.0.1/db")).__name__ == "PostgresSessionStore"
    assert type(store_from_url("redis://127.0.0.1:6379/0")).__name__ == "RedisSessionStore"


def test_a_sqlite_url_with_options_keeps_its_absolute_path_and_takes_no_other_option(tmp_path):
    store = store_from_url(f"sqlite:///{tmp_path}/s.db?synchronous=NORMAL")
    assert isinstance(store, SqliteSessionStore)
    assert (store.path, store.synchronous) == (f"{tmp_path}/s.db", "NORMAL")  # not relative to the cwd
    relative = store_from_url("sqlite:///s.db?synchronous=normal")
    assert isinstance(relative, SqliteSessionStore) and relative.path == "s.db"
    with pytest.raises(CliError, match="a sqlite store takes no 'cache' option"):
        store_from_url(f"sqlite:///{tmp_path}/y.db?cache=shared")  # not a file named "y.db?cache=shared"


def test_store_from_url_takes_the_backends_options():
    """The URLs ``--store`` takes, options and all (what ``serve`` and ``chat`` open)."""
    postgres = store_from_url("postgresql://u@127.0.0.1/db?schema=payments&sslmode=disable")
    assert (type(postgres).__name__, getattr(postgres, "schema", None)) == ("PostgresSessionStore", "payments")
    redis = store_from_url("redis://127.0.0.1:6379/0?prefix=payments:")
    assert (type(redis).__name__, getattr(redis, "prefix", None)) == ("RedisSessionStore", "payments:")
    with pytest.raises(CliError, match="a redis store takes no 'schema' option"):
        store_from_url("redis://127.0.0.1:6379/0?schema=payments")


def test_a_file_that_is_no_database_is_a_clear_error_everywhere(tmp_path, capsys):
    """Found by a probe: sqlite3.DatabaseError, a traceback (exit 1) from the CLI and a 500 from
    the server; the Python API raises StoreError, the CLI exits 2 saying why."""
    junk = tmp_path / "junk.db"
    junk.write_text("not a database")
    for argv in (
        ["demo", "--terminal", "--model", "scripted", "--db", str(junk)],
        ["demo", "--terminal", "--model", "scripted", "--db", str(tmp_path / "no" / "such" / "x.db")],
        ["chat", "tests.cli.apps:bank_agent", "--db", str(junk)],
    ):
        assert main(argv) == 2, argv
        assert "the session store cannot be used: SQLite error on" in capsys.readouterr().err

    async def send() -> None:
        agent = Pausepoint().define_agent(name="a", model=ScriptedModel(["x"]), store=SqliteSessionStore(junk))
        await agent.chat().send("hi")

    with pytest.raises(StoreError, match="file is not a database"):
        asyncio.run(send())


def test_an_app_that_cannot_be_imported_or_has_no_agents_is_said_so_by_serve_and_config_check(
    tmp_path, capsys, monkeypatch
):
    """Found by a probe: a syntax error or a missing package was a traceback (exit 1), and
    ``config check`` said ok to an app without agents and to ``sqlite://`` (which serve refuses)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "syntax_app.py").write_text("def f(:\n")
    (tmp_path / "needs_app.py").write_text("import a_package_nobody_installed\n")
    (tmp_path / "empty_app.py").write_text("from pausepoint import Pausepoint\nai = Pausepoint()\n")
    (tmp_path / "raising_app.py").write_text("x = 1\nraise RuntimeError('boom at import')\n")  # a traceback, exit 1
    (tmp_path / "raising.toml").write_text('app = "raising_app:ai"\n[listen]\nprot = 1\n')
    (tmp_path / "empty.toml").write_text('app = "empty_app:ai"\n')
    (tmp_path / "nofile.toml").write_text('app = "tests.cli.apps:bank_ai"\n[store]\nurl = "sqlite://"\n')
    # found by a probe: three slashes where four were meant, and every request answered 503
    (tmp_path / "nofolder.toml").write_text(
        f'app = "tests.cli.apps:bank_ai"\n[store]\nurl = "sqlite://{tmp_path}/x.db"\n'
    )
    monkeypatch.chdir(ROOT)
    for argv, said in (
        (["serve", "syntax_app:ai"], "importing 'syntax_app' failed (at "),
        (["serve", "needs_app:ai"], "needs_app.py, line 1): no module named 'a_package_nobody_installed'"),
        (["chat", "raising_app:ai"], "raising_app.py, line 2): RuntimeError: boom at import"),
        (["config", "check", str(tmp_path / "raising.toml")], "raising_app.py, line 2): RuntimeError: boom at import"),
        (["config", "check", str(tmp_path / "raising.toml")], "raising.toml:3: listen.prot"),  # with the file's own
        (["config", "check", str(tmp_path / "empty.toml")], "the app defines no agents"),
        (["config", "check", str(tmp_path / "nofile.toml")], "nofile.toml:3: store.url: no file in 'sqlite://'"),
        (
            ["config", "check", str(tmp_path / "nofolder.toml")],
            f"the SQLite file's folder {ROOT}{tmp_path} does not exist",
        ),
        (
            ["serve", "tests.cli.apps:bank_ai", "--store", "sqlite:///no/such/folder/x.db"],
            "sqlite:////abs/name.db is absolute",
        ),
    ):
        assert main(argv) == 2, argv
        assert said in capsys.readouterr().err, argv
