"""The deciding local model: Qwen2.5-Coder-1.5B-Instruct (``local/qwen2.5-coder-1.5b``), one thread, greedy.

Nothing forces its tool choice: these flows pass only if the model itself asks for approval
before moving money, moves it after the approval, leaves it after a denial, and answers a
greeting (and a balance question it has no tool for) in plain text. The
model file is joined from its 22 wheels on first use (once per machine, into the cache folder).
"""

from __future__ import annotations

import json

import pytest

from examples import banking
from pausepoint import AgentFinishReason, InterruptChunk, Message, ModelRequest, TextChunk, TextPart, ToolRequestPart
from pausepoint.demo import SYSTEM
from pausepoint.stores import SqliteSessionStore

pytest.importorskip("xllamacpp")

from pausepoint.models import _local_files as files
from pausepoint.models import local
from pausepoint.models._gguf import read_gguf
from pausepoint.models._local_prompt import ChatTemplate
from pausepoint.models.local import Local

pytestmark = pytest.mark.slow

NAME = "local/qwen2.5-coder-1.5b"


@pytest.fixture(scope="module")
def plugin() -> Local:
    """One plugin for the module, so the model file is loaded once."""
    made = Local(n_threads=1, config={"temperature": 0, "seed": 0})
    yield made
    made.close()


def test_the_joined_file_is_qwen_with_its_tool_aware_template():
    path, info = files.locate_bundled("qwen2.5-coder-1.5b")
    assert info.describe() == "Qwen2.5 Coder 1.5B Instruct GGUF (qwen2, Q4_K_M)"
    assert read_gguf(path).metadata["general.size_label"] == "1.5B"
    template = ChatTemplate(info.chat_template, bos_token=info.bos_token, eos_token=info.eos_token)
    assert template.knows_tools
    request = banking_request(
        Message("user", [TextPart("Pay $5 to bob.")]),
        Message("model", [ToolRequestPart("userApproval", {"action": "pay", "details": "$5 to bob"}, ref="r")]),
    )
    prompt = local._plan(request, local.Settings(), template).prompt
    # the tools in Qwen's own words and layout, the call as Qwen writes it, the result where Qwen reads it
    assert prompt.startswith(f"<|im_start|>system\n{SYSTEM}\n\n# Tools\n\nYou may call one or more functions")
    assert '<tools>\n{"type": "function", "function": {"name": "userApproval"' in prompt
    assert (
        '<tool_call>\n{"name": "userApproval", "arguments": {"action": "pay", "details": "$5 to bob"}}\n</tool_call>'
        in prompt
    )
    assert prompt.endswith("<|im_end|>\n<|im_start|>assistant\n")


def banking_request(*messages: Message) -> ModelRequest:
    _, agent = banking.build()
    tools = [tool.definition for tool in agent.tools.values()]
    return ModelRequest(list(messages), SYSTEM, tools, {})


async def test_it_greets_asks_for_approval_and_transfers_only_after_it(plugin, tmp_path):
    ledger: list[str] = []
    store = SqliteSessionStore(tmp_path / "sessions.db")
    _, agent = banking.build(store, ledger, model=NAME, plugins=[plugin])
    chat = agent.chat()

    res = await chat.send("Hello!")
    assert res.finish_reason == AgentFinishReason.STOP and res.text and res.interrupts == []
    assert res.message is not None and res.message.tool_requests == []

    res = await chat.send("Transfer $500 to savings.")
    assert res.finish_reason == AgentFinishReason.INTERRUPTED
    [pause] = res.interrupts
    assert pause.name == "userApproval"
    banking.UserApprovalInput.model_validate(pause.input)
    assert "500" in json.dumps(pause.input)
    assert ledger == []

    res = await chat.resume(respond=[pause.respond({"approved": True, "feedback": "Looks good!"})])
    assert res.finish_reason == AgentFinishReason.STOP
    assert res.text and res.interrupts == []
    assert ledger == ["500->savings"]
    await store.close()


async def test_the_pause_streams_before_the_turn_ends_and_the_answer_streams_after_the_approval(plugin):
    ledger: list[str] = []
    _, agent = banking.build(ledger=ledger, model=NAME, plugins=[plugin])
    chat = agent.chat()
    stream = chat.send_stream("Send 20 dollars to Bob")
    chunks = [chunk async for chunk in stream]
    res = await stream.response
    assert res.finish_reason == AgentFinishReason.INTERRUPTED
    [pause] = res.interrupts
    assert pause.name == "userApproval" and ledger == []
    paused = [c for c in chunks if isinstance(c, InterruptChunk)]
    assert [c.interrupt.ref for c in paused] == [pause.ref] and chunks.index(paused[0]) < len(chunks) - 1

    stream = chat.resume_stream(respond=[pause.respond({"approved": True})])
    chunks = [chunk async for chunk in stream]
    res = await stream.response
    assert res.finish_reason == AgentFinishReason.STOP
    assert ledger == ["20->Bob"]
    streamed = "".join(c.text for c in chunks if isinstance(c, TextChunk))
    assert streamed == res.text and len([c for c in chunks if isinstance(c, TextChunk)]) > 1


async def test_a_denial_ends_the_transfer_and_a_balance_question_gets_no_call(plugin):
    ledger: list[str] = []
    _, agent = banking.build(ledger=ledger, model=NAME, plugins=[plugin])
    chat = agent.chat()
    res = await chat.send("Transfer $500 to savings.")
    [pause] = res.interrupts
    assert pause.name == "userApproval"
    res = await chat.resume(respond=[pause.deny("I do not want to move this money now.")])
    assert res.finish_reason == AgentFinishReason.STOP and res.interrupts == [] and ledger == []
    assert "not" in res.text
    res = await chat.send("OK, thanks.")
    assert res.finish_reason == AgentFinishReason.STOP and res.interrupts == [] and ledger == []

    res = await agent.chat().send("What is my balance?")
    assert res.finish_reason == AgentFinishReason.STOP and res.text
    assert res.message is not None and res.message.tool_requests == []
