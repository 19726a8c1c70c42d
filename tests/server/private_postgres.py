"""A PostgreSQL server of a test's own, for tests that freeze or stop it (never the shared one at
``PAUSEPOINT_TEST_POSTGRES_URL``: other tests use it).

Started as ``.ci/services.sh`` starts the shared one: ``initdb`` and ``pg_ctl`` (as the user
``postgres`` when the tests run as root) on a free loopback port, its data in a temporary
folder, removed at the end. Without the binaries the test skips, or fails when
``PAUSEPOINT_REQUIRE_SERVICES=1`` (as in CI).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

__all__ = ["PrivatePostgres", "private_postgres"]


@dataclass
class PrivatePostgres:
    url: str
    pid: int  # the postmaster's

    def processes(self) -> list[int]:
        """The postmaster and its children (the backends and the server's own workers)."""
        children = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:  # gone meanwhile
                continue
            # pid (comm) state ppid ...: comm may hold spaces and parentheses, so split after its end.
            if int(stat.rpartition(")")[2].split()[1]) == self.pid:
                children.append(int(entry.name))
        return [self.pid, *children]

    def freeze(self) -> None:
        """SIGSTOP the postmaster first (it starts no backend after that), then its children."""
        for pid in self.processes():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)

    def thaw(self) -> None:
        for pid in self.processes():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


def _binaries() -> Path:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))
    initdb = found[-1] if found else shutil.which("initdb")
    if initdb is None:
        _unavailable("no PostgreSQL binaries (initdb, pg_ctl) to start a private server: apt-get install postgresql")
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            _unavailable("running as root, and no user 'postgres' to start a PostgreSQL server as")
    return Path(initdb).resolve().parent


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("PAUSEPOINT_REQUIRE_SERVICES") == "1":
        pytest.fail(reason + " (PAUSEPOINT_REQUIRE_SERVICES=1 requires a PostgreSQL server)")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    """A PostgreSQL server of this test's own; stopped (thawed first) and removed at the end."""
    binaries = _binaries()
    as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []  # initdb refuses root
    # Not pytest's tmp_path: its parents are private to this user, and the server may run as postgres.
    folder = Path(tempfile.mkdtemp(prefix="pausepoint-private-postgres-"))
    folder.chmod(0o755)
    if as_postgres:
        shutil.chown(folder, "postgres", "postgres")
    data, port = folder / "data", _free_port()

    def run(*args: str) -> None:
        subprocess.run([*as_postgres, *args], check=True, capture_output=True, timeout=120)

    server = None
    try:
        run(str(binaries / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
            "--locale=C.UTF-8", "--no-sync")  # fmt: skip
        run(str(binaries / "pg_ctl"), "-D", str(data), "-l", str(folder / "server.log"), "-w", "-t", "60", "-o",
            f"-p {port} -c listen_addresses=127.0.0.1 -k {folder}", "start")  # fmt: skip
        pid = int((data / "postmaster.pid").read_text().split()[0])
        server = PrivatePostgres(f"postgresql://postgres@127.0.0.1:{port}/postgres", pid)
        yield server
    finally:
        if server is not None:
            server.thaw()
        with contextlib.suppress(subprocess.SubprocessError):
            run(str(binaries / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "-t", "60", "stop")
        shutil.rmtree(folder, ignore_errors=True)
