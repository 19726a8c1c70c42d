"""``send_message(..., ask=true)``: each pause of a served agent put to the MCP client as an
elicitation question, so the person at the client is the approver. The SDK's own client over
streamable HTTP on loopback; the agent's bank is a real MCP server whose ledger counts the calls
that reached it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, ElicitResult, InputRequiredResult

from pausepoint import ApprovalPolicy, ModelRequest, Pausepoint, Role
from pausepoint.server import BearerTokens, OwnerPolicy, create_app
from pausepoint.testing import ScriptedModel, Step, last_tool_results, tool_call
from tests.server.harness import serve_in_thread

from .conftest import SLOW, Ledger, stdio_bank

AGENT = "teller"
TOKENS = {"alice-token": "alice", "desk-token": "desk", "eve-token": "eve"}


def teller(request: ModelRequest) -> Step:
    results = last_tool_results(request)
    if results:
        (output,) = results.values()
        if isinstance(output, dict) and output.get("denied"):
            return f"Not done: {output.get('reason')}."
        return str(output)
    text = request.messages[-1].text.lower()
    if "transfer" in text and "open" in text:
        return [
            tool_call("transfer", {"amount": 500, "to_account": "savings"}),
            tool_call("open_account", {"kind": "savings"}),
        ]
    if "transfer" in text:
        return [tool_call("transfer", {"amount": 500, "to_account": "savings"})]
    if "open" in text:
        return [tool_call("open_account", {"kind": "savings"})]
    return "I can transfer money or open an account."


@contextmanager
def serving(ledger: Ledger, approval: ApprovalPolicy | None = None) -> Iterator[str]:
    ai = Pausepoint()  # listed here, not in the server's thread (which must start in 10 s)
    tools = ai.mcp_tools(
        stdio_bank(ledger), include=["transfer", "open_account"], requires_approval={"transfer", "open_account"}
    )
    ai.define_agent(name=AGENT, model=ScriptedModel(teller), tools=tools, approval=approval)

    def factory() -> Any:
        return create_app(ai, auth=BearerTokens(TOKENS), policy=OwnerPolicy(approvers={"desk"}), mcp=True)

    with serve_in_thread(factory) as url:
        yield url


@pytest.fixture
def served(ledger: Ledger) -> Iterator[str]:
    with serving(ledger) as url:
        yield url


async def never(context: Any, params: Any) -> ElicitResult:
    raise AssertionError("the rounds are driven by the test")


def client(url: str, token: str = "alice-token", callback: Any = never) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=SLOW)
    return Client(streamable_http_client(f"{url}/mcp", http_client=http), elicitation_callback=callback)


def answering(*answers: dict[str, Any] | str) -> tuple[Any, list[Any]]:
    """An elicitation callback giving ``answers`` in turn ("decline" / "cancel", or content to
    accept), and the questions it was asked."""
    asked: list[Any] = []
    given = iter(answers)

    async def callback(context: Any, params: Any) -> ElicitResult:
        asked.append(params)
        answer = next(given)
        if isinstance(answer, str):
            return ElicitResult(action=answer)  # type: ignore[arg-type]
        return ElicitResult(action="accept", content=answer)

    return callback, asked


def data(result: CallToolResult) -> Any:
    """A tool's result as data; a tool error as ``("error", text)``."""
    text = "\n".join(b.text for b in result.content if hasattr(b, "text"))
    if result.is_error:
        return ("error", text)
    if result.structured_content is not None:
        content = result.structured_content
        return content["result"] if set(content) == {"result"} else content
    return json.loads(text)


async def send(c: Client, text: str, **more: Any) -> Any:
    return data(await c.call_tool("send_message", {"agent": AGENT, "text": text, "ask": True, **more}))


async def test_the_client_is_asked_to_approve_and_the_call_reaches_the_server_once(served: str, ledger: Ledger) -> None:
    callback, asked = answering({"decision": "approve"})
    async with client(served, callback=callback) as alice:
        done = await send(alice, "Transfer $500 to savings.")
    assert done["finish_reason"] == "stop" and done["text"] == "Transferred $500 to savings."
    (question,) = asked
    assert question.message == "Transfer: Amount: 500.00 · To account: savings (risk: normal). Approve?"
    assert question.requested_schema["properties"]["decision"]["enum"] == ["approve", "deny"]
    assert ledger.entries() == [{"tool": "transfer", "amount": 500, "to_account": "savings"}]
    async with client(served) as alice:  # nothing left waiting
        assert data(await alice.call_tool("list_pending", {"agent": AGENT})) == []


async def test_a_denial_or_a_decline_never_reaches_the_server_and_a_cancel_leaves_the_pause_open(
    served: str, ledger: Ledger
) -> None:
    callback, _ = answering({"decision": "deny", "reason": "not today"}, "decline", "cancel")
    async with client(served, callback=callback) as alice:
        denied = await send(alice, "Transfer $500 to savings.")
        declined = await send(alice, "Transfer $500 to savings.")
        open_ = await send(alice, "Transfer $500 to savings.")
        assert denied["text"] == "Not done: not today."
        assert declined["text"] == "Not done: declined at the MCP client."
        assert open_["finish_reason"] == "interrupted" and [p["tool"] for p in open_["pauses"]] == ["transfer"]
        assert ledger.entries() == []
        (waiting,) = data(await alice.call_tool("list_pending", {"agent": AGENT}))
        assert waiting["session_id"] == open_["session_id"]
        answer = {"agent": AGENT, "session_id": open_["session_id"], "ref": open_["pauses"][0]["ref"]}
        done = data(await alice.call_tool("answer_pause", {**answer, "decision": "approve"}))
    assert done["text"] == "Transferred $500 to savings."
    assert ledger.entries("transfer") == [{"tool": "transfer", "amount": 500, "to_account": "savings"}]


async def test_approved_then_the_servers_question_is_put_to_the_client_and_an_invalid_answer_is_asked_again(
    served: str, ledger: Ledger
) -> None:
    callback, asked = answering({"decision": "approve"}, {"overdraft": True}, {"holder": "Alice Martin"})
    async with client(served, callback=callback) as alice:
        done = await send(alice, "Open a savings account.")
    assert done["text"] == "Opened a savings account for Alice Martin."
    approval, first, again = asked  # the call was approved, then the bank asked: one flow
    assert approval.message.endswith("Approve?")
    assert first.message == "Who holds the new savings account?"
    assert first.requested_schema["required"] == ["holder"]
    assert again.message.startswith("Your answer was not accepted (") and "holder" in again.message
    assert again.message.endswith("Who holds the new savings account?")
    assert ledger.entries("open_account") == [
        {"tool": "open_account", "kind": "savings", "action": "accept", "holder": "Alice Martin"}
    ]


async def test_a_question_dismissed_in_a_round_that_answered_another_is_listed_not_asked_again(
    served: str, ledger: Ledger
) -> None:
    """docs/mcp.md: cancel answers nothing, the pause stays open and is listed in the reply (found
    by a probe: when the same round approved another pause, the turn went on and the dismissed
    one was asked again)."""
    async with client(served) as alice:
        both = {"agent": AGENT, "text": "Transfer $500 and open an account.", "ask": True}
        first = await alice.session.call_tool("send_message", both, allow_input_required=True)
        assert isinstance(first, InputRequiredResult) and len(first.input_requests or {}) == 2
        answers = {
            key: ElicitResult(action="accept", content={"decision": "approve"})
            if request.params.message.startswith("Transfer")  # type: ignore[union-attr]
            else ElicitResult(action="cancel")
            for key, request in (first.input_requests or {}).items()
        }
        after = await alice.session.call_tool(
            "send_message", both, input_responses=answers, request_state=first.request_state, allow_input_required=True
        )
    assert isinstance(after, CallToolResult), after  # listed: no question put again
    listed = data(after)
    assert listed["finish_reason"] == "interrupted" and [p["tool"] for p in listed["pauses"]] == ["open_account"]
    assert ledger.entries() == [{"tool": "transfer", "amount": 500, "to_account": "savings"}]


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ({"decision": "maybe"}, "the answer to 'transfer' must be a decision"),
        # the form's reason is text (found by a probe: a number was taken, and the transfer ran)
        ({"decision": "approve", "reason": 5}, "the reason given for 'transfer' must be text"),
        # an approval takes no reason, as on REST (found by a probe: it was dropped unsaid)
        ({"decision": "approve", "reason": "looks fine"}, "a reason is given with a denial of 'transfer'"),
    ],
)
async def test_an_answer_that_is_not_a_decision_is_refused_and_asked_again(
    served: str, ledger: Ledger, content: dict[str, Any], why: str
) -> None:
    async with client(served) as alice:
        first = await alice.session.call_tool(
            "send_message",
            {"agent": AGENT, "text": "Transfer $500 to savings.", "ask": True},
            allow_input_required=True,
        )
        assert isinstance(first, InputRequiredResult) and list(first.input_requests or {}) == ["pause0"]
        again = await alice.session.call_tool(
            "send_message",
            {"agent": AGENT, "text": "Transfer $500 to savings.", "ask": True},
            input_responses={"pause0": ElicitResult(action="accept", content=content)},
            request_state=first.request_state,
            allow_input_required=True,
        )
    assert isinstance(again, InputRequiredResult)
    message = again.input_requests["pause0"].params.message  # type: ignore[index, union-attr]
    assert message.startswith(f"Your answer was not accepted ({why}")
    assert ledger.entries() == []


async def test_a_caller_who_may_neither_approve_nor_deny_is_not_asked_and_the_pause_is_listed(ledger: Ledger) -> None:
    """Found by a probe: the requester, who holds no role that decides the call, was asked
    "Approve?", and a yes ended the round with ``approval_forbidden``. Those who decide answer it."""
    policy = ApprovalPolicy(roles={"treasury": Role(tools=["transfer"])}, members={"desk": ["treasury"]})
    with serving(ledger, policy) as url:
        async with client(url) as alice:
            result = await alice.session.call_tool(
                "send_message",
                {"agent": AGENT, "text": "Transfer $500 to savings.", "ask": True},
                allow_input_required=True,
            )
    assert isinstance(result, CallToolResult)  # nothing asked: the pause is listed
    listed = data(result)
    assert listed["finish_reason"] == "interrupted" and [p["tool"] for p in listed["pauses"]] == ["transfer"]
    assert ledger.entries() == []


async def test_a_decision_the_policy_refuses_this_caller_is_not_accepted_and_asked_again(ledger: Ledger) -> None:
    """The requester may deny a call they asked for, not approve it (separation of duties): a yes
    answers nothing, and the question is put again saying why, as for any answer the pause does
    not take (docs/mcp.md) — not a round ended by a tool error."""
    arguments = {"agent": AGENT, "text": "Transfer $500 to savings.", "ask": True}
    with serving(ledger, ApprovalPolicy(separation_of_duties=True)) as url:
        async with client(url) as alice:
            first = await alice.session.call_tool("send_message", arguments, allow_input_required=True)
            assert isinstance(first, InputRequiredResult) and list(first.input_requests or {}) == ["pause0"]
            yes = {"pause0": ElicitResult(action="accept", content={"decision": "approve"})}
            again = await alice.session.call_tool(
                "send_message", arguments, input_responses=yes, request_state=first.request_state,
                allow_input_required=True,
            )
            assert isinstance(again, InputRequiredResult)
            message = again.input_requests["pause0"].params.message  # type: ignore[index, union-attr]
            assert message.startswith("Your answer was not accepted (") and "asked for" in message, message
            no = {"pause0": ElicitResult(action="accept", content={"decision": "deny", "reason": "changed my mind"})}
            denied = await alice.session.call_tool(
                "send_message", arguments, input_responses=no, request_state=again.request_state
            )
    assert data(denied)["text"] == "Not done: changed my mind."
    assert ledger.entries() == []


async def test_a_replayed_round_gets_the_first_outcome_and_a_different_answer_to_it_is_refused(
    served: str, ledger: Ledger
) -> None:
    arguments = {"agent": AGENT, "text": "Transfer $500 to savings.", "ask": True}
    async with client(served) as alice:
        first = await alice.session.call_tool("send_message", arguments, allow_input_required=True)
        assert isinstance(first, InputRequiredResult)

        async def answer(decision: str) -> Any:
            result = await alice.session.call_tool(
                "send_message",
                arguments,
                input_responses={"pause0": ElicitResult(action="accept", content={"decision": decision})},
                request_state=first.request_state,
                allow_input_required=True,
            )
            assert isinstance(result, CallToolResult)
            return data(result)

        done = await answer("approve")
        replayed = await answer("approve")
        changed = await answer("deny")
    assert done["text"] == "Transferred $500 to savings." and replayed == done
    assert changed[0] == "error" and "already_resolved: the pause of 'transfer'" in changed[1]
    assert ledger.entries() == [{"tool": "transfer", "amount": 500, "to_account": "savings"}]


async def test_another_principal_cannot_answer_with_a_round_asked_of_someone_else(served: str, ledger: Ledger) -> None:
    arguments = {"agent": AGENT, "text": "Transfer $500 to savings.", "ask": True}
    async with client(served) as alice:
        first = await alice.session.call_tool("send_message", arguments, allow_input_required=True)
    assert isinstance(first, InputRequiredResult)
    approve = {"pause0": ElicitResult(action="accept", content={"decision": "approve"})}
    async with client(served, "eve-token") as eve:
        stolen = await eve.session.call_tool(
            "send_message", arguments, input_responses=approve, request_state=first.request_state
        )
    assert data(stolen)[0] == "error" and "session_not_found" in data(stolen)[1]
    assert ledger.entries() == []


async def test_without_an_elicitation_capable_client_the_pauses_are_listed(served: str, ledger: Ledger) -> None:
    async with client(served, callback=None) as alice:  # no elicitation callback: it cannot be asked
        reply = await send(alice, "Transfer $500 to savings.")
    assert reply["finish_reason"] == "interrupted" and [p["tool"] for p in reply["pauses"]] == ["transfer"]
    assert ledger.entries() == []
