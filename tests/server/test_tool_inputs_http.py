"""A tool's input over HTTP: an aliased field's pause answered on the Genkit wire and checked by
``validate``, a validator raising what pydantic does not report, a tool's own ``CancelledError``
— each a 200 with the model told, where a probe found 422s, 500s and a 503 (the same through
Python: ``tests/test_tool_inputs``)."""

from __future__ import annotations

import asyncio

import httpx
from starlette.applications import Starlette

from pausepoint import Interrupt, Pausepoint, ToolRunContext
from pausepoint.server import BearerTokens, create_app
from pausepoint.testing import ScriptedModel, tool_call
from tests.server.harness import serve_in_thread
from tests.test_tool_inputs import Move, Note, Saved  # the same inputs as through Python

AUTH = {"Authorization": "Bearer t0k3n"}


def _app(runs: list[str]) -> Starlette:
    ai = Pausepoint()

    @ai.tool(requires_approval=True)
    def move(input: Move) -> str:
        """Move money (asks first)."""
        runs.append(f"move {input.from_}")
        return "moved"

    @ai.tool()
    async def checked_move(input: Move, ctx: ToolRunContext) -> str:
        """Move money after a check of its own."""
        if not ctx.is_resumed:
            raise Interrupt({"check": input.from_})
        runs.append(f"checked_move {input.from_}")
        return "moved"

    @ai.tool()
    def save_note(input: Note) -> Saved:
        """Save a note."""
        runs.append("save_note")
        return Saved(id=1)

    @ai.tool()
    async def fetch_shared(key: str) -> str:
        """Read what another component loads (and gives up on)."""
        loader = asyncio.get_running_loop().create_task(asyncio.sleep(10))
        await asyncio.sleep(0)
        loader.cancel()
        return await loader

    calls = {
        "move": ("move", {"from": "checking", "to": "savings"}),
        "checked_move": ("checked_move", {"from": "checking", "to": "savings"}),
        "note": ("save_note", {"text": "hi", "tag": None}),
        "fetch": ("fetch_shared", {"key": "k"}),
    }
    model = ScriptedModel(
        lambda r: "done" if r.messages[-1].role == "tool" else [tool_call(*calls[r.messages[-1].text])]
    )
    ai.define_agent(name="m", model=model, tools=[move, checked_move, save_note, fetch_shared])
    return create_app(ai, auth=BearerTokens({"t0k3n": "dev"}))


async def test_an_aliased_pause_shown_on_the_genkit_wire_is_valid_and_its_restart_runs_it():
    """Found by a probe: ``validate`` called the pause's own input invalid (``from`` required),
    and Genkit's client restarting with the input it was shown was refused 422
    ``input_edit_not_allowed`` — the approval could never run the call."""
    runs: list[str] = []
    with serve_in_thread(lambda: _app(runs)) as url:
        async with httpx.AsyncClient(base_url=url, headers=AUTH, timeout=30) as http:
            for tool in ("move", "checked_move"):
                message = {"role": "user", "content": [{"text": tool}]}
                paused = (await http.post("/agents/m", json={"data": {"message": message}})).json()["result"]
                [part] = paused["message"]["content"]
                request = part["toolRequest"]
                checked = await http.post(f"/v1/agents/m/tools/{tool}/validate", json={"input": request["input"]})
                assert checked.status_code == 200 and checked.json()["valid"] is True, checked.text
                restart = {"toolRequest": request, "metadata": {"resumed": True}}
                body = {"data": {"resume": {"restart": [restart]}}, "init": {"snapshotId": paused["snapshotId"]}}
                done = await http.post("/agents/m", json=body)
                assert done.status_code == 200, done.text
                assert done.json()["result"]["message"]["content"] == [{"text": "done"}]
    assert runs == ["move checking", "checked_move checking"]


async def test_a_validator_raising_anything_is_invalid_input_over_rest_never_a_500():
    runs: list[str] = []
    with serve_in_thread(lambda: _app(runs)) as url:
        async with httpx.AsyncClient(base_url=url, headers=AUTH, timeout=30) as http:
            sent = await http.post("/v1/agents/m/sessions", json={"message": "note"})
            assert sent.status_code == 200 and sent.json()["finish_reason"] == "stop", sent.text
            history = (await http.get(f"/v1/agents/m/sessions/{sent.json()['session_id']}/history")).json()
            [told] = [p["output"] for m in history["messages"] for p in m["parts"] if p["kind"] == "tool_response"]
            assert told["error"] == "invalid input for tool 'save_note'"
            assert told["details"][0]["type"] == "validator_failed"
            for given, what in (
                ({"input": {"text": "hi", "tag": None}}, "AttributeError"),
                ({"output": {"id": 2}}, "KeyError"),
            ):
                checked = await http.post("/v1/agents/m/tools/save_note/validate", json=given)
                assert checked.status_code == 200 and checked.json()["valid"] is False, checked.text
                [error] = checked.json()["errors"]
                assert error["type"] == "validator_failed" and what in error["message"]
    assert runs == []


async def test_a_tools_own_cancelled_error_is_its_result_over_rest_not_a_503():
    """Found by a probe: 503 ``shutting_down`` ("the server stopped before it could answer")
    from a server that went on running."""
    with serve_in_thread(lambda: _app([])) as url:
        async with httpx.AsyncClient(base_url=url, headers=AUTH, timeout=30) as http:
            sent = await http.post("/v1/agents/m/sessions", json={"message": "fetch"})
            assert sent.status_code == 200 and sent.json()["finish_reason"] == "stop", sent.text
            history = (await http.get(f"/v1/agents/m/sessions/{sent.json()['session_id']}/history")).json()
            told = [p["output"] for m in history["messages"] for p in m["parts"] if p["kind"] == "tool_response"]
            assert told == [{"error": "CancelledError: something the tool awaited was cancelled"}]
