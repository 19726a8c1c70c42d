"""What the config-file tests share: the team example's environment, ``pausepoint`` run as a
command (``config check``) or as a server with a config file, and real receivers on loopback
for what a served app sends out (webhooks, OTLP spans)."""

from __future__ import annotations

import email
import email.policy
import json
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.cli.conftest import ROOT, cli_env

EXAMPLE = ROOT / "examples" / "pausepoint.toml"

#: the secrets examples/pausepoint.toml names, as its deployment's environment holds them
EXAMPLE_ENV = {
    "PAUSEPOINT_DATABASE_URL": "postgresql://pausepoint:pg-Passw0rd-xyz@db.internal/pausepoint",
    "PAUSEPOINT_CI_TOKEN": "ci-token-7f3a9c",
    "PAUSEPOINT_ONCALL_TOKEN": "oncall-token-1b2c3d",
    "PAUSEPOINT_OPS_WEBHOOK_SECRET": "ops-hook-secret-99",
    "SLACK_INCOMING_WEBHOOK_URL": "https://hooks.slack.com/services/T000/B000/slacksecretXYZ",
}

PAYMENT = "Pay 1250.50 EUR to ACME GmbH (DE89370400440532013000) for invoice 117."


def pausepoint(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m pausepoint ARGS`` run to its end, from the repo root."""
    return subprocess.run(
        [sys.executable, "-m", "pausepoint", *args],
        cwd=ROOT,
        env={**cli_env(), **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@dataclass
class Served:
    """A ``serve`` process: its URL, what it printed, and (once stopped) its stderr."""

    url: str
    printed: str
    stderr: str = ""


@contextmanager
def serving(*args: str, env: dict[str, str] | None = None, stop: int = signal.SIGINT) -> Iterator[Served]:
    """``python -m pausepoint serve ARGS`` until the block ends, then Ctrl+C (or ``stop``): it
    must stop cleanly."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pausepoint", "serve", *args],
        cwd=ROOT,
        env={**cli_env(), **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        printed = []
        for line in proc.stdout:
            printed.append(line)
            if line.startswith("Ctrl+C"):
                break
        else:
            raise AssertionError("".join(printed) + proc.stderr.read())
        match = re.search(r"at (http://[\d.]+:\d+)", "".join(printed))
        assert match, printed
        served = Served(match[1], "".join(printed))
        yield served
        proc.send_signal(stop)
        out, served.stderr = proc.communicate(timeout=30)
        assert proc.returncode == 0, served.stderr
        assert "stopped" in out and "Traceback" not in served.stderr, served.stderr
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@dataclass
class Receiver:
    """An HTTP server on loopback that keeps every POST (path, headers, body); ``hang`` makes
    it never answer (an endpoint that is down without refusing)."""

    hang: bool = False
    posts: list[tuple[str, dict[str, str], bytes]] = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)
    url: str = ""

    def json_bodies(self) -> list[Any]:
        return [json.loads(body) for _, _, body in self.posts]


@contextmanager
def receiver(*, hang: bool = False) -> Iterator[Receiver]:
    found = Receiver(hang=hang)
    release = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            found.posts.append((self.path, dict(self.headers.items()), body))
            found.arrived.set()
            if found.hang:
                release.wait(60)
                return
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    found.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield found
    finally:
        release.set()
        server.shutdown()
        server.server_close()


@dataclass
class Mailbox:
    """What an SMTP server on loopback (``aiosmtpd``) accepted: (recipients, message) pairs."""

    messages: list[tuple[list[str], Any]] = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 - aiosmtpd's name
        parsed = email.message_from_bytes(envelope.content, policy=email.policy.default)
        self.messages.append((list(envelope.rcpt_tos), parsed))
        self.arrived.set()
        return "250 OK"


@contextmanager
def smtp_server() -> Iterator[tuple[int, Mailbox]]:
    """A real SMTP server on a free loopback port; yields its port and its mailbox."""
    from aiosmtpd.controller import Controller

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    mailbox = Mailbox()
    controller = Controller(mailbox, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield port, mailbox
    finally:
        controller.stop()
