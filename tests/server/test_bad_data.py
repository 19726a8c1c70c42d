"""Bad input over HTTP (what a session cannot keep — too deep, too long, NaN, lone surrogates — and
malformed requests): a 4xx with a JSON body — never a 500 —
through the REST API and the Genkit endpoint, and nothing is written (a second process reads the
session as it was). And: approvers answer but never speak in another's session; nothing is
looked up before authentication; hardened responses.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pydantic_core import from_json

from pausepoint import Interrupt, JsonLimits, Pausepoint, ToolRunContext
from pausepoint.server import BearerTokens, OwnerPolicy, create_app
from pausepoint.testing import ScriptedModel, tool_call
from tests.readback import read_elsewhere
from tests.server.conftest import ALICE, BOB, Served
from tests.server.harness import TOKENS, build_app, serve_in_thread
from tests.server.lab import LabEvents

DESK = {"Authorization": "Bearer desk-token"}


def deep(levels: int) -> str:
    return "[" * levels + "1" + "]" * levels


def body(template: str, value: str) -> bytes:
    """A raw JSON body: ``template`` with ``@`` replaced by the JSON text ``value`` (so NaN literals,
    lone-surrogate escapes and integers longer than Python prints can be sent as they are)."""
    return template.replace("@", value).encode()


# value JSON text -> (status, code, rule) when it reaches a session
VALUES: dict[str, tuple[str, int, str, str | None]] = {
    "lone surrogate": ('"a\\ud800"', 422, "", "unpaired_surrogate"),
    "lone surrogate key": ('{"\\udc00": 1}', 422, "", "unpaired_surrogate"),
    "nested 200 deep": (deep(200), 422, "", "max_depth"),
    "nested 253 deep": (deep(253), 422, "", "max_depth"),
    "nested 300 deep": (deep(300), 422, "", "max_depth"),  # past pydantic's own depth (found by a probe)
    "nested 900 deep": (deep(900), 422, "", "max_depth"),
    "1e999 (Infinity)": ("1e999", 422, "", "finite_number"),
    "641 digits": ("9" * 641, 422, "", "max_int_digits"),
    "NaN literal": ("NaN", 400, "invalid_request", None),
    "-Infinity literal": ("-Infinity", 400, "invalid_request", None),
    "4,301 digits": ("9" * 4301, 400, "invalid_request", None),
}


def ascii_json(value: Any) -> bytes:
    """JSON with non-ASCII escaped: a lone surrogate travels as its escape (httpx's ``json=`` cannot)."""
    return json.dumps(value).encode()


async def post(http: httpx.AsyncClient, url: str, data: bytes, headers: dict[str, str]) -> httpx.Response:
    return await http.post(url, content=data, headers={**headers, "Content-Type": "application/json"})


def assert_error(reply: httpx.Response, status: int, code: str, label: str) -> dict[str, Any]:
    assert reply.status_code == status, f"{label}: {reply.status_code} {reply.text[:300]}"
    assert reply.headers["content-type"].startswith("application/json"), label
    error = reply.json()["error"]
    assert error["code"] == code and error["message"], f"{label}: {error}"
    return dict(error)


async def paused(http: httpx.AsyncClient, base: str, agent: str, message: str) -> tuple[str, str]:
    reply = await http.post(f"{base}/v1/agents/{agent}/sessions", json={"message": message}, headers=ALICE)
    assert reply.status_code == 200, reply.text
    return reply.json()["session_id"], reply.json()["interrupts"][0]["ref"]


async def state(http: httpx.AsyncClient, base: str, agent: str, session_id: str) -> Any:
    session = f"{base}/v1/agents/{agent}/sessions/{session_id}"
    return [(await http.get(session + tail, headers=ALICE)).json() for tail in ("", "/history", "/audit")]


async def test_rest_refuses_what_a_session_cannot_keep(served: Served, http: httpx.AsyncClient, tmp_path):
    bank_id, bank_ref = await paused(http, served.bank, "bankingAgent", "Transfer $5 to z.")
    shell_id, shell_ref = await paused(http, served.shell, "shellAgent", "Run: rm -rf build/")
    bank = f"{served.bank}/v1/agents/bankingAgent/sessions/{bank_id}"
    shell = f"{served.shell}/v1/agents/shellAgent/sessions/{shell_id}"
    before = {
        "bank": await state(http, served.bank, "bankingAgent", bank_id),
        "shell": await state(http, served.shell, "shellAgent", shell_id),
    }
    elsewhere_before = read_elsewhere(str(tmp_path / "sessions.db"), [bank_id, shell_id])
    sessions_before = (await http.get(served.bank + "/v1/agents/bankingAgent/sessions", headers=ALICE)).json()

    where = [
        (bank + f"/interrupts/{bank_ref}/respond",
         '{"output": {"approved": true, "feedback": "x"}, "metadata": {"m": @}}', "$.metadata.m",
         "invalid_answer"),
        (bank + "/resume", '{"respond": [{"ref": "' + bank_ref + '", "name": "userApproval", '
         '"output": {"approved": true}}], "metadata": {"m": @}}', "$.metadata.m", "invalid_answer"),
        (bank + f"/interrupts/{bank_ref}/approve", '{"metadata": {"m": @}}', "$.metadata.m", "invalid_answer"),
        (bank + "/messages", '{"message": [{"kind": "text", "text": "hi", "provider_metadata": {"m": @}}]}',
         "$.parts[0].provider_metadata.m", "invalid_message"),
        (shell + f"/interrupts/{shell_ref}/restart", '{"resumed_metadata": {"m": @}}',
         "$.resumed_metadata.m", "invalid_answer"),
    ]  # fmt: skip
    failures = []
    for label, (value, status, code, rule) in VALUES.items():
        for url, template, path, answer_code in where:
            reply = await post(http, url, body(template, value), ALICE)
            try:
                error = assert_error(reply, status, code or answer_code, f"{label} at {path}")
                if rule is not None:
                    assert (error["details"]["rule"], error["details"]["path"][: len(path)]) == (rule, path), error
            except AssertionError as exc:
                failures.append(str(exc))
    assert failures == []
    # 1e999 is JSON's grammar: the refusal says why it reads as an infinity (found by a probe)
    reply = await post(http, bank + "/resume", body(where[1][1], "1e999"), ALICE)
    assert "beyond what a double holds" in reply.json()["error"]["message"]

    surrogate = '"\\ud800"'
    strings = [
        (bank + f"/interrupts/{bank_ref}/respond", '{"output": {"approved": true, "feedback": @}}',
         "$.output.feedback", "invalid_answer"),  # one pause's answer: its body's own paths (found by a probe)
        (bank + f"/interrupts/{bank_ref}/deny", '{"reason": @}', "$.reason", "invalid_answer"),
        (shell + f"/interrupts/{shell_ref}/restart", '{"replace_input": {"command": @}}',
         "$.replace_input.command", "invalid_answer"),
        (shell + f"/interrupts/{shell_ref}/approve", '{"replace_input": {"command": @}}',
         "$.replace_input.command", "invalid_answer"),
        (bank + "/messages", '{"message": @}', "$.parts[0].text", "invalid_message"),
        (bank + "/messages", '{"message": [{"kind": "media", "url": @}]}', "$.parts[0].url", "invalid_message"),
        (served.bank + "/v1/agents/bankingAgent/sessions", '{"message": [{"kind": "text", "text": @}]}',
         "$.parts[0].text", "invalid_message"),
        (bank + "/cancel", '{"reason": @}', "$.reason", "invalid_answer"),
    ]  # fmt: skip
    for url, template, path, code in strings:
        headers = {**ALICE, "Accept": "text/event-stream"} if "messages" in url else ALICE
        error = assert_error(await post(http, url, body(template, surrogate), headers), 422, code, path)
        assert error["details"]["path"] == path and error["details"]["rule"] == "unpaired_surrogate"
        if "/interrupts/" in url:  # the console shows this to the person who answered one pause
            assert error["message"].startswith(f"the answer cannot be recorded: {path}: "), error
    for query in ("limit=%C2%B2", "limit=%D9%A3", "offset=%C2%B9", "limit=1%C2%B2"):
        reply = await http.get(served.bank + "/v1/agents/bankingAgent/sessions?" + query, headers=ALICE)
        assert_error(reply, 400, "invalid_request", query)

    assert await state(http, served.bank, "bankingAgent", bank_id) == before["bank"]
    assert await state(http, served.shell, "shellAgent", shell_id) == before["shell"]
    assert (await http.get(served.bank + "/v1/agents/bankingAgent/sessions", headers=ALICE)).json() == sessions_before
    assert read_elsewhere(str(tmp_path / "sessions.db"), [bank_id, shell_id]) == elsewhere_before
    assert served.ledger == [] and served.executed == []
    reply = await http.post(
        bank + f"/interrupts/{bank_ref}/respond", json={"output": {"approved": True}}, headers=ALICE
    )
    assert reply.status_code == 200 and served.ledger == ["5->z"]


async def test_the_genkit_endpoint_refuses_what_a_session_cannot_keep(served: Served, http, tmp_path):
    bank_id, bank_ref = await paused(http, served.bank, "bankingAgent", "Transfer $7 to y.")
    shell_id, shell_ref = await paused(http, served.shell, "shellAgent", "Run: rm -rf dist/")
    genkit_bank, genkit_shell = served.bank + "/agents/bankingAgent", served.shell + "/agents/shellAgent"
    snapshot = (
        await http.post(genkit_bank + "/getSnapshot", json={"data": {"sessionId": bank_id}}, headers=ALICE)
    ).json()
    snap = snapshot["result"]["snapshotId"]
    before = {
        "bank": await state(http, served.bank, "bankingAgent", bank_id),
        "shell": await state(http, served.shell, "shellAgent", shell_id),
    }
    elsewhere_before = read_elsewhere(str(tmp_path / "sessions.db"), [bank_id, shell_id])

    respond = '{"toolResponse": {"ref": "' + bank_ref + '", "name": "userApproval", "output": {"approved": true}}'
    where = [
        (genkit_bank, '{"data": {"resume": {"respond": [' + respond + '}], "metadata": {"m": @}}}, '
         '"init": {"snapshotId": "' + snap + '"}}', "$.metadata.m"),
        (genkit_bank, '{"data": {"resume": {"respond": [' + respond + ', "metadata": {"m": @}}]}}, '
         '"init": {"sessionId": "' + bank_id + '"}}', "$.respond[0].metadata.m"),
        (genkit_shell, '{"data": {"resume": {"restart": [{"toolRequest": {"ref": "' + shell_ref + '", "name": '
         '"run_shell", "input": {"command": "rm -rf dist/"}}, "metadata": {"resumed": {"m": @}}}]}}, '
         '"init": {"sessionId": "' + shell_id + '"}}', "$.restart[0].resumed_metadata.m"),
    ]  # fmt: skip
    failures = []
    for label, (value, status, code, rule) in VALUES.items():
        for url, template, path in where:
            for accept in ("application/json", "text/event-stream"):
                reply = await post(http, url, body(template, value), {**ALICE, "Accept": accept})
                try:
                    error = assert_error(reply, status, code or "invalid_answer", f"{label} at {path} ({accept})")
                    if rule is not None:
                        assert error["details"]["rule"] == rule and error["details"]["path"].startswith(path), error
                        assert error["status"] == "INVALID_ARGUMENT"
                except AssertionError as exc:
                    failures.append(str(exc))
    assert failures == []

    surrogate = '"\\ud800"'
    strings = [
        (genkit_bank, '{"data": {"message": {"role": "user", "content": [{"text": @}]}}}', "invalid_message"),
        (genkit_bank, '{"data": {"message": {"role": "user", "content": [{"media": {"url": @}}]}}}',
         "invalid_message"),
        (genkit_bank, '{"data": {"resume": {"respond": [{"toolResponse": {"ref": "' + bank_ref + '", "name": '
         '"userApproval", "output": {"approved": true, "feedback": @}}}]}}, "init": {"sessionId": "' + bank_id + '"}}',
         "invalid_answer"),
        (genkit_shell, '{"data": {"resume": {"restart": [{"toolRequest": {"ref": "' + shell_ref + '", "name": '
         '"run_shell", "input": {"command": @}}}]}}, "init": {"sessionId": "' + shell_id + '"}}', "invalid_answer"),
    ]  # fmt: skip
    for url, template, code in strings:
        for accept in ("application/json", "text/event-stream"):
            error = assert_error(await post(http, url, body(template, surrogate), {**ALICE, "Accept": accept}), 422,
                                 code, template)  # fmt: skip
            assert error["details"]["rule"] == "unpaired_surrogate"

    version = int(snap.rpartition(".")[2])
    arabic = str(version).translate(str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩"))
    message = {"role": "user", "content": [{"text": "hello"}]}
    cases = [(bank_id + ".²", "not_found"), (bank_id + "." + arabic, "not_found"), (bank_id + ".\u0661", "not_found"),
             ("\ud800.1", "not_found")]  # fmt: skip  # Genkit's SNAPSHOT_NOT_FOUND, whatever the session part names
    for bad, code in cases:
        for url, data in (
            (genkit_bank, {"data": {"message": message}, "init": {"snapshotId": bad}}),
            (genkit_bank + "/getSnapshot", {"data": {"snapshotId": bad}}),
            (genkit_bank + "/abort", {"data": {"snapshotId": bad}}),
        ):
            assert_error(await post(http, url, ascii_json(data), ALICE), 404, code, f"{bad} at {url}")
    for data in ({"data": {"sessionId": "\ud800"}}, {"data": {"sessionId": "a\x00b"}}):
        reply = await post(http, genkit_bank + "/getSnapshot", ascii_json(data), ALICE)
        assert_error(reply, 404, "session_not_found", str(data))
        resume = {"data": {"resume": {"respond": []}}, "init": data["data"]}
        assert_error(await post(http, genkit_bank, ascii_json(resume), ALICE), 404, "session_not_found", str(data))

    assert await state(http, served.bank, "bankingAgent", bank_id) == before["bank"]
    assert await state(http, served.shell, "shellAgent", shell_id) == before["shell"]
    assert read_elsewhere(str(tmp_path / "sessions.db"), [bank_id, shell_id]) == elsewhere_before
    assert served.ledger == [] and served.executed == []


async def test_abort_answers_only_for_snapshots_that_were_issued(served: Served, http):
    bank_id, bank_ref = await paused(http, served.bank, "bankingAgent", "Transfer $9 to x.")
    genkit = served.bank + "/agents/bankingAgent"
    first = (await http.post(genkit + "/getSnapshot", json={"data": {"sessionId": bank_id}}, headers=ALICE)).json()
    issued = int(first["result"]["snapshotId"].rpartition(".")[2])
    answer = {"output": {"approved": True}}
    done = await http.post(f"{served.bank}/v1/agents/bankingAgent/sessions/{bank_id}/interrupts/{bank_ref}/respond",
                           json=answer, headers=ALICE)  # fmt: skip
    latest = done.json()["version"]
    assert latest > issued + 1
    for version, status in ((0, 404), (1, 404), (issued - 1, 404), (issued, 200), (issued + 1, 404), (latest, 200)):
        reply = await http.post(genkit + "/abort", json={"data": {"snapshotId": f"{bank_id}.{version}"}}, headers=ALICE)
        assert reply.status_code == status, (version, reply.text)
        if status == 200:
            assert reply.json()["result"] == {"snapshotId": f"{bank_id}.{version}", "status": "completed"}


# -- who may do what --------------------------------------------------------------------------------


@pytest.fixture
def desk_served(tmp_path) -> Iterator[Served]:
    ledger: list[str] = []
    executed: list[dict[str, Any]] = []
    spec = {"backend": "sqlite", "path": str(tmp_path / "desk.db")}
    policy = OwnerPolicy(approvers={"desk"})
    events = LabEvents()
    with serve_in_thread(
        lambda: build_app(spec, ledger=ledger, executed=executed, policy=policy, events=events)
    ) as url:
        yield Served(url, ledger, executed, events)


async def test_approvers_answer_but_never_speak_in_anothers_session(desk_served: Served, http):
    served = desk_served
    session_id, ref = await paused(http, served.bank, "bankingAgent", "Transfer $5 to savings.")
    base = f"{served.bank}/v1/agents/bankingAgent/sessions/{session_id}"
    genkit = served.bank + "/agents/bankingAgent"
    snap = (await http.post(genkit + "/getSnapshot", json={"data": {"sessionId": session_id}}, headers=DESK)).json()
    snapshot_id = snap["result"]["snapshotId"]
    message = {"role": "user", "content": [{"text": "Transfer $5000 to desk."}]}
    # Each refusal says what the desk may not do (found by a probe: a cancel was told "may not send").
    forbidden = [
        (base + "/messages", {"message": "Transfer $5000 to desk."}, "may not send to session"),
        (base + "/cancel", {"reason": "mine now"}, "may not cancel the pauses of session"),
        (genkit, {"data": {"message": message}, "init": {"sessionId": session_id}}, "may not send to session"),
        (genkit, {"data": {"message": message}, "init": {"snapshotId": snapshot_id}}, "may not send to session"),
        (genkit + "/abort", {"data": {"snapshotId": snapshot_id}}, "may not abort the turns of session"),
    ]
    for url, data, said in forbidden:
        error = assert_error(await http.post(url, json=data, headers=DESK), 403, "forbidden", url)
        assert said in error["message"], error
        # not an approver: as a session (or a snapshot, in Genkit's words) that does not exist
        by_snapshot = "snapshotId" in json.dumps(data)
        hidden = assert_error(await http.post(url, json=data, headers=BOB), 404,
                              "not_found" if by_snapshot else "session_not_found", url)  # fmt: skip
        assert hidden["details"].get("reason") == ("SNAPSHOT_NOT_FOUND" if by_snapshot else None), hidden
    assert (await http.get(base, headers=DESK)).status_code == 200  # the desk sees the session
    reply = await http.post(base + f"/interrupts/{ref}/respond", json={"output": {"approved": True}}, headers=DESK)
    assert reply.status_code == 200 and served.ledger == ["5->savings"]
    reply = await http.post(base + "/messages", json={"message": "Thanks."}, headers=ALICE)
    assert reply.status_code == 200
    trail = (await http.get(base + "/audit", headers=DESK)).json()["entries"]
    assert [(e["decision"], e["principal"], e["via"]) for e in trail] == [
        ("message", "alice", "http"),
        ("respond", "desk", "http"),
        ("grant", "desk", "http"),  # the desk's yes grants the transfer it asked about
        ("approve", "desk", "policy"),  # ... which that grant approves: the desk's grant
        ("message", "alice", "http"),
    ]
    assert trail[0]["message"]["parts"][0]["text"] == "Transfer $5 to savings."
    genkit_turn = {
        "data": {"message": {"role": "user", "content": [{"text": "And?"}]}},
        "init": {"sessionId": session_id},
    }
    assert (await http.post(genkit, json=genkit_turn, headers=ALICE)).status_code == 200
    last = (await http.get(base + "/audit", headers=ALICE)).json()["entries"][-1]
    assert (last["decision"], last["principal"], last["via"]) == ("message", "alice", "genkit")


async def test_nothing_is_looked_up_before_authentication(served: Served, http):
    routes = [
        ("GET", "/v1/agents/{a}"),
        ("GET", "/v1/agents/{a}/sessions"),
        ("POST", "/v1/agents/{a}/sessions"),
        ("GET", "/v1/agents/{a}/sessions/s"),
        ("POST", "/v1/agents/{a}/sessions/s/messages"),
        ("GET", "/v1/agents/{a}/sessions/s/interrupts"),
        ("GET", "/v1/agents/{a}/sessions/s/audit"),
        ("GET", "/v1/agents/{a}/sessions/s/history"),
        ("POST", "/v1/agents/{a}/sessions/s/resume"),
        ("POST", "/v1/agents/{a}/sessions/s/cancel"),
        ("POST", "/v1/agents/{a}/sessions/s/interrupts/r/respond"),
        ("POST", "/agents/{a}"),
        ("POST", "/agents/{a}/getSnapshot"),
        ("POST", "/agents/{a}/abort"),
    ]
    for method, route in routes:
        for agent in ("bankingAgent", "noSuchAgent"):
            for headers in ({}, {"Authorization": "Bearer forged"}):
                reply = await http.request(method, served.bank + route.format(a=agent), json={}, headers=headers)
                assert_error(reply, 401, "unauthenticated", f"{method} {route} {agent} {headers}")


async def test_responses_are_hardened(served: Served, http):
    reply = await http.get(served.bank + "/", headers={"Host": "evil.example"}, follow_redirects=False)
    assert reply.status_code in (302, 307)
    assert reply.headers["location"] == "/bank/console/"  # a path on this server, whatever Host said
    reply = await http.get(served.bank + "/console", headers={"Host": "evil.example"}, follow_redirects=False)
    assert reply.headers["location"] == "/bank/console/"
    # A method a path does not take: 405, saying which it takes (every route's of that path).
    reply = await http.put(served.bank + "/v1/agents/bankingAgent/sessions", headers=ALICE)
    assert reply.status_code == 405 and reply.headers["allow"] == "GET, HEAD, POST"  # two routes, one path
    reply = await http.get(served.bank + "/agents/bankingAgent", headers=ALICE)
    assert reply.status_code == 405 and reply.headers["allow"] == "POST"
    # A slash too many is no redirect to a URL built from the Host header (found by a probe).
    for path in ("/v1/agents/", "/v1/feed/", "/healthz/", "/agents/bankingAgent/", "/openapi.json/"):
        reply = await http.get(served.bank + path, headers={**ALICE, "Host": "evil.example"}, follow_redirects=False)
        assert reply.status_code == 404 and "location" not in reply.headers, path
        assert reply.json()["error"]["code"] == "not_found", path
    session_id, _ = await paused(http, served.bank, "bankingAgent", "Transfer $1 to q.")
    checks = [
        await http.get(served.bank + "/v1/agents", headers=ALICE),
        await http.get(served.bank + "/v1/agents"),
        await http.get(served.bank + "/nowhere", headers=ALICE),
        await http.get(served.bank + "/openapi.json"),
        await http.get(served.bank + "/console/"),
        await http.get(f"{served.bank}/v1/agents/bankingAgent/sessions/{session_id}", headers=ALICE),
        await post(http, f"{served.bank}/v1/agents/bankingAgent/sessions", b'{"message": "\\ud800"}', ALICE),
        await http.post(
            f"{served.bank}/v1/agents/bankingAgent/sessions",
            json={"message": "hi"},
            headers={**ALICE, "Accept": "text/event-stream"},
        ),
    ]
    for reply in checks:
        assert reply.headers.get("x-content-type-options") == "nosniff", (reply.request.url, reply.headers)
    assert json.loads(checks[6].text)["error"]["code"] == "invalid_message"


async def test_values_at_the_deepest_limit_read_back_from_every_wire_reply(http):
    """``MAX_DEPTH`` (192) leaves room for the deepest wrapping a reply puts around a value: a
    tool input inside a Genkit snapshot. Each reply parses with pydantic-core's own JSON parser
    (what Genkit's client validates snapshots with), whose limit is 200 levels."""
    value: Any = 1
    for _ in range(191):
        value = [value]

    def app() -> Any:
        ai = Pausepoint()

        @ai.tool()
        async def hold(amount: Any, ctx: ToolRunContext) -> Any:
            """Pauses with its input as metadata."""
            if ctx.resumed_metadata is None:
                raise Interrupt({"amount": amount})
            return {"amount": amount}

        model = ScriptedModel([[tool_call("hold", {"amount": value})], "held"])
        ai.define_agent(name="deep", model=model, tools=[hold], json_limits=JsonLimits(max_depth=192))
        return create_app(ai, auth=BearerTokens(TOKENS))

    with serve_in_thread(app) as url:
        genkit = url + "/agents/deep"
        turn = {"data": {"message": {"role": "user", "content": [{"text": "hold it"}]}}}
        replies = [await http.post(genkit, json=turn, headers={**ALICE, "Accept": "text/event-stream"})]
        frames = [line[6:] for line in replies[0].text.splitlines() if line.startswith("data: ")]
        result = json.loads(frames[-1])["result"]
        session_id, snap = result["sessionId"], result["snapshotId"]
        replies.append(await http.post(genkit + "/getSnapshot", json={"data": {"snapshotId": snap}}, headers=ALICE))
        rest = f"{url}/v1/agents/deep/sessions/{session_id}"
        replies += [await http.get(rest + tail, headers=ALICE) for tail in ("", "/history", "/interrupts")]
        for reply in replies:
            assert reply.status_code == 200, reply.text[:300]
        for document in [*frames, *(r.text for r in replies[1:])]:
            from_json(document)  # within the parser's 200 levels
        parts = from_json(replies[1].text)["result"]["state"]["messages"][1]["content"]
        assert parts[0]["toolRequest"]["input"] == {"amount": value}
        assert parts[0]["metadata"]["interrupt"] == {"amount": value}


async def test_a_client_gone_before_its_body_arrived_is_no_server_error(served: Served, http, caplog):
    """A client that closes its connection in the middle of a request body: nothing is done,
    and the server logs the request (no error, no traceback)."""
    caplog.set_level(logging.INFO)
    url = httpx.URL(served.url)
    _, writer = await asyncio.open_connection(url.host, url.port)
    head = (
        "POST /bank/v1/agents/bankingAgent/sessions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer alice-token\r\n"
        "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
    )
    writer.write(head.encode() + b'{"message": "Transfer $5')
    await writer.drain()
    writer.close()
    await writer.wait_closed()
    for _ in range(1000):  # until the request is logged as served
        if any(r.name == "pausepoint.server.access" and "/sessions" in r.getMessage() for r in caplog.records):
            break
        await asyncio.sleep(0.01)
    access = [r for r in caplog.records if r.name == "pausepoint.server.access"]
    assert [r.status for r in access] == [400]  # type: ignore[attr-defined]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    reply = await http.get(f"{served.bank}/v1/agents/bankingAgent/sessions", headers=ALICE)
    assert reply.status_code == 200 and reply.json()["sessions"] == []
    assert served.ledger == []


async def test_unreadable_json_is_explained_to_the_caller_not_the_operator(served: Served, http):
    """What Python says of JSON it cannot read is advice for whoever runs the server
    ("use sys.set_int_max_str_digits()"): the caller is told what is wrong with the body."""
    url = served.bank + "/v1/agents/bankingAgent/sessions"
    reply = await post(http, url, body('{"message": "x", "n": @}', "9" * 5000), ALICE)
    error = assert_error(reply, 400, "invalid_request", "5,000 digits")
    assert "more than 4,300 digits" in error["message"] and "sys." not in error["message"]
    reply = await post(http, url, body('{"message": "x", "n": @}', deep(5000)), ALICE)
    error = assert_error(reply, 400, "invalid_request", "5,000 levels")
    assert error["message"] == "the request body is nested too deeply to parse"
