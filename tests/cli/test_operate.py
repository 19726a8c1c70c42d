"""Operating ``pausepoint serve``: the request log (JSON, no tokens, no answers), health, metrics."""

from __future__ import annotations

import json
import logging
import re
import signal
import subprocess
import sys

import httpx
from prometheus_client.parser import text_string_to_metric_families

from pausepoint.cli._logging import JsonFormatter
from tests.cli.conftest import ROOT, cli_env

TOKEN = "s3cret-token-do-not-log"
PAYLOAD = "feedback-that-must-not-be-logged"


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(found: dict, name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


def served_at(proc: subprocess.Popen[str]) -> str:
    """The URL ``serve`` says it serves at, once it is ready."""
    assert proc.stdout is not None
    printed = ""
    for line in proc.stdout:
        printed += line
        if line.startswith("Ctrl+C"):
            break
    found = re.search(r"at (http://127\.0\.0\.1:\d+)", printed)
    assert found is not None, printed
    return found[1]


def start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "pausepoint", *args],
        cwd=ROOT,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


async def test_serve_logs_requests_as_json_and_serves_health_and_metrics(tmp_path):
    args = ["serve", "tests.cli.apps:bank_ai", "--port", "0", "--token", f"alice={TOKEN}", "--token", "ops=ops-token"]
    args += ["--operator", "ops", "--metrics", "--log-format", "json", "--store", f"sqlite:///{tmp_path / 's.db'}"]
    proc = start(*args)
    try:
        base = served_at(proc)
        alice = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            assert (await http.get("/healthz")).json() == {"status": "ok"}
            ready = (await http.get("/readyz")).json()
            assert ready["status"] == "ready" and ready["stores"][0]["ok"] is True
            body = (
                await http.post(
                    "/v1/agents/bankingAgent/sessions", json={"message": "Transfer $9 to x."}, headers=alice
                )
            ).json()
            session = f"/v1/agents/bankingAgent/sessions/{body['session_id']}"
            ref = body["interrupts"][0]["ref"]
            answer = {"output": {"approved": True, "feedback": PAYLOAD}}
            done = await http.post(f"{session}/interrupts/{ref}/respond", json=answer, headers=alice)
            assert done.json()["finish_reason"] == "stop"
            assert (await http.get(f"/v1/agents?token={TOKEN}")).status_code == 401  # a token in the query
            assert (
                await http.get("/v1/ops/deliveries", headers={"Authorization": "Bearer ops-token"})
            ).status_code == 200
            for name in ("a1b2c3.js", "x/y/z.css", "%2e%2e/secret"):  # any name anyone may ask for
                await http.get(f"/console/{name}")
            await http.get("/v1/agents/bankingAgent/sessions/sessions", headers=alice)
            scraped = await http.get("/metrics")
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)

    assert scraped.headers["content-type"].startswith("text/plain")
    found = samples(scraped.text)
    assert value(found, "pausepoint_turns_total", agent="bankingAgent", finish_reason="interrupted") == 1
    assert value(found, "pausepoint_turns_total", agent="bankingAgent", finish_reason="stop") == 1
    assert value(found, "pausepoint_pauses_opened_total", agent="bankingAgent", tool="userApproval") == 1
    resolved = {"agent": "bankingAgent", "tool": "userApproval", "decision": "respond"}
    assert value(found, "pausepoint_pauses_resolved_total", **resolved) == 1
    assert value(found, "pausepoint_pause_wait_seconds_count", agent="bankingAgent", tool="userApproval") == 1
    assert value(found, "pausepoint_model_duration_seconds_count", agent="bankingAgent", model="scripted") == 3
    assert value(found, "pausepoint_store_duration_seconds_count", backend="sqlite", operation="append") >= 2
    route = "/v1/agents/{agent}/sessions/{session_id}/interrupts/{ref}/{action}"
    assert value(found, "pausepoint_http_requests_total", method="POST", route=route, status="200") == 1
    # A route label is a template: files under the console are one, whatever their names (a
    # probe found one series per name asked for), and a path is never taken apart by its values.
    routes = {labels["route"] for (name, labels) in ((n, dict(ls)) for n, ls in found) if "route" in labels}
    assert value(found, "pausepoint_http_requests_total", method="GET", route="/console/{path}", status="404") == 3
    one_session = "/v1/agents/{agent}/sessions/{session_id}"
    assert value(found, "pausepoint_http_requests_total", method="GET", route=one_session, status="404") == 1
    assert not any(part in r for r in routes for part in ("a1b2c3", "z.css", "secret", body["session_id"]))

    assert TOKEN not in err and PAYLOAD not in err and "token=" not in err
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    access = [
        (e["method"], e["path"], e["status"], e["principal"])
        for e in lines
        if e["logger"] == "pausepoint.server.access"
    ]
    assert ("GET", "/healthz", 200, "-") in access
    assert ("POST", "/v1/agents/bankingAgent/sessions", 200, "alice") in access
    assert ("POST", f"{session}/interrupts/{ref}/respond", 200, "alice") in access
    assert ("GET", "/v1/agents", 401, "-") in access
    assert ("GET", "/v1/ops/deliveries", 200, "ops") in access
    assert all(isinstance(e["duration_ms"], float) for e in lines if e["logger"] == "pausepoint.server.access")


async def test_json_log_lines_carry_no_terminal_colours(tmp_path):
    """uvicorn hands its records a ``color_message`` with ANSI escapes, for its own coloured
    formatter: a JSON line is for a log collector, and carries neither."""
    proc = start("serve", "tests.cli.apps:bank_ai", "--port", "0", "--token", f"alice={TOKEN}", "--log-format",
                 "json", "--mcp")  # fmt: skip
    try:
        base = served_at(proc)
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            assert (await http.get("/healthz")).status_code == 200
            # the MCP SDK's records too (found by a probe: its own handler drew Rich boxes, a
            # traceback a client could cause among them, and a line at info for every request)
            mcp = {"Authorization": f"Bearer {TOKEN}", "Accept": "application/json, text/event-stream"}
            for number, method in enumerate(("tools/list", "prompts/get")):
                call = {"jsonrpc": "2.0", "id": number, "method": method, "params": {"name": "x"}}
                assert (await http.post("/mcp", json=call, headers=mcp)).status_code == 200
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)

    lines = [json.loads(line) for line in err.splitlines() if line.strip()]  # every line is JSON
    assert any(e["logger"].startswith("uvicorn") for e in lines)  # uvicorn's own records are there
    assert not [e for e in lines if e["logger"].startswith("mcp") and e["level"] in ("debug", "info")]
    assert any(e["logger"] == "pausepoint.server.access" for e in lines)
    for entry in lines:
        assert "color_message" not in entry, entry
        assert not any("\x1b" in str(value) for value in entry.values()), entry


def test_a_json_log_line_keeps_no_escape_sequence():
    message, args = "\x1b[31mred\x1b[0m %s", ("\x1b]0;t\x07x",)  # colours; a window title
    record = logging.LogRecord("pausepoint.x", logging.WARNING, __file__, 1, message, args, None)
    record.color_message = "\x1b[1mred\x1b[0m"
    record.path = "/v1/\x1b[2Jagents\x1b"
    entry = json.loads(JsonFormatter().format(record))
    assert (entry["message"], entry["path"]) == ("red x", "/v1/agents")
    assert "color_message" not in entry


async def test_a_text_log_line_is_one_line_that_drives_no_terminal():
    """The path is anyone's to choose: in the text log (the default format) a line break or an
    escape sequence in it is written as ``\\xNN`` (found by a probe: a line of one's own, forged
    without credentials, and colours)."""
    proc = start("serve", "tests.cli.apps:bank_ai", "--port", "0", "--token", f"alice={TOKEN}", "--log-level", "info")
    try:
        base = served_at(proc)
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            forged = "/x%1B[31mRED%0D%0A2026-01-01 00:00:00,000 INFO pausepoint.server.access: forged"
            assert (await http.get(forged)).status_code == 404
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert "\x1b" not in err and "\r" not in err
    [line] = [line for line in err.splitlines() if "RED" in line]
    assert "GET /x\\x1b[31mRED\\x0d\\x0a2026-01-01" in line and line.endswith(" 404 " + line.split(" 404 ")[-1])
    assert not any(line.startswith("2026-01-01 00:00:00,000") for line in err.splitlines())
