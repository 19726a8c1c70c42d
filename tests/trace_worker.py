"""A traced process for the cross-process tracing test: the banking agent on a shared SQLite file.

    python -m tests.trace_worker pause  DB              -> {"session_id", "ref", "spans"}
    python -m tests.trace_worker answer DB SID REF      -> {"text", "spans"}

Spans are recorded with the OpenTelemetry SDK's in-memory exporter and printed as JSON.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pausepoint import Pausepoint, ToolResponse
from pausepoint.demo import ApprovalOutput, TransferMoneyInput, UserApprovalInput, banking_script
from pausepoint.stores import SessionStore, SqliteSessionStore
from pausepoint.telemetry import Telemetry
from pausepoint.testing import ScriptedModel


def traced() -> tuple[Telemetry, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return Telemetry(tracer_provider=provider), exporter


def banking(store: SessionStore, telemetry: Telemetry, model: Any = None) -> Any:
    ai = Pausepoint(telemetry=telemetry)
    approval = ai.define_interrupt(
        name="userApproval", description="Ask first.", input_schema=UserApprovalInput, output_schema=ApprovalOutput
    )

    @ai.tool()
    async def transfer_money(input: TransferMoneyInput) -> str:
        """Transfer money after approval."""
        return f"Transferred ${input.amount} to {input.to_account}."

    return ai.define_agent(
        name="bankingAgent",
        model=model or ScriptedModel(banking_script),
        tools=[approval, transfer_money],
        store=store,
    )


def as_json(span: ReadableSpan) -> dict[str, Any]:
    context = span.get_span_context()
    return {
        "name": span.name,
        "trace_id": f"{context.trace_id:032x}",
        "span_id": f"{context.span_id:016x}",
        "parent": None if span.parent is None else f"{span.parent.span_id:016x}",
        "attributes": dict(span.attributes or {}),
        "links": [
            {"trace_id": f"{link.context.trace_id:032x}", "span_id": f"{link.context.span_id:016x}"}
            for link in span.links
        ],
    }


async def main(argv: list[str]) -> None:
    telemetry, exporter = traced()
    store = SqliteSessionStore(argv[1])
    agent = banking(store, telemetry)
    if argv[0] == "pause":
        res = await agent.chat(principal="alice").send("Transfer $500 to savings.")
        reply: dict[str, Any] = {"session_id": res.session_id, "ref": res.interrupts[0].ref}
    else:
        chat = agent.chat(argv[2], principal="bob")
        res = await chat.resume(respond=[ToolResponse(argv[3], "userApproval", {"approved": True})])
        reply = {"text": res.text}
    await store.close()
    reply["spans"] = [as_json(s) for s in exporter.get_finished_spans()]
    print(json.dumps(reply))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
