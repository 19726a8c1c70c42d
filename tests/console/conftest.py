"""A real server on loopback (the banking, shell and payments examples on the scripted model) and a
real headless Chromium (Debian's ``chromium``, driven by Playwright; no browser is ever downloaded).

Screenshots of every step go to ``artifacts/console/``.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Mount

from examples import banking, payments, shell
from pausepoint import Agent
from pausepoint.server import BearerTokens, OwnerPolicy, create_app
from pausepoint.stores import SessionSummary, SqliteSessionStore
from tests.console import apps
from tests.server.harness import ROOT, TOKENS, serve_in_thread

REQUIRED = os.environ.get("PAUSEPOINT_REQUIRE_SERVICES") == "1"  # CI: a missing browser is a failure

try:
    import playwright.sync_api as playwright_api
except ImportError:
    if REQUIRED:
        raise
    pytest.skip("the console's browser tests need playwright (pip install playwright)", allow_module_level=True)

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = ROOT / "artifacts" / "console"

if shutil.which(CHROMIUM) is None:
    if REQUIRED:
        raise RuntimeError(f"the console's browser tests need Debian's chromium at {CHROMIUM}")
    pytest.skip(f"the console's browser tests need Debian's chromium at {CHROMIUM}", allow_module_level=True)


# How long a payment waits at ``/quick`` before it expires (the expiry test watches it run out).
QUICK_TTL = timedelta(seconds=8)


class ReadOnlyDesk(OwnerPolicy):
    """``desk`` sees every session of the banking app and acts in none of them."""

    def __init__(self) -> None:
        super().__init__(approvers={"desk"})

    def can_answer(self, principal: str, session: SessionSummary) -> bool:
        return session.owner == principal


class Tokens:
    """Bearer tokens a test may revoke while the server runs (an ``Authenticator``, as a
    deployment that keeps its tokens elsewhere passes one)."""

    def __init__(self, tokens: dict[str, str]) -> None:
        self.tokens = dict(tokens)

    def revoke(self, token: str) -> None:
        self.tokens.pop(token, None)

    def __call__(self, request: Request) -> str | None:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        return self.tokens.get(token.strip()) if scheme.lower() == "bearer" else None


@dataclass
class Served:
    """With their console: the banking app at ``/bank``, the shell app at ``/shell``, the payments
    app at ``/pay`` (pauses wait 15 minutes) and at ``/quick`` (they expire after ``QUICK_TTL``),
    the console tests' treasury app at ``/desk`` (``tests.console.apps``; its tokens, ``tokens``,
    can be revoked)."""

    url: str
    ledger: list[str] = field(default_factory=list)
    executed: list[dict[str, Any]] = field(default_factory=list)
    paid: list[dict[str, Any]] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)
    agents: dict[str, Agent] = field(default_factory=dict)
    tokens: Tokens = field(default_factory=lambda: Tokens(TOKENS))

    @property
    def bank(self) -> str:
        return self.url + "/bank"

    def console(self, token: str = "alice-token", app: str = "bank", **route: str) -> str:
        """The console's URL, signing in with ``token`` through the fragment (as the demo does)."""
        extra = "".join(f"&{key}={value}" for key, value in route.items())
        return f"{self.url}/{app}/console/#token={token}{extra}"

    def model_requests(self, agent: str) -> list[Any]:
        return list(self.agents[agent].model.requests)  # type: ignore[attr-defined]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    result = Served("")

    def factory() -> Starlette:
        store = SqliteSessionStore(tmp_path / "sessions.db")
        bank_ai, bank_agent = banking.build(store, result.ledger)
        shell_ai, shell_agent = shell.build(store, result.executed)
        pay_ai, pay_agent = payments.build(SqliteSessionStore(tmp_path / "pay.db"), result.paid)
        quick_ai, _ = payments.build(SqliteSessionStore(tmp_path / "quick.db"), result.paid, ttl=QUICK_TTL)
        result.agents = {bank_agent.name: bank_agent, shell_agent.name: shell_agent, pay_agent.name: pay_agent}
        desk_ai = apps.build(SqliteSessionStore(tmp_path / "desk.db"), result.moved)
        options: dict[str, Any] = {"auth": BearerTokens(TOKENS), "feed_interval": 0.2}
        return Starlette(
            routes=[
                Mount("/bank", create_app(bank_ai, **options, policy=ReadOnlyDesk())),
                Mount("/shell", create_app(shell_ai, **options)),
                Mount("/pay", create_app(pay_ai, **options)),
                Mount("/quick", create_app(quick_ai, **options, expiry_interval=0.5)),
                Mount(
                    "/desk",
                    create_app(
                        desk_ai,
                        auth=result.tokens,
                        feed_interval=0.2,
                        expiry_interval=0.5,
                        policy=OwnerPolicy({"alice", "bob"}),
                    ),
                ),
            ]
        )

    with serve_in_thread(factory) as url:
        result.url = url
        yield result


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    """A fresh Chromium profile per test: a persistent context on an empty user-data dir."""
    with playwright_api.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path / "profile"),
            executable_path=CHROMIUM,
            args=CHROMIUM_ARGS,
            headless=True,
            viewport={"width": 1360, "height": 860},
        )
        context.set_default_timeout(15_000)
        try:
            yield context
        finally:
            context.close()


class Shots:
    """Numbered screenshots of one test's steps, in ``artifacts/console/``."""

    def __init__(self, name: str) -> None:
        self.name = re.sub(r"[^a-z0-9_]+", "_", name.lower()).strip("_")
        self.count = 0
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        for old in ARTIFACTS.glob(f"{self.name}-*.png"):
            old.unlink()

    def __call__(self, page: Any, step: str) -> Path:
        self.count += 1
        path = ARTIFACTS / f"{self.name}-{self.count:02d}-{step}.png"
        page.screenshot(path=str(path), full_page=False)
        return path


@pytest.fixture
def shots(request: pytest.FixtureRequest) -> Shots:
    return Shots(request.node.name.removeprefix("test_"))
