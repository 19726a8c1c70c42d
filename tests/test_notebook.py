"""``chat.sync`` in a real Jupyter kernel (ipykernel, run by nbclient as Jupyter runs a notebook):
there an event loop already runs in the cell's thread, so ``asyncio.run`` fails, and the
synchronous chat works — the pause, the answer, the errors."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

pytestmark = pytest.mark.slow

CELLS = [
    """
import asyncio
from pydantic import BaseModel
from pausepoint import AgentFinishReason, Pausepoint
from pausepoint.errors import SessionNotFound
from pausepoint.stores import SqliteSessionStore
from pausepoint.testing import ScriptedModel, tool_call

class Ask(BaseModel):
    question: str

ai = Pausepoint()
ask = ai.define_interrupt(name="ask", description="Ask a person.", input_schema=Ask)
agent = ai.define_agent(name="asker", tools=[ask], store=SqliteSessionStore("notebook.db"), model=ScriptedModel([
    [tool_call("ask", {"question": "Go ahead?"})], "Going ahead.",
]))
""",
    """
pending = asyncio.sleep(0)
try:
    asyncio.run(pending)
except RuntimeError as exc:
    pending.close()
    print("asyncio.run:", exc)
""",
    """
chat = agent.chat().sync
res = chat.send("Shall we?")
print("send:", res.finish_reason.value, res.interrupts[0].input)
""",
    """
try:
    agent.chat().sync.resume(respond=[res.interrupts[0].respond("yes")])
except SessionNotFound as exc:
    print("elsewhere:", type(exc).__name__, exc.code)
""",
    """
res = chat.resume(respond=[res.interrupts[0].respond("yes")])
print("resume:", res.finish_reason.value, res.text)
print("history:", [m.role for m in chat.history()])
""",
]


def test_the_sync_chat_runs_in_a_jupyter_kernel(tmp_path: Path) -> None:
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in CELLS])
    client = nbclient.NotebookClient(
        notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    printed = [
        "".join(output.get("text", "") for output in cell.outputs if output.output_type == "stream")
        for cell in notebook.cells
    ]
    errors = [output for cell in notebook.cells for output in cell.outputs if output.output_type == "error"]
    assert errors == []
    assert printed[1] == "asyncio.run: asyncio.run() cannot be called from a running event loop\n"
    assert printed[2] == "send: interrupted {'question': 'Go ahead?'}\n"
    assert printed[3] == "elsewhere: SessionNotFound session_not_found\n"
    assert printed[4] == "resume: stop Going ahead.\nhistory: ['user', 'model', 'tool', 'model']\n"
    assert (tmp_path / "notebook.db").exists()
