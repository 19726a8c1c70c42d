"""Agents served over MCP: an MCP client (the SDK's own) sends messages and answers pauses."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from importlib import metadata
from typing import Any

import httpx2
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from pausepoint.server import BearerTokens, Limits, OwnerPolicy, create_app
from tests.server.harness import serve_in_thread

from .conftest import ROOT, SLOW

AGENT = "bankingAgent"


def banking() -> Any:
    from examples import banking_mcp  # imported here: it starts the MCP bank to list its tools

    return banking_mcp


async def call(client: Client, tool: str, **arguments: Any) -> Any:
    """A tool's result as data; a tool error as ``("error", text)``."""
    result = await client.call_tool(tool, arguments)
    text = "\n".join(b.text for b in result.content if hasattr(b, "text"))
    if result.is_error:
        return ("error", text)
    if result.structured_content is not None:
        content = result.structured_content
        return content["result"] if set(content) == {"result"} else content
    return json.loads(text)


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    module = banking()
    tokens = BearerTokens({"alice-token": "alice", "desk-token": "desk", "eve-token": "eve"})

    def factory() -> Any:
        return create_app(module.ai, auth=tokens, policy=OwnerPolicy(approvers={"desk"}), mcp=True)

    with serve_in_thread(factory) as url:
        yield url


def http_client(url: str, token: str | None) -> Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return Client(streamable_http_client(f"{url}/mcp", http_client=httpx2.AsyncClient(headers=headers, timeout=SLOW)))


async def test_an_mcp_client_sends_a_message_and_approves_the_pause(served: str) -> None:
    async with http_client(served, "alice-token") as alice:
        await approves(alice)


async def approves(alice: Client) -> None:
    agents = await call(alice, "list_agents")
    assert [a["name"] for a in agents] == [AGENT]
    reply = await call(alice, "send_message", agent=AGENT, text="Transfer $500 to savings.")
    assert reply["finish_reason"] == "interrupted"
    (pause,) = reply["pauses"]
    assert pause["tool"] == "transfer_money" and pause["input"] == {"amount": "500", "to_account": "savings"}
    assert pause["answers"] == ["approve", "deny"]  # the approval policy: a gated call takes no made-up result
    inbox = await call(alice, "list_pending", agent=AGENT)
    assert [(s["session_id"], [p["ref"] for p in s["pauses"]]) for s in inbox] == [
        (reply["session_id"], [pause["ref"]])
    ]
    done = await call(
        alice, "answer_pause", agent=AGENT, session_id=reply["session_id"], ref=pause["ref"], decision="approve"
    )
    assert done["finish_reason"] == "stop" and done["text"] == "Transferred $500.00 to savings."
    again = await call(
        alice, "answer_pause", agent=AGENT, session_id=reply["session_id"], ref=pause["ref"], decision="approve"
    )
    assert again[0] == "error" and "already_resolved" in again[1]
    trail = await banking().banking_agent.chat(reply["session_id"]).audit_trail()
    assert [(e.decision, e.principal, e.via) for e in trail] == [
        ("message", "alice", "mcp"),
        ("approve", "alice", "mcp"),
    ]


async def test_the_banks_question_reaches_the_mcp_client_as_a_pause_it_answers(served: str) -> None:
    async with http_client(served, "alice-token") as alice:
        await answers_the_question(alice)


async def answers_the_question(alice: Client) -> None:
    reply = await call(alice, "send_message", agent=AGENT, text="Open a savings account.")
    (pause,) = reply["pauses"]
    assert pause["metadata"]["elicitation"]["message"] == "Who will hold the new savings account?"
    assert "mcp_round" not in pause["metadata"]  # the bank's sealed state: for the call, not for people
    assert pause["answers"] == ["deny", "respond"] and pause["output_schema"]["required"] == ["holder"]
    bad = await call(
        alice, "answer_pause", agent=AGENT, session_id=reply["session_id"], ref=pause["ref"], decision="respond",
        output={"name": "x"},
    )  # fmt: skip
    assert bad[0] == "error" and "invalid_answer" in bad[1]
    done = await call(
        alice, "answer_pause", agent=AGENT, session_id=reply["session_id"], ref=pause["ref"], decision="respond",
        output={"holder": "Alice Martin"},
    )  # fmt: skip
    assert done["text"] == "Opened a savings account for Alice Martin."


async def test_a_denial_continues_the_conversation_and_the_session_id_continues_it(served: str) -> None:
    async with http_client(served, "alice-token") as alice:
        await denies(alice)


async def denies(alice: Client) -> None:
    reply = await call(alice, "send_message", agent=AGENT, text="Transfer $500 to savings.")
    ref = reply["pauses"][0]["ref"]
    denied = await call(
        alice, "answer_pause", agent=AGENT, session_id=reply["session_id"], ref=ref, decision="deny", reason="too much"
    )
    assert denied["text"] == "I did not do it: too much."
    more = await call(alice, "send_message", agent=AGENT, text="Hello", session_id=reply["session_id"])
    assert more["session_id"] == reply["session_id"] and more["text"] == "I can transfer money or open an account."


async def test_arguments_a_tool_does_not_take_are_refused_as_every_refusal_reads(served: str) -> None:
    async with http_client(served, "alice-token") as alice:
        reply = await call(alice, "send_message", agent=AGENT, text="Transfer $7 to savings.")
        session, ref = reply["session_id"], reply["pauses"][0]["ref"]
        maybe = await call(alice, "answer_pause", agent=AGENT, session_id=session, ref=ref, decision="maybe")
        assert maybe[0] == "error"
        assert "invalid_request: decision: Input should be 'approve', 'deny' or 'respond'" in maybe[1]
        assert "pydantic" not in maybe[1] and "validation error" not in maybe[1]
        missing = await call(alice, "answer_pause", agent=AGENT, session_id=session, decision="approve")
        assert missing[0] == "error" and "invalid_request: ref: Field required" in missing[1]
        # what a decision does not take is refused, as REST refuses it (found by a probe: an
        # approval's reason was dropped, a denial's output taken and ignored)
        for decision, extra in (("approve", {"reason": "because"}), ("deny", {"output": {"x": 1}, "reason": "no"})):
            given = {"decision": decision, **extra}
            extra_refused = await call(alice, "answer_pause", agent=AGENT, session_id=session, ref=ref, **given)
            assert extra_refused[0] == "error" and f"invalid_request: {decision!r} takes" in extra_refused[1], decision
        approved = await call(alice, "answer_pause", agent=AGENT, session_id=session, ref=ref, decision="approve")
        assert approved["finish_reason"] == "stop"  # nothing was answered by the refused calls


async def test_the_mcp_endpoint_uses_the_apps_tokens_and_policy(served: str) -> None:
    async with http_client(served, "alice-token") as alice:
        reply = await call(alice, "send_message", agent=AGENT, text="Transfer $500 to savings.")
        unknown = await call(alice, "send_message", agent="nobody", text="hi")
        assert unknown[0] == "error" and "no agent named 'nobody'" in unknown[1]
    ref = reply["pauses"][0]["ref"]
    async with httpx2.AsyncClient() as raw:
        refused = await raw.post(f"{served}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer")
    assert refused.json()["error"]["data"]["code"] == "unauthenticated"  # the app's error, in a JSON-RPC one
    # A name given twice is refused, as on REST (found by a probe: the last was taken, so a deny
    # followed by an approve approved what a proxy reading the first saw denied).
    call_body = (
        '{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "answer_pause", "arguments": '
        f'{{"agent": "{AGENT}", "session_id": "{reply["session_id"]}", "ref": "{ref}", "decision": "deny", '
        '"reason": "no", "decision": "approve"}}}'
    )
    async with httpx2.AsyncClient(timeout=30) as raw:
        twice = await raw.post(
            f"{served}/mcp", content=call_body,
            headers={"Authorization": "Bearer alice-token", "Content-Type": "application/json",
                     "Accept": "application/json, text/event-stream"},
        )  # fmt: skip
    assert twice.status_code == 400 and "is given twice" in twice.json()["error"]["message"]
    async with httpx2.AsyncClient(timeout=30) as raw:  # a JSON-RPC error too, not the SDK's plain text
        typed = await raw.post(f"{served}/mcp", content=call_body, headers={"Authorization": "Bearer alice-token",
                                                                            "Content-Type": "text/plain"})  # fmt: skip
    assert typed.status_code == 400 and "not text/plain" in typed.json()["error"]["message"]
    async with http_client(served, "alice-token") as alice:
        long_key = await call(
            alice, "answer_pause", agent=AGENT, session_id=reply["session_id"], ref=ref, decision="deny",
            reason="no", idempotency_key="k" * 201,
        )  # fmt: skip
        assert long_key[0] == "error" and "idempotency_key must have 1 to 200 characters" in long_key[1]
        inbox = await call(alice, "list_pending")
        assert [p["ref"] for s in inbox for p in s["pauses"]] == [ref]  # nothing answered
    # GET opens no stream (stateless): 405 at once, as the protocol allows (found by a probe: it
    # hung); DELETE ends no session, 405 too (it said "not valid JSON"); a batch is no message
    # (it got the SDK's pydantic report as -32602)
    async with httpx2.AsyncClient(timeout=30, headers={"Authorization": "Bearer alice-token"}) as raw:
        for method in ("GET", "DELETE", "PUT"):
            got = await raw.request(method, f"{served}/mcp")
            assert (got.status_code, got.headers["allow"]) == (405, "POST"), method
            assert got.json()["error"]["data"]["code"] == "invalid_request"
        listing = '{"jsonrpc": "2.0", "id": 8, "method": "tools/list"}'
        batch = await raw.post(f"{served}/mcp", content=f"[{listing}]", headers={"Content-Type": "application/json"})
    assert batch.status_code == 400 and batch.json()["error"]["code"] == -32600
    assert "not a batch" in batch.json()["error"]["message"]
    async with http_client(served, "eve-token") as eve:
        assert await call(eve, "list_pending") == []
        hidden = await call(
            eve, "answer_pause", agent=AGENT, session_id=reply["session_id"], ref=ref, decision="approve"
        )
        assert hidden[0] == "error" and "session_not_found" in hidden[1]
        other = await call(eve, "send_message", agent=AGENT, text="hi", session_id=reply["session_id"])
        assert other[0] == "error" and "session_not_found" in other[1]
    async with http_client(served, "desk-token") as desk:  # an approvals desk sees and answers every session
        inbox = await call(desk, "list_pending", agent=AGENT)
        assert reply["session_id"] in [s["session_id"] for s in inbox]
        done = await call(
            desk, "answer_pause", agent=AGENT, session_id=reply["session_id"], ref=ref, decision="approve"
        )
        assert done["text"] == "Transferred $500.00 to savings."


async def test_a_lone_surrogate_is_refused_naming_where_it_is_not_as_a_parse_error(served: str) -> None:
    """Found by a probe: REST refuses "hi \\ud800" by its path and rule; MCP answered the SDK's
    parse error "unexpected end of hex escape", with no path. Then (a second probe) an HTTP 400
    JSON-RPC error with a null id, ``invalid_request``: a tool's refusal is now its tool error, as
    REST's is (``invalid_message`` for a message, ``invalid_answer`` for an answer), naming the
    argument and the rule; any other request keeps its id. A pair (an emoji) is text."""

    def request(tool: str, arguments: str, method: str = "tools/call") -> str:
        params = f'{{"name": "{tool}", "arguments": {arguments}}}'
        return f'{{"jsonrpc": "2.0", "id": 9, "method": "{method}", "params": {params}}}'

    def sent(text_escaped: str) -> str:
        return request("send_message", f'{{"agent": "{AGENT}", "text": "{text_escaped}"}}')

    answer = request("answer_pause", f'{{"agent": "{AGENT}", "session_id": "s", "ref": "r", "decision": "deny", '
                                     '"reason": "no \\udc00"}')  # fmt: skip
    headers = {"Authorization": "Bearer alice-token", "Content-Type": "application/json",
               "Accept": "application/json, text/event-stream"}  # fmt: skip
    async with httpx2.AsyncClient(timeout=30, headers=headers) as raw:
        lone = await raw.post(f"{served}/mcp", content=sent("hi \\ud800"))
        denied = await raw.post(f"{served}/mcp", content=answer)
        other = await raw.post(f"{served}/mcp", content=request("x", '{"q": "\\ud800"}', method="prompts/get"))
        pair = await raw.post(f"{served}/mcp", content=sent("hi \\ud83d\\ude00"))
    for reply, tool, code, path in (
        (lone, "send_message", "invalid_message", "$.text"),
        (denied, "answer_pause", "invalid_answer", "$.reason"),
    ):
        assert reply.status_code == 200 and reply.json()["id"] == 9, reply.text
        result = reply.json()["result"]  # as every tool error reads (the SDK's server's prefix)
        assert result["isError"] and result["content"][0]["text"].startswith(f"Error executing tool {tool}: {code}: ")
        assert f"{path}: a lone surrogate" in result["content"][0]["text"], result
    assert other.status_code == 400 and other.json()["id"] == 9 and other.json()["error"]["code"] == -32600, other.text
    refused = other.json()["error"]["data"]
    assert (refused["details"]["path"], refused["details"]["rule"]) == ("$.params.arguments.q", "unpaired_surrogate")
    assert pair.status_code == 200 and "result" in pair.json(), pair.text


async def test_an_answer_no_session_keeps_is_named_by_the_tools_own_argument(served: str) -> None:
    """Found by a probe: a lone surrogate in ``output`` was named ``$.output...``, but a number past
    a double's range, a value nested too deep or a 700-digit integer in the same argument were named
    ``$.respond[0].output...``, a list the MCP caller never wrote. Each is ``$.output...`` now."""
    async with http_client(served, "alice-token") as alice:
        reply = await call(alice, "send_message", agent=AGENT, text="Open a savings account.")
        (pause,) = reply["pauses"]
        where = {"agent": AGENT, "session_id": reply["session_id"], "ref": pause["ref"]}
        deep: Any = []
        for _ in range(110):  # deeper than a session keeps
            deep = [deep]
        for output, said in (
            ({"account": "x", "n": 7 * 10**700}, "$.output.n: an integer of more than 640 digits"),
            ({"account": "x", "n": deep}, "$.output.n[0][0]"),
        ):
            refused = await call(alice, "answer_pause", decision="respond", output=output, **where)
            assert refused[0] == "error" and "invalid_answer: the answer cannot be recorded: " in refused[1], refused
            assert said in refused[1] and "$.respond" not in refused[1], refused
        assert await call(alice, "list_pending", agent=AGENT) != []  # nothing answered


async def test_an_argument_a_tool_does_not_take_is_refused_not_dropped(served: str) -> None:
    """Found by a probe: unknown arguments were dropped — ``sessionId`` sent the message into a
    new session, a misspelled ``idempotencyKey`` let a retry record the message twice, ``pauseId``
    lost the check that the answer goes to that pause. REST refuses the same mistakes."""
    async with http_client(served, "alice-token") as alice:
        before = await call(alice, "list_pending", agent=AGENT)
        for tool, arguments, named in (
            ("send_message", {"agent": AGENT, "text": "Hello", "sessionId": "s-1"}, "sessionId"),
            ("send_message", {"agent": AGENT, "text": "Hello", "idempotencyKey": "k-1"}, "idempotencyKey"),
            ("answer_pause", {"agent": AGENT, "session_id": "s", "ref": "r", "decision": "approve", "pauseId": "p"},
             "pauseId"),
            ("list_agents", {"verbose": True}, "verbose"),
        ):  # fmt: skip
            refused = await call(alice, tool, **arguments)
            assert refused[0] == "error" and f"invalid_request: {tool} takes no argument '{named}'" in refused[1]
        assert await call(alice, "list_pending", agent=AGENT) == before  # nothing sent, nothing answered


async def test_a_request_a_reply_could_not_name_is_refused_not_dropped(served: str) -> None:
    """Found by a probe: an id of 1.5, true, null, {} was taken for a notification — 202, no
    answer ever, nothing run; another JSON-RPC version got the SDK's pydantic dump."""
    headers = {"Authorization": "Bearer alice-token", "Content-Type": "application/json",
               "Accept": "application/json, text/event-stream"}  # fmt: skip
    async with httpx2.AsyncClient(timeout=30, headers=headers) as raw:
        for version, given in (("2.0", "1.5"), ("2.0", "true"), ("2.0", "null"), ("2.0", "{}"), ("1.0", "1")):
            body = f'{{"jsonrpc": "{version}", "id": {given}, "method": "tools/list"}}'
            reply = await raw.post(f"{served}/mcp", content=body)
            assert reply.status_code == 400 and reply.json()["error"]["code"] == -32600, (body, reply.text)
            assert reply.json()["error"]["data"]["code"] == "invalid_request"
        # found by a second probe: JSON that is no JSON-RPC object got the SDK's pydantic text (naming
        # its classes), code -32602 and no app error; another encoding than UTF-8, an untyped -32700
        for body, said in (
            ("null", "a JSON object, not null"),
            ('"x"', "a JSON object, not a string"),
            ("1", "a JSON object, not a number"),
            ('{"jsonrpc": "2.0"}', "has a method (a request, a notification) or an id and a result or error"),
            (
                '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": []}',
                "params are a JSON object, not an array",
            ),
            ('{"jsonrpc": "2.0", "id": 1, "method": 5}', "method is a string, not a number"),
            ("{}", '("jsonrpc": "2.0"), not missing'),
        ):
            reply = await raw.post(f"{served}/mcp", content=body)
            assert reply.status_code == 400 and reply.json()["error"]["code"] == -32600, (body, reply.text)
            assert reply.json()["error"]["data"]["code"] == "invalid_request", (body, reply.text)
            assert said in reply.json()["error"]["message"], (body, reply.text)
            assert "JSONRPC" not in reply.text and "pydantic" not in reply.text, reply.text
        utf16 = '{"jsonrpc": "2.0", "id": "a", "method": "tools/list"}'.encode("utf-16")
        reply = await raw.post(f"{served}/mcp", content=utf16)
        assert reply.status_code == 400 and reply.json()["error"]["data"]["code"] == "invalid_request", reply.text
        listed = await raw.post(f"{served}/mcp", content='{"jsonrpc": "2.0", "id": "a", "method": "tools/list"}')
    assert listed.status_code == 200 and listed.json()["id"] == "a"


async def test_the_mcp_endpoint_holds_requests_to_the_apps_limits(served: str) -> None:
    """As REST does (found by a probe: MCP took a 300 KB message, and read a 2 MB body): a
    message over ``max_message_bytes`` (256 KiB) is refused and nothing is recorded; a body over
    ``max_body_bytes`` (1 MiB) is abandoned, 413 with the app's error in a JSON-RPC one."""
    async with http_client(served, "alice-token") as alice:
        refused = await call(alice, "send_message", agent=AGENT, text="a" * 300_000, session_id="too-long")
        assert refused[0] == "error" and "request_too_large" in refused[1], refused
    async with httpx2.AsyncClient(headers={"Authorization": "Bearer alice-token"}) as raw:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"pad": "x" * 2_000_000}}
        reply = await raw.post(f"{served}/mcp", json=body)
        gone = await raw.get(f"{served}/v1/agents/{AGENT}/sessions/too-long")
    assert reply.status_code == 413 and reply.json()["error"]["data"]["code"] == "request_too_large"
    assert gone.status_code == 404  # the long message made no session


async def test_the_mcp_endpoint_refuses_a_send_past_the_apps_history_limit_as_rest_does() -> None:
    """Found by a probe: with ``Limits(max_history=...)``, REST, the Genkit wire and the client
    refused sends past it (422 ``history_too_long``); MCP's ``send_message`` took every one, and
    an MCP caller could grow a session's log without bound."""
    module = banking()
    tokens = BearerTokens({"alice-token": "alice"})

    def factory() -> Any:
        return create_app(module.ai, auth=tokens, mcp=True, limits=Limits(max_history=6))

    with serve_in_thread(factory) as url:
        async with http_client(url, "alice-token") as alice:
            for _ in range(2):  # 4 records, then 7: each send taken while under 6
                assert (await call(alice, "send_message", agent=AGENT, text="Hello", session_id="hist"))["text"]
            refused = await call(alice, "send_message", agent=AGENT, text="Hello", session_id="hist")
        async with httpx2.AsyncClient(headers={"Authorization": "Bearer alice-token"}) as raw:
            rest = await raw.post(f"{url}/v1/agents/{AGENT}/sessions/hist/messages", json={"message": "Hello"})
            held = (await raw.get(f"{url}/v1/agents/{AGENT}/sessions/hist")).json()["session"]["version"]
    assert refused[0] == "error" and refused[1].startswith("Error executing tool send_message: history_too_long:")
    assert rest.status_code == 422 and rest.json()["error"]["code"] == "history_too_long"
    assert held == 7  # nothing recorded by either refusal


async def test_a_wrong_token_reaches_the_mcp_client_as_the_reason_it_was_refused(served: str) -> None:
    """The SDK's client reads a JSON-RPC error in a 401 (anything else there is its own "Server
    returned an error response"), so the endpoint refuses with one: the app's reason, and its
    error body as the error's data."""
    with pytest.raises(BaseException) as raised:  # the SDK raises it from its task groups
        async with http_client(served, "wrong-token") as client:
            await client.list_tools()
    (refused,) = {str(leaf) for leaf in leaves(raised.value) if isinstance(leaf, MCPError)}
    assert refused == "unauthenticated: missing or invalid credentials (send 'Authorization: Bearer <token>')"
    async with httpx2.AsyncClient(headers={"Authorization": "Bearer wrong-token"}) as raw:
        reply = await raw.post(f"{served}/mcp", json={"jsonrpc": "2.0", "id": 7, "method": "tools/list"})
    assert reply.status_code == 401 and reply.headers["www-authenticate"] == 'Bearer realm="pausepoint"'
    body = reply.json()
    assert body["jsonrpc"] == "2.0" and body["id"] is None and body["error"]["message"] == refused
    assert body["error"]["data"]["code"] == "unauthenticated" and body["error"]["data"]["status"] == "UNAUTHENTICATED"


def leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


async def test_served_over_stdio_by_the_cli() -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "pausepoint", "serve", "examples.banking_mcp:ai", "--mcp-stdio", "alice"],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT)},
    )
    async with Client(params) as client:
        # named with the installed version, as `pausepoint --version` (found by a probe: an empty one)
        assert (client.server_info.name, client.server_info.version) == ("pausepoint", metadata.version("pausepoint"))
        reply = await call(client, "send_message", agent=AGENT, text="Transfer $500 to savings.")
        (pause,) = reply["pauses"]
        done = await call(
            client, "answer_pause", agent=AGENT, session_id=reply["session_id"], ref=pause["ref"], decision="approve"
        )
        assert done["text"] == "Transferred $500.00 to savings."


async def test_the_consoles_validate_route_checks_an_mcp_tools_input_with_its_json_schema(served: str) -> None:
    url = f"{served}/v1/agents/{AGENT}/tools/transfer_money/validate"
    async with httpx2.AsyncClient(headers={"Authorization": "Bearer alice-token"}) as http:
        bad = (await http.post(url, json={"input": {"amount": [1], "to_account": "savings"}})).json()
        good = (await http.post(url, json={"input": {"amount": "12.50", "to_account": "savings"}})).json()
    assert bad["valid"] is False
    assert [(e["path"], e["pointer"], e["type"]) for e in bad["errors"]] == [(["amount"], "/amount", "json_schema")]
    assert good == {"valid": True, "errors": [], "value": {"amount": "12.50", "to_account": "savings"}}


async def test_a_message_to_a_session_with_paused_calls_says_to_answer_them_with_answer_pause(served: str) -> None:
    """The refusal names what an MCP client has (``answer_pause``), not ``Chat``'s methods."""
    async with http_client(served, "alice-token") as alice:
        reply = await call(alice, "send_message", agent=AGENT, text="Transfer $7 to savings.", session_id="mcp-busy-1")
        assert reply["finish_reason"] == "interrupted"
        refused = await call(alice, "send_message", agent=AGENT, text="Hello?", session_id="mcp-busy-1")
    assert refused == (
        "error",
        "Error executing tool send_message: pending_interrupts: 1 call(s) are paused in session 'mcp-busy-1': "
        "answer them with answer_pause (list_pending shows them)",
    )


async def test_a_message_sent_again_with_its_idempotency_key_is_sent_once(served: str) -> None:
    async with http_client(served, "alice-token") as alice:
        keyed = {"agent": AGENT, "session_id": "mcp-keyed-1", "idempotency_key": "m1"}
        first = await call(alice, "send_message", text="Transfer $5 to savings.", **keyed)
        assert first["finish_reason"] == "interrupted"
        again = await call(alice, "send_message", text="Transfer $5 to savings.", **keyed)
        assert again == first  # the same pause: not a second turn
        other = await call(alice, "send_message", text="Hello!", **keyed)
        assert other[0] == "error" and "idempotency key 'm1'" in other[1]
        unnamed = await call(alice, "send_message", agent=AGENT, text="Hello!", idempotency_key="m2")
        assert unnamed[0] == "error" and "needs a session_id" in unnamed[1]
        inbox = await call(alice, "list_pending", agent=AGENT)
        assert [len(s["pauses"]) for s in inbox if s["session_id"] == "mcp-keyed-1"] == [1]


async def test_a_server_that_refuses_the_credentials_is_an_mcp_error_not_unreachable(served: str) -> None:
    """It was reached and answered (a JSON-RPC error): McpError, where a probe found
    McpUnavailable ("could not be started or reached")."""
    from pausepoint import Pausepoint
    from pausepoint.errors import McpError
    from pausepoint.mcp import McpConnection

    connection = McpConnection.http(f"{served}/mcp")
    try:
        with pytest.raises(McpError) as refused:
            await Pausepoint().mcp_tools_async(connection)
        assert type(refused.value) is McpError and "refused the connection" in refused.value.message
        assert "unauthenticated" in refused.value.message
    finally:
        await connection.aclose()


async def test_a_pauses_time_reads_as_it_does_on_rest() -> None:
    """``expires_at`` over MCP is written as REST writes it (found by a probe: ``+00:00`` beside
    REST's ``Z`` for the same instant)."""
    from datetime import timedelta

    from pydantic import BaseModel

    from pausepoint import Pausepoint
    from pausepoint.testing import ScriptedModel, tool_call

    class Question(BaseModel):
        question: str

    ai = Pausepoint()
    ask = ai.define_interrupt(name="ask", description="Ask.", input_schema=Question, ttl=timedelta(hours=1))
    ai.define_agent(name="asker", model=ScriptedModel([[tool_call("ask", {"question": "ok?"})]]), tools=[ask])
    tokens = BearerTokens({"alice-token": "alice"})
    with serve_in_thread(lambda: create_app(ai, auth=tokens, mcp=True)) as url:
        async with http_client(url, "alice-token") as alice:
            reply = await call(alice, "send_message", agent="asker", text="go")
        rest = httpx2.get(
            f"{url}/v1/agents/asker/sessions/{reply['session_id']}/interrupts",
            headers={"Authorization": "Bearer alice-token"},
        ).json()
    [pause] = reply["pauses"]
    assert pause["expires_at"].endswith("Z") and pause["expires_at"] == rest["interrupts"][0]["expires_at"]


async def test_a_session_of_another_agent_says_whose_it_is_over_mcp() -> None:
    """As the REST API's 404 does (found by a probe: MCP said only "no session 'x'")."""
    from pausepoint.demo import build
    from pausepoint.stores import InMemorySessionStore
    from pausepoint.testing import ScriptedModel

    def factory() -> Any:
        store = InMemorySessionStore()
        ai, _ = build(store)
        ai.define_agent(name="other", model=ScriptedModel(["hi"]), store=store)
        return create_app(ai, auth=BearerTokens({"alice-token": "alice"}), mcp=True)

    with serve_in_thread(factory) as url:
        async with http_client(url, "alice-token") as alice:
            reply = await call(alice, "send_message", agent=AGENT, text="Hello")
            session = reply["session_id"]
            for tool, arguments in (
                ("send_message", {"text": "hi"}),
                ("answer_pause", {"ref": "r", "decision": "approve"}),
            ):
                refused = await call(alice, tool, agent="other", session_id=session, **arguments)
                assert refused[0] == "error", refused
                assert (
                    f"no session {session!r} of agent 'other': the id names a session of agent {AGENT!r}" in refused[1]
                ), refused
