"""An MCP server's question, answered in the console (found by a probe): ``examples.banking_mcp``
served as a person serves it, its bank asking who holds a new account. The card offered Approve
(which the server always refuses for a question: 422) and Deny, and no way to type the answer
the terminal chat and MCP take; it now shows the question and answers it with a form made from
what the server asked for."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect

from tests.console.conftest import Shots
from tests.console.steps import confirm
from tests.helpers import stop
from tests.server.harness import ROOT

TOKEN = "alice-s3cret"


@pytest.fixture
def bank_over_mcp(tmp_path: Path) -> Iterator[str]:
    """``pausepoint serve examples.banking_mcp:ai`` (its bank an MCP server over stdio): its URL."""
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "pausepoint", "serve", "examples.banking_mcp:ai", "--token", f"alice={TOKEN}"]
    proc = subprocess.Popen(
        [*command, "--port", str(port)], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):
            try:
                if httpx.get(url + "/readyz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, "pausepoint serve exited"
            time.sleep(0.25)
        yield url
    finally:
        stop(proc)


def test_the_console_answers_an_mcp_servers_question_with_what_it_asks_for(bank_over_mcp: str, browser, shots: Shots):
    agent = f"{bank_over_mcp}/v1/agents/bankingAgent"
    headers = {"Authorization": f"Bearer {TOKEN}"}
    sent = httpx.post(f"{agent}/sessions/q-1/messages", json={"message": "Open a savings account."}, headers=headers,
                      timeout=60)  # fmt: skip
    assert sent.status_code == 200, sent.text
    [pause] = sent.json()["interrupts"]
    assert pause["metadata"]["elicitation"]["message"] == "Who will hold the new savings account?"

    page = browser.new_page()
    page.goto(f"{bank_over_mcp}/console/#token={TOKEN}&session=q-1")
    card = page.locator(".card")
    expect(card).to_have_attribute("data-state", "open")
    expect(card.locator(".card-actions .btn")).to_have_text(["Respond…", "Deny…"])  # no yes answers a question
    expect(card.locator(".card-effect")).to_contain_text("The server asks: “Who will hold the new savings account?”")
    shots(page, "mcp-question")

    card.get_by_role("button", name="Respond…").click()
    form = card.locator("form:visible")
    form.get_by_label("Holder").fill("Ada Lovelace")  # the form is what the server asked for
    form.get_by_role("button", name="Send answer").click()
    confirm(page, card, "send this answer")
    expect(card).to_have_attribute("data-state", "answered")
    expect(page.locator(".msg-model .msg-body").last).to_have_text("Opened a savings account for Ada Lovelace.")
    history = httpx.get(f"{agent}/sessions/q-1/interrupts", headers=headers).json()
    assert history["interrupts"] == []
