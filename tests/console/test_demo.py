"""``pausepoint demo --model scripted`` as a person runs it: a process of its own, then one approval
through its console in the browser."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.console.conftest import Shots
from tests.console.steps import hold
from tests.helpers import stop
from tests.server.harness import ROOT


@pytest.fixture
def demo_console(tmp_path: Path) -> Iterator[str]:
    """The console URL (with its token) that ``pausepoint demo`` prints."""
    yield from run_demo(tmp_path, "--model", "scripted")


def run_demo(tmp_path: Path, *args: str) -> Iterator[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "pausepoint", "demo", *args, "--port", "0", "--no-open"]
    proc = subprocess.Popen(
        [*command, "--db", str(tmp_path / "demo.db")],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        seen = []
        for line in proc.stdout:  # ends if the process dies: the assertion below says what it printed
            seen.append(line)
            found = re.search(r"console\s+(http://127\.0\.0\.1:\d+/console/#token=\S+)", line)
            if found:
                yield found[1]
                break
        else:
            pytest.fail("pausepoint demo printed no console URL:\n" + "".join(seen))
    finally:
        stop(proc)


def test_the_demo_serves_a_console_that_approves_a_transfer(demo_console: str, browser, shots: Shots):
    page = browser.new_page()
    page.goto(demo_console)
    expect(page.locator("#agent-select")).to_have_value("bankingAgent")
    expect(page.locator("#feed-state")).to_have_text("live")
    box = page.get_by_label("Message", exact=True)
    box.fill("Transfer $500 to savings.")
    box.press("Enter")
    card = page.locator(".card")
    expect(card.locator(".card-title")).to_have_text("Transfer $500 to savings")
    expect(page.locator("#conv-sub")).to_have_text(
        "Moves money between accounts. Every transfer waits for your approval."
    )
    shots(page, "paused")
    card.get_by_role("button", name="Approve").click()
    hold(page, card.get_by_role("button", name="Hold to approve"))  # a transfer is high risk: held down
    expect(page.locator(".msg-model .msg-body").last).to_have_text("Transferred $500 to savings.")
    answers = page.locator("#audit .audit-entry:not(.audit-message)")  # the yes, its grant, the transfer on it
    expect(answers.locator(".badge")).to_have_text(["Approved by demo's grant", "Granted", "Approved"])
    shots(page, "approved")


@pytest.mark.slow
def test_the_console_says_when_the_demo_guides_its_model(tmp_path: Path, browser):
    pytest.importorskip("xllamacpp")
    for console in run_demo(tmp_path, "--model", "local/smollm2", "--threads", "1"):
        page = browser.new_page()
        page.goto(console)
        expect(page.locator("#conv-sub")).to_contain_text("GUIDED: SmolLM2-135M cannot decide")
