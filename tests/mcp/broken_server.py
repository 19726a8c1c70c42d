"""Real MCP servers that misbehave, for the tests of what pausepoint makes of them.

``python -m tests.mcp.broken_server`` speaks MCP over stdio by hand (raw JSON-RPC lines, so it
can break the protocol in ways the SDK's server never would): it offers one tool, ``pay``, and
``BROKEN`` says how it misbehaves:

- ``list-garbage``: ``tools/list`` answers ``{"tools": "garbage"}``;
- ``call-garbage``: ``tools/call`` answers ``{"content": 42, "isError": "maybe"}``;
- ``call-not-json``: ``tools/call`` is answered by a line that is not JSON, and nothing else;
- ``hello-not-json``: every request, the handshake's first, is answered by a line that is not JSON;
- ``ask-bad-ref``: ``tools/call`` asks a question whose ``requestedSchema`` refers to nothing;
- ``call-rpc-error``: the first ``tools/call`` is answered with a JSON-RPC error of code ``CODE``
  and message "bank closed" (the later ones are paid);
- ``call-hang``: ``tools/call`` is never answered; ``list-hang``: ``tools/list`` is never answered;
- ``call-asks-roots``: a handshake-era server whose ``tools/call`` first asks the client for its
  roots (``roots/list``) and answers the call with what the client answered, as JSON;
- ``list-twice``: ``tools/list`` lists ``pay`` twice, with two different schemas;
- ``list-same-cursor``: every page of ``tools/list`` says the next is at the cursor ``same``;
- ``list-endless``: every page of ``tools/list`` has a next one, at a new cursor;
- ``call-off-schema``: ``pay`` declares an output schema (an integer ``total``), and
  ``tools/call`` answers structured content that fails it (``total`` is a string);
- ``list-ref``: ``pay``'s ``amount`` is ``{"$ref": REF}``; ``list-ref-cycle``: references that
  only lead to each other.

``python -m tests.mcp.broken_server --http PORT`` is the bank of ``bank_server`` behind a broken
gateway: the bank runs every call, then the gateway replaces its answer to ``tools/call`` with
``BROKEN``: ``502`` (a Bad Gateway page), ``html`` (a 200 HTML page) or ``sse`` (an event stream
whose message is not JSON); with ``BROKEN=403`` the
gateway refuses every ``tools/call`` (a 403 page) without passing it on. It prints its URL.

Every call that reaches ``pay`` or a bank tool is appended to the file ``BANK_LEDGER`` (with
``call-rpc-error``, with the server's process id: a server started again is another process).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from tests.mcp.bank_server import record

BROKEN = os.environ.get("BROKEN", "")
CALLS: list[int] = []

PAY = {
    "name": "pay",
    "description": "Pay someone.",
    "inputSchema": {"type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"]},
}

#: the output schema ``pay`` declares with ``call-off-schema``
OFF_SCHEMA = {"type": "object", "properties": {"total": {"type": "integer"}}, "required": ["total"]}


def answer(message: dict[str, Any]) -> dict[str, Any] | None:
    """The result of one request (None: the request is answered otherwise, or not at all)."""
    method = message["method"]
    if method == "server/discover" and BROKEN != "call-asks-roots":  # a 2026-07-28 server
        return {
            "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {}},
            "resultType": "complete",
            "ttlMs": 0,
            "cacheScope": "private",
        }
    if method == "initialize":
        return {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "broken", "version": "1"},
        }
    if method == "tools/list":
        return listing(message.get("params") or {})
    if method == "tools/call":
        return call(message)
    if method == "ping":
        return {}
    raise LookupError(method)


def listing(params: dict[str, Any]) -> dict[str, Any] | None:
    listed: dict[str, Any] = {"resultType": "complete", "ttlMs": 0, "cacheScope": "private", "tools": [PAY]}
    if BROKEN == "list-hang":
        return None
    if BROKEN == "list-garbage":
        listed["tools"] = "garbage"
    elif BROKEN == "list-twice":
        listed["tools"] = [PAY, {**PAY, "inputSchema": {"type": "object", "properties": {"to": {"type": "string"}}}}]
    elif BROKEN == "list-same-cursor":
        listed["nextCursor"] = "same"
    elif BROKEN == "list-endless":
        listed["nextCursor"] = str(int(params.get("cursor") or 0) + 1)
    elif BROKEN == "call-off-schema":
        listed["tools"] = [{**PAY, "outputSchema": OFF_SCHEMA}]
    elif BROKEN in ("list-ref", "list-ref-cycle"):
        listed["tools"] = [{**PAY, "inputSchema": schema_with_ref()}]
    return listed


def schema_with_ref() -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": {"amount": {"$ref": os.environ.get("REF", "#/$defs/a")}}}
    if BROKEN == "list-ref-cycle":
        schema["$defs"] = {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}
    return schema


def call(message: dict[str, Any]) -> dict[str, Any] | None:
    CALLS.append(1)
    process = {"pid": os.getpid()} if BROKEN == "call-rpc-error" else {}
    record("pay", **process, **message["params"].get("arguments", {}))
    paid = {"content": [{"type": "text", "text": "paid"}], "resultType": "complete"}
    if BROKEN == "call-not-json":
        write_line("Traceback (most recent call last): the server broke")
        return None
    if BROKEN == "ask-bad-ref":  # a question whose schema refers to nothing
        schema = {"type": "object", "properties": {"who": {"$ref": "#/nowhere"}}}
        params = {"mode": "form", "message": "Who?", "requestedSchema": schema}
        asked = {"method": "elicitation/create", "params": params}
        return {"resultType": "input_required", "inputRequests": {"q": asked}, "requestState": "s"}
    if BROKEN == "call-off-schema":
        return {"content": [], "structuredContent": {"total": "not a number"}, "resultType": "complete"}
    if BROKEN == "call-garbage":
        return {"content": 42, "isError": "maybe"}
    if BROKEN == "call-hang":
        return None
    if BROKEN == "call-rpc-error" and len(CALLS) == 1:
        error = {"code": int(os.environ["CODE"]), "message": "bank closed"}
        write_line(json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": error}))
        return None
    if BROKEN == "call-asks-roots":
        write_line(json.dumps({"jsonrpc": "2.0", "id": "roots-1", "method": "roots/list"}))
        answered = next(m for m in map(json.loads, sys.stdin) if m.get("id") == "roots-1" and "method" not in m)
        return {"content": [{"type": "text", "text": json.dumps(answered.get("result", answered))}]}
    return paid


def write_line(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def serve_stdio() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        if BROKEN == "hello-not-json":  # a log line on stdout before (instead of) the handshake's answer
            write_line("starting the bank... done")
            continue
        if "id" not in message or "method" not in message:
            continue  # a notification, or an answer to nothing this server asked
        try:
            result = answer(message)
        except LookupError:  # server/discover among them: the client falls back to initialize
            error = {"code": -32601, "message": f"no method {message['method']!r}"}
            write_line(json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": error}))
            continue
        if result is not None:
            write_line(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}))


class BrokenGateway:
    """An ASGI app in front of the bank: the bank's answer to a ``tools/call`` is thrown away and
    replaced by what a broken gateway sends (see the module docstring)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body = b""
        more = True
        while more:
            event = await receive()
            body += event.get("body", b"")
            more = event.get("more_body", False)
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        if b'"tools/call"' not in body:
            await self.app(scope, replay, send)
            return

        async def swallow(event: dict[str, Any]) -> None:
            pass  # the bank's answer: the gateway loses it

        if BROKEN == "403":
            status, page = 403, b"<html><body><h1>403 Forbidden</h1></body></html>"
        elif BROKEN == "502":
            await self.app(scope, replay, swallow)
            status, page = 502, b"<html><body><h1>502 Bad Gateway</h1></body></html>"
        else:
            await self.app(scope, replay, swallow)
            status, page = 200, b"<html><body>Welcome to our site!</body></html>"
        content_type = b"text/html"
        if BROKEN == "sse":
            content_type, page = b"text/event-stream", b"event: message\ndata: <html>oops</html>\n\n"
        headers = [(b"content-type", content_type), (b"content-length", str(len(page)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": page})


def serve_http(port: int) -> None:
    import asyncio
    import socket

    import uvicorn

    from tests.mcp.bank_server import mcp

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(64)
    print(f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", flush=True)
    config = uvicorn.Config(BrokenGateway(mcp.streamable_http_app()), log_level="warning")
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        serve_http(int(sys.argv[2]))
    else:
        serve_stdio()
