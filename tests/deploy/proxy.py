"""A deployment as docs/deploy.md describes it, on loopback: N ``pausepoint serve`` processes,
each started by the command of the doc's systemd unit, behind nginx running the doc's site
config, on one PostgreSQL or one Redis.

The doc's two blocks are the only source: the ``ini`` block (the unit) gives each process's
command line (its ``ExecStart``; ``%i``, the port, is 0 at a first start: each process picks a
free one and says which; a restart takes it again), the ``nginx`` block the site. What a
loopback test must change is changed here, by name, and checked: the venv's ``pausepoint`` and
a config file of the test's in the command; the upstream's ``server`` lines (one per process,
each as the doc writes it, on the process's port) and ``listen 80`` (a free loopback port) in
the site. nginx runs as a private instance (``-p`` a temporary folder, ``daemon off``), its
main config (``nginx_main``) including the site as Debian's ``/etc/nginx/nginx.conf`` includes
``conf.d/*.conf``, with one worker (so round-robin alternates strictly) and an access log
naming the upstream that served each request (``$upstream_addr``) and the request's
``X-Test-Id``.

nginx comes from Debian (``.ci/apt-packages``); without it the tests skip, saying so, or fail
when ``PAUSEPOINT_REQUIRE_SERVICES=1`` (CI).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.docs.blocks import blocks
from tests.stores.backends import Backend

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "deploy.md"
PAUSEPOINT = str(Path(sys.executable).with_name("pausepoint"))
TOKENS = {"alice": "alice-deploy-token", "bob": "bob-deploy-token"}
ALICE = {"Authorization": f"Bearer {TOKENS['alice']}"}
BOB = {"Authorization": f"Bearer {TOKENS['bob']}"}
READY = "Ctrl+C stops the server."
START_TIMEOUT = 60.0  # a guard against a server that never starts, not a performance bound

_UPSTREAM_SERVER = re.compile(r"^(\s*server\s+)127\.0\.0\.1:(\d+)(\b[^;]*;.*)$", re.MULTILINE)
_LISTEN = re.compile(r"^(\s*)listen\s+80;(.*)$", re.MULTILINE)


def doc_block(language: str) -> str:
    """The one fenced block of ``language`` in docs/deploy.md."""
    found = [b.code for b in blocks(DOC) if b.language == language]
    assert len(found) == 1, f"docs/deploy.md should hold exactly one {language!r} block, not {len(found)}"
    return found[0]


def nginx_site(ports: list[int], listen: int) -> str:
    """The doc's nginx site with one upstream ``server`` line per port in ``ports`` (each written
    as the doc's first one) and ``listen 80`` on ``127.0.0.1:listen``."""
    site = doc_block("nginx")
    servers = list(_UPSTREAM_SERVER.finditer(site))
    assert servers, "the doc's nginx block names no upstream 'server 127.0.0.1:PORT ...;' line"
    head, _, tail = servers[0].groups()
    lines = "\n".join(f"{head}127.0.0.1:{port}{tail}" for port in ports)
    site = site[: servers[0].start()] + lines + site[servers[-1].end() :]
    site, listens = _LISTEN.subn(rf"\g<1>listen 127.0.0.1:{listen};\g<2>", site)
    assert listens == 1, "the doc's nginx block should 'listen 80;' once"
    return site


def unit_command(config: Path, port: int) -> list[str]:
    """The doc's unit's ``ExecStart`` for the instance ``port``, with the venv's ``pausepoint``
    and the config file ``config``."""
    unit = doc_block("ini")
    starts = [line.partition("=")[2] for line in unit.splitlines() if line.startswith("ExecStart=")]
    assert len(starts) == 1, "the doc's unit should have one ExecStart="
    words = shlex.split(starts[0])
    assert Path(words[0]).name == "pausepoint" and words[1] == "serve", words
    assert "--config" in words and "%i" in words, f"the unit should pass --config FILE and its instance: {words}"
    words[0] = PAUSEPOINT
    words[words.index("--config") + 1] = str(config)
    return [str(port) if word == "%i" else word for word in words]


def nginx_binary() -> str:
    """Debian's nginx; skips (or fails, when services are required) without it."""
    found = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.access(p, os.X_OK)), None)
    if found:
        return found
    if os.environ.get("PAUSEPOINT_REQUIRE_SERVICES") == "1":
        pytest.fail("nginx is not installed, and PAUSEPOINT_REQUIRE_SERVICES=1 requires it (.ci/apt-packages)")
    pytest.skip("nginx is not installed (apt-get install nginx): the proxied deployment is not tested")


def nginx_main(folder: Path, site: Path) -> str:
    """A private nginx's main config: everything in ``folder``, the site included in ``http``."""
    user = "user root root;\n" if os.geteuid() == 0 else ""  # root's workers would run as nobody
    temp = " ".join(
        f"{kind}_temp_path {folder / kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return (
        f"{user}worker_processes 1;\npid {folder / 'nginx.pid'};\nerror_log {folder / 'error.log'} info;\n"
        "events { worker_connections 1024; }\n"
        "http {\n"
        f"    {temp}\n"
        "    log_format upstreams '$http_x_test_id|$upstream_addr|$status|$request_method|$uri';\n"
        f"    access_log {folder / 'access.log'} upstreams;\n"
        f"    include {site};\n"
        "}\n"
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Served:
    """One request in nginx's access log."""

    test_id: str
    upstream: str  # the server that answered (the last one nginx tried)
    status: int
    method: str
    path: str


@dataclass
class Deployment:
    """``processes`` servers on ``backend`` behind nginx; ``url`` is nginx's, ``direct`` the servers'."""

    backend: Backend
    folder: Path
    processes: int = 2
    ports: list[int] = field(default_factory=list)
    servers: list[subprocess.Popen[bytes] | None] = field(default_factory=list)
    url: str = ""
    nginx: subprocess.Popen[bytes] | None = None

    @property
    def ledger(self) -> Path:
        return self.folder / "ledger"

    @property
    def gates(self) -> Path:
        return self.folder / "gates"

    @property
    def direct(self) -> list[str]:
        return [f"http://127.0.0.1:{port}" for port in self.ports]

    def __enter__(self) -> Deployment:
        binary = nginx_binary()
        self.gates.mkdir(parents=True, exist_ok=True)
        self.ports = [0] * self.processes  # each picks a free one (the banner says which)
        try:
            self.servers = [self._start(i) for i in range(self.processes)]
            for i in range(self.processes):
                self.ports[i] = self._wait_ready(i)
            self._start_nginx(binary)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        if self.nginx is not None:
            _stop(self.nginx, signal.SIGQUIT)  # nginx's graceful shutdown
            self.nginx = None
        for proc in self.servers:
            if proc is not None:
                _stop(proc, signal.SIGTERM)
        self.servers = []

    # -- the servers, as systemd starts them ---------------------------------------------------

    def _config(self) -> Path:
        """The config file the unit names: the test's app, the store with its place, two people."""
        spec = self.backend.spec()
        place = f'schema = "{spec["schema"]}"' if spec["backend"] == "postgres" else f'prefix = "{spec["prefix"]}"'
        people = "".join(f'[principals.{name}]\ntoken_env = "PAUSEPOINT_DEPLOY_{name.upper()}"\n\n' for name in TOKENS)
        path = self.folder / "pausepoint.toml"
        path.write_text(
            'app = "tests.deploy.app:ai"\n\n[server]\nconsole = false\n\n'
            f'[store]\nurl_env = "PAUSEPOINT_DEPLOY_STORE"\n{place}\n\n{people}[log]\nlevel = "warning"\n'
        )
        return path

    def environment(self) -> dict[str, str]:
        """What the unit's ``EnvironmentFile`` would hold, and what the test's app reads."""
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
        env |= {f"PAUSEPOINT_DEPLOY_{name.upper()}": token for name, token in TOKENS.items()}
        env |= {"PAUSEPOINT_DEPLOY_STORE": self.backend.spec()["url"], "PAUSEPOINT_DEPLOY_LEDGER": str(self.ledger),
                "PAUSEPOINT_DEPLOY_GATES": str(self.gates)}  # fmt: skip
        return env

    def _start(self, i: int) -> subprocess.Popen[bytes]:
        command = unit_command(self._config(), self.ports[i])
        with self._log(i).open("ab") as log:
            return subprocess.Popen(command, cwd=ROOT, env=self.environment(), stdout=log, stderr=subprocess.STDOUT)

    def _log(self, i: int) -> Path:
        return self.folder / f"server-{i}.log"

    def _wait_ready(self, i: int) -> int:
        """Wait until server ``i`` says it serves (in its log, after its last start); its port."""
        proc = self.servers[i]
        assert proc is not None
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            banner = self._log(i).read_text(errors="replace").rpartition("pausepoint: serving")[2]
            if READY in banner and (at := re.search(r" at http://127\.0\.0\.1:(\d+)", banner)):
                return int(at[1])
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"server {i} did not start:\n{self._log(i).read_text(errors='replace')}")
            time.sleep(0.05)

    def kill(self, i: int) -> None:
        """kill -9 server ``i``."""
        proc = self.servers[i]
        assert proc is not None
        proc.kill()
        proc.wait()

    def restart(self, i: int) -> None:
        """Start server ``i`` again on its port, as systemd's ``Restart=`` does."""
        self.servers[i] = self._start(i)
        assert self._wait_ready(i) == self.ports[i]

    # -- nginx ---------------------------------------------------------------------------------

    def _start_nginx(self, binary: str) -> None:
        folder = self.folder / "nginx"
        folder.mkdir()
        main = folder / "nginx.conf"
        main.write_text(nginx_main(folder, site := folder / "pausepoint.conf"))
        command = [binary, "-p", str(folder), "-c", str(main), "-e", str(folder / "error.log")]
        for _ in range(3):  # the free port nginx is told to listen on may be taken meanwhile: pick another
            site.write_text(nginx_site(self.ports, listen := free_port()))
            checked = subprocess.run([*command, "-t"], capture_output=True, text=True, check=False)
            assert checked.returncode == 0, f"nginx refused the doc's config:\n{checked.stderr}\n{site.read_text()}"
            with (folder / "nginx.out").open("wb") as out:
                self.nginx = subprocess.Popen([*command, "-g", "daemon off;"], stdout=out, stderr=subprocess.STDOUT)
            self.url = f"http://127.0.0.1:{listen}"
            if self._nginx_up():
                return
            _stop(self.nginx, signal.SIGTERM)
            self.nginx = None
        raise AssertionError(f"nginx did not start:\n{(folder / 'error.log').read_text(errors='replace')}")

    def _nginx_up(self) -> bool:
        """Wait until nginx answers through the site; False if it exited (its port was taken, say)."""
        assert self.nginx is not None
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline and self.nginx.poll() is None:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(self.url + "/healthz", headers={"X-Test-Id": "ready"}, timeout=5).status_code == 200:
                    return True
            time.sleep(0.05)
        return False

    def served(self) -> list[Served]:
        """nginx's access log so far: each request, the server that answered it, its status."""
        lines = (self.folder / "nginx" / "access.log").read_text().splitlines()
        found = []
        for line in lines:
            test_id, upstreams, status, method, path = line.split("|")
            found.append(Served(test_id, upstreams.split(",")[-1].strip(), int(status), method, path))
        return found

    def served_by(self, test_id: str) -> Served:
        """The one logged request sent with ``X-Test-Id: test_id`` (nginx logs a request when it
        ends: a stream the client closed, once nginx notices, at the latest when it next writes)."""
        deadline = time.monotonic() + START_TIMEOUT
        while not (found := [s for s in self.served() if s.test_id == test_id]):
            assert time.monotonic() < deadline, f"nginx never logged the request {test_id!r}"
            time.sleep(0.05)
        [one] = found
        return one


def _stop(proc: subprocess.Popen[bytes], sig: int) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def text(response: dict[str, Any]) -> str:
    """The text of a REST reply's (or a stream's ``response`` event's) model message."""
    message = response.get("message") or {"parts": []}
    return "".join(part.get("text") or "" for part in message["parts"])


def transfers_by_account(ledger: Path) -> dict[str, int]:
    """How many transfers the ledger file records per account, by every process."""
    counts: dict[str, int] = {}
    if ledger.exists():
        for line in ledger.read_text().splitlines():
            account = line.rsplit("->", 1)[1]
            counts[account] = counts.get(account, 0) + 1
    return counts
