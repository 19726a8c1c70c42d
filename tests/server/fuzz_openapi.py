"""Fuzz a running server with schemathesis and hypothesis; print what failed as JSON.

    python -m tests.server.fuzz_openapi <base url> <token>

Three passes, each asserting no 5xx (and a JSON error body for every 4xx); the first, too, that
every status answered is one the document declares for its operation:

1. the OpenAPI document's operations, with bodies generated from their schemas (schemathesis);
2. the same operations with *nasty* bodies: the documented fields filled with values a session
   cannot keep or a server must not trip over — lone surrogates, NaN and Infinity literals,
   integers longer than Python prints, nesting hundreds of levels deep, Unicode digits — sent as
   raw JSON text, against a real paused session (so they reach the core, not only the parser);
3. the Genkit endpoint (``/agents/{agent}``, ``/getSnapshot``, ``/abort``), which the document
   does not describe, with wire-shaped bodies built from the same nasty values; streamed replies
   are read to the end and every SSE frame must be strict JSON (no NaN).

Run in a process of its own (see test_fuzz.py): outside pytest, schemathesis is imported as the
plain library it is, not through pytest's assertion rewriting (which, on CPython 3.11.7, can fail
to parse a module imported lazily deep in a test's stack: "AST constructor recursion depth
mismatch").
"""

from __future__ import annotations

import json
import sys
from typing import Any

import httpx
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error, status_code_conformance

AGENT = "bankingAgent"
# Values with no JSON literal of their own travel as markers, replaced in the encoded text.
BIG_INT, DEEP = "\x01big-int\x01", "\x01deep\x01"
RAW = {json.dumps(BIG_INT): "9" * 5000, json.dumps(DEEP): "[" * 1500 + "]" * 1500}

NASTY_SCALARS = st.sampled_from(
    [float("nan"), float("inf"), float("-inf"), "\ud800", "a\udfff", "²", "٣", "\x00", "", BIG_INT, DEEP, 10**700]
)
NASTY = st.recursive(
    NASTY_SCALARS | st.text(max_size=5) | st.integers() | st.floats() | st.booleans() | st.none(),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=3) | st.sampled_from(["\udc00", "²"]), inner, max_size=3)
        | st.builds(lambda v, n: _nest(v, n), inner, st.integers(150, 260))
    ),
    max_leaves=8,
)


def _nest(value: Any, levels: int) -> Any:
    for _ in range(levels):
        value = [value]
    return value


def encode(value: Any) -> bytes:
    """Raw JSON text for ``value``: NaN/Infinity literals, surrogates as escapes, markers expanded."""
    text = json.dumps(value, allow_nan=True)
    for marker, raw in RAW.items():
        text = text.replace(marker, raw)
    return text.encode()


def _strict(text: str) -> Any:
    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} in a reply")

    return json.loads(text, parse_constant=refuse)


def check_reply(reply: httpx.Response, label: str, failures: list[str]) -> None:
    """No 5xx; a 4xx carries a JSON error body; every SSE frame and JSON reply is strict JSON."""
    try:
        if reply.status_code >= 500:
            raise AssertionError(f"{reply.status_code}: {reply.text[:300]}")
        if reply.headers.get("content-type", "").startswith("text/event-stream"):
            for line in reply.text.splitlines():
                if line.startswith("data: "):
                    frame = _strict(line[6:])
                    error = frame.get("error") if isinstance(frame, dict) else None  # a response's error may be null
                    if isinstance(error, dict) and error.get("status") == "INTERNAL":
                        raise AssertionError(f"an internal error in the stream: {frame}")
        elif reply.content:
            payload = _strict(reply.text)
            if reply.status_code >= 400:
                assert set(payload["error"]) >= {"code", "status", "message", "details"}, payload
    except (AssertionError, ValueError, KeyError, TypeError) as exc:
        failures.append(f"{label}: {exc}")


def fuzz(base: str, token: str) -> dict[str, Any]:
    schema = schemathesis.openapi.from_url(base + "/openapi.json")
    schema.config.update(base_url=base)
    failures: list[str] = []
    operations = [o.ok() for o in schema.get_all_operations()]
    fuzzed = [op for op in operations if op.path != "/v1/feed"]  # the feed is endless: test_feed covers it
    for op in fuzzed:
        fuzz_operation(op, token, failures)
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
        session_id, ref = paused_session(client)
        nasty = [op for op in fuzzed if op.method.upper() == "POST"]
        for op in nasty:
            fuzz_nasty_body(client, op, session_id, ref, failures)
        genkit = fuzz_genkit(client, failures)
        still = client.get(f"/v1/agents/{AGENT}/sessions/{session_id}")
        if still.status_code != 200:  # whatever was sent, the session is still readable
            failures.append(f"the fuzzed session can no longer be read: {still.status_code} {still.text[:300]}")
    return {
        "operations": len(fuzzed),
        "nasty_operations": len(nasty),
        "genkit_operations": genkit,
        "failures": failures,
    }


def fuzz_operation(op: Any, token: str, failures: list[str]) -> None:
    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(case=op.as_strategy())
    def check(case: Any) -> None:
        for headers in ({"Authorization": f"Bearer {token}"}, {}):
            response = case.call(headers=headers, timeout=10)
            try:
                case.validate_response(response, checks=[not_a_server_error, status_code_conformance])
            except Exception as exc:
                failures.append(f"{op.method.upper()} {op.path}: {exc}")
                return

    check()


def paused_session(client: httpx.Client) -> tuple[str, str]:
    reply = client.post(f"/v1/agents/{AGENT}/sessions", json={"message": "Transfer $5 to fuzz."})
    reply.raise_for_status()
    body = reply.json()
    return body["session_id"], body["interrupts"][0]["ref"]


def _fields(op: Any) -> list[str]:
    """The top-level fields of the operation's request body (resolved from the document)."""
    content = (op.definition.raw.get("requestBody") or {}).get("content", {})
    ref = content.get("application/json", {}).get("schema", {}).get("$ref", "")
    schema = op.schema.raw_schema.get("components", {}).get("schemas", {}).get(ref.rpartition("/")[2], {})
    return list(schema.get("properties", {})) or ["message"]


def fuzz_nasty_body(client: httpx.Client, op: Any, session_id: str, ref: str, failures: list[str]) -> None:
    path = op.path.format(
        agent=AGENT, session_id=session_id, ref=ref, action="respond", tool="userApproval", delivery="0", grant_id="0"
    )
    fields = _fields(op)

    @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(
        body=st.dictionaries(st.sampled_from(fields), NASTY, min_size=1, max_size=3)
        | st.builds(
            lambda v: {"respond": [{"ref": ref, "name": "userApproval", "output": v, "metadata": {"m": v}}]}, NASTY
        )
        | NASTY,
        query=st.sampled_from(["", "?stream=true", "?limit=²&offset=٣"]),
    )
    def check(body: Any, query: str) -> None:
        reply = client.post(path + query, content=encode(body), headers={"Content-Type": "application/json"})
        check_reply(reply, f"POST {op.path} {encode(body)[:120]!r}", failures)

    check()


def fuzz_genkit(client: httpx.Client, failures: list[str]) -> int:
    session_id, ref = paused_session(client)
    snapshot = client.post(f"/agents/{AGENT}/getSnapshot", json={"data": {"sessionId": session_id}}).json()
    snap = snapshot["result"]["snapshotId"]
    ids = st.sampled_from([session_id, snap, session_id + ".²", session_id + ".٣", session_id + ".0", "\ud800.1"])
    value = NASTY | ids
    part = st.fixed_dictionaries(
        {},
        optional={
            "text": value,
            "media": st.fixed_dictionaries({"url": value}),
            "toolRequest": st.fixed_dictionaries(
                {"ref": st.just(ref) | value, "name": st.just("userApproval") | value, "input": value}
            ),
            "toolResponse": st.fixed_dictionaries(
                {"ref": st.just(ref) | value, "name": st.just("userApproval") | value, "output": value}
            ),
            "metadata": st.dictionaries(st.sampled_from(["interrupt", "resumed", "replacedInput", "\ud800"]), value),
        },
    )
    data = (
        st.fixed_dictionaries(
            {"message": st.fixed_dictionaries({"role": st.just("user") | value, "content": st.lists(part, max_size=3)})}
        )
        | st.fixed_dictionaries(
            {
                "resume": st.fixed_dictionaries(
                    {},
                    optional={
                        "respond": st.lists(part, max_size=2),
                        "restart": st.lists(part, max_size=2),
                        "metadata": value,
                    },
                )
            }
        )
        | value
    )
    init = st.fixed_dictionaries({}, optional={"sessionId": value, "snapshotId": value, "state": value})
    lookup = st.fixed_dictionaries({}, optional={"snapshotId": value, "sessionId": value}) | value
    endpoints = [
        (f"/agents/{AGENT}", st.fixed_dictionaries({"data": data}, optional={"init": init}) | value),
        (f"/agents/{AGENT}/getSnapshot", st.fixed_dictionaries({"data": lookup}) | value),
        (f"/agents/{AGENT}/abort", st.fixed_dictionaries({"data": lookup}) | value),
        ("/agents/noSuchAgent", st.fixed_dictionaries({"data": data}) | value),
    ]
    for path, bodies in endpoints:
        fuzz_endpoint(client, path, bodies, failures)
    return len(endpoints)


def fuzz_endpoint(client: httpx.Client, path: str, bodies: Any, failures: list[str]) -> None:
    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(body=bodies, accept=st.sampled_from(["application/json", "text/event-stream"]))
    def check(body: Any, accept: str) -> None:
        headers = {"Content-Type": "application/json", "Accept": accept}
        reply = client.post(path, content=encode(body), headers=headers)
        check_reply(reply, f"POST {path} {encode(body)[:120]!r}", failures)

    check()


if __name__ == "__main__":
    print(json.dumps(fuzz(sys.argv[1], sys.argv[2])))
