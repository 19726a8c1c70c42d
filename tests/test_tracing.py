"""OpenTelemetry spans, checked with the SDK's in-memory exporter: turn -> model -> tool -> pause,
and the answer linked to its pause, in this process and across two."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pausepoint import Message, ModelResponse, Pausepoint, TextPart, Usage
from pausepoint.stores import InMemorySessionStore, SqliteSessionStore
from pausepoint.telemetry import Telemetry
from pausepoint.testing import ScriptedModel
from tests.helpers import late_and_early_pauses
from tests.trace_worker import as_json, banking, traced

ROOT = Path(__file__).resolve().parents[1]


def by_name(spans: list[dict]) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for span in spans:
        found.setdefault(span["name"], []).append(span)
    return found


async def test_a_paused_turn_is_traced_and_the_answer_links_to_the_pause():
    telemetry, exporter = traced()
    agent = banking(InMemorySessionStore(), telemetry)
    chat = agent.chat(principal="alice")
    res = await chat.send("Transfer $500 to savings.")
    spans = by_name([as_json(s) for s in exporter.get_finished_spans()])
    [turn] = spans["invoke_agent bankingAgent"]
    [model] = spans["chat scripted"]
    [tool] = spans["execute_tool userApproval"]
    [pause] = spans["pause userApproval"]
    assert turn["parent"] is None and model["parent"] == turn["span_id"] and tool["parent"] == turn["span_id"]
    assert pause["parent"] == tool["span_id"]
    assert turn["attributes"]["gen_ai.operation.name"] == "invoke_agent"
    assert turn["attributes"]["gen_ai.conversation.id"] == chat.session_id
    assert turn["attributes"]["pausepoint.finish_reason"] == "interrupted"
    assert model["attributes"]["gen_ai.operation.name"] == "chat"
    assert model["attributes"]["gen_ai.request.model"] == "scripted"
    assert model["attributes"]["gen_ai.response.finish_reasons"] == ("stop",)
    assert tool["attributes"]["gen_ai.tool.name"] == "userApproval"
    assert tool["attributes"]["pausepoint.tool.outcome"] == "paused"
    assert pause["attributes"]["pausepoint.pause.id"] == res.interrupts[0].pause_id
    everything = json.dumps([s["attributes"] for group in spans.values() for s in group])
    assert "Transfer" not in everything and "savings" not in everything  # no content by default

    exporter.clear()
    res = await chat.resume(respond=[res.interrupts[0].respond({"approved": True})], principal="bob")
    spans = by_name([as_json(s) for s in exporter.get_finished_spans()])
    [answer] = spans["answer userApproval"]
    [turn] = spans["invoke_agent bankingAgent"]
    assert answer["parent"] == turn["span_id"]
    assert answer["links"] == [{"trace_id": pause["trace_id"], "span_id": pause["span_id"]}]
    assert answer["attributes"]["pausepoint.answer.decision"] == "respond"
    assert answer["attributes"]["pausepoint.answer.principal"] == "bob"
    assert answer["attributes"]["pausepoint.pause.waited_seconds"] >= 0
    assert [s["attributes"]["pausepoint.tool.outcome"] for s in spans["execute_tool transfer_money"]] == ["completed"]
    assert turn["attributes"]["pausepoint.finish_reason"] == "stop"


async def test_content_only_when_turned_on_and_token_usage():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    ai = Pausepoint(telemetry=Telemetry(tracer_provider=provider, capture_content=True))
    model = ai.define_model(
        name="counted",
        fn=lambda request: ModelResponse(Message("model", [TextPart("Hello there")]), usage=Usage(12, 3)),
    )
    agent = ai.define_agent(name="greeter", model=model, store=InMemorySessionStore())
    await agent.chat().send("Say hello to Zoë")
    [chat] = [as_json(s) for s in exporter.get_finished_spans() if s.name == "chat counted"]
    assert chat["attributes"]["gen_ai.usage.input_tokens"] == 12
    assert chat["attributes"]["gen_ai.usage.output_tokens"] == 3
    assert "Say hello to Zoë" in chat["attributes"]["gen_ai.input.messages"]
    assert "Hello there" in chat["attributes"]["gen_ai.output.messages"]


async def test_failed_model_calls_and_turns_say_why():
    telemetry, exporter = traced()
    ai = Pausepoint(telemetry=telemetry)

    def broken(request):
        from pausepoint.errors import ModelUnavailable

        raise ModelUnavailable("down")

    agent = ai.define_agent(name="broken", model=ai.define_model(name="down", fn=broken), store=InMemorySessionStore())
    try:
        await agent.chat().send("hi")
    except Exception as exc:
        assert exc.code == "model_unavailable"
    spans = by_name([as_json(s) for s in exporter.get_finished_spans()])
    assert spans["chat down"][0]["attributes"]["error.type"] == "model_unavailable"
    assert spans["invoke_agent broken"][0]["attributes"]["error.type"] == "model_unavailable"


async def test_an_exceptions_message_is_content_kept_out_of_spans_unless_captured():
    """A model's exception may quote the prompt: its message reached the spans' exception events
    with content capture off (found by a probe). The spans still say the call failed."""
    from opentelemetry.trace import StatusCode

    for capture in (False, True):
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        ai = Pausepoint(telemetry=Telemetry(tracer_provider=provider, capture_content=capture))

        def broken(request):
            raise ValueError("the prompt was: my account number is 12345")

        agent = ai.define_agent(name="broken", model=ai.define_model(name="down", fn=broken))
        try:
            await agent.chat().send("hi")
        except Exception as exc:
            assert exc.code == "model_error"
        spans = exporter.get_finished_spans()
        shown = repr([(s.attributes, [(e.name, e.attributes) for e in s.events], s.status.description) for s in spans])
        assert ("12345" in shown) is capture, shown
        [model] = [s for s in spans if s.name == "chat down"]
        assert model.status.status_code == StatusCode.ERROR


def run_worker(*args: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "tests.trace_worker", *args], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    reply: dict = json.loads(done.stdout)
    return reply


async def test_an_answer_in_another_process_links_to_the_pause(tmp_path):
    db = str(tmp_path / "sessions.db")
    paused = run_worker("pause", db)
    answered = run_worker("answer", db, paused["session_id"], paused["ref"])
    assert answered["text"] == "Transferred $500 to savings."
    [pause] = [s for s in paused["spans"] if s["name"] == "pause userApproval"]
    [answer] = [s for s in answered["spans"] if s["name"] == "answer userApproval"]
    assert answer["links"] == [{"trace_id": pause["trace_id"], "span_id": pause["span_id"]}]
    assert answer["trace_id"] != pause["trace_id"]  # a trace of its own, linked to the pause's
    store = SqliteSessionStore(db)  # the link came from the pause record, written by the first process
    found = await store.read(paused["session_id"])
    record = json.loads(next(e for e in found.entries if e.kind == "call_paused").data)
    await store.close()
    assert record["trace"].startswith(f"00-{pause['trace_id']}-{pause['span_id']}-")


async def test_each_pause_of_a_batch_is_traced_under_its_own_tool_call():
    """The first call pauses late and the second at once: the pauses are listed in the order the
    model asked, and each pause's span is still a child of its own call's span."""
    telemetry, exporter = traced()
    ai = Pausepoint(telemetry=telemetry)
    checks, calls = late_and_early_pauses(ai)
    agent = ai.define_agent(name="checks", model=ScriptedModel([calls]), tools=checks)
    res = await agent.chat().send("check both")
    assert [i.name for i in res.interrupts] == ["slow_check", "quick_check"]
    spans = by_name([as_json(s) for s in exporter.get_finished_spans()])
    for name, pause in zip(("slow_check", "quick_check"), res.interrupts, strict=True):
        [tool] = spans[f"execute_tool {name}"]
        [paused] = spans[f"pause {name}"]
        assert paused["parent"] == tool["span_id"], name
        assert paused["attributes"]["pausepoint.pause.id"] == pause.pause_id
