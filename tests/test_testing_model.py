"""pausepoint.testing.ScriptedModel: the offline model users test their agents with."""

import pytest

from pausepoint import Message, ModelRequest, ModelResponse, Pausepoint, TextDelta, TextPart, ToolCallDelta
from pausepoint.demo import build
from pausepoint.errors import DefinitionError, ModelError
from pausepoint.testing import ScriptedModel, reply, tool_call


async def test_steps_are_played_in_order_and_requests_recorded():
    model = ScriptedModel(["one", reply("two"), Message("model", [TextPart("three")])])
    for expected in ("one", "two", "three"):
        request = ModelRequest([Message("user", [TextPart("q")])])
        assert (await model.generate(request)).message.text == expected
    assert len(model.requests) == 3 and model.remaining == 0
    with pytest.raises(ModelError, match=r"ran out of steps after 3 calls$"):
        await model.generate(ModelRequest([]))
    with pytest.raises(ModelError, match=r"ran out of steps after 1 call$"):  # not "1 calls"
        once = ScriptedModel(["only"])
        await once.generate(ModelRequest([]))
        await once.generate(ModelRequest([]))


async def test_keep_requests_keeps_only_the_latest():
    model = ScriptedModel(lambda request: request.messages[0].text, keep_requests=2)
    for text in ("a", "b", "c", "d"):
        await model.generate(ModelRequest([Message("user", [TextPart(text)])]))
    assert [r.messages[0].text for r in model.requests] == ["c", "d"]
    nothing = ScriptedModel(["x"], keep_requests=0)
    await nothing.generate(ModelRequest([]))
    assert nothing.requests == []
    for bad in (-1, "3", 2.5, True):  # a bad definition, as every other (found by a probe: ValueError, TypeError)
        with pytest.raises(DefinitionError, match="keep_requests"):
            ScriptedModel(["x"], keep_requests=bad)
    for name in ("", None):
        with pytest.raises(DefinitionError, match="needs a name"):
            ScriptedModel(["x"], name=name)


async def test_a_script_that_is_no_script_is_refused_when_it_is_made():
    """A step that is none (None, a number, a dict) is a DefinitionError naming it as the model is made,
    not a model failure at the first send (found by a probe); a function's is a ModelError."""
    for bad, index in (([None], 0), (["ok", 42], 1), ([{"text": "hi"}], 0), ([b"bytes"], 0)):
        with pytest.raises(DefinitionError, match=f"step {index} of the script is not a step"):
            ScriptedModel(bad)
    for bad in ("just a string", 7, None):
        with pytest.raises(DefinitionError, match="a list of steps or a function"):
            ScriptedModel(bad)
    agent = Pausepoint().define_agent(name="f", model=ScriptedModel(lambda request: None))
    with pytest.raises(ModelError, match="its function returned no step: None"):
        await agent.chat().send("hi")


async def test_the_demo_model_does_not_grow_with_every_turn():
    _, agent = build()
    for _ in range(120):
        assert (await agent.chat().send("Hello!")).text
    assert len(agent.model.requests) == 100


async def test_a_function_script_sees_each_request():
    model = ScriptedModel(lambda request: f"{len(request.messages)} messages")
    ai = Pausepoint()
    agent = ai.define_agent(name="f", model=model, system="sys")
    chat = agent.chat()
    assert (await chat.send("a")).text == "1 messages"
    assert (await chat.send("b")).text == "3 messages"
    assert model.requests[-1].system == "sys"


async def test_an_async_function_script_is_awaited():
    """``ScriptedModel`` takes a function of the request, plain or async (an async one failed
    with an error naming a coroutine, found by a probe)."""
    import asyncio

    async def answer(request: ModelRequest) -> str:
        await asyncio.sleep(0)
        return f"heard {request.messages[-1].text}"

    model = ScriptedModel(answer)
    agent = Pausepoint().define_agent(name="a", model=model)
    assert (await agent.chat().send("hi")).text == "heard hi"


async def test_streaming_pieces_and_raised_steps():
    deltas = []
    model = ScriptedModel([[TextPart("a b"), tool_call("t", {"x": "0123456789"}, call_id="c1")], RuntimeError("x")])
    response = await model.generate(ModelRequest([]), deltas.append)
    assert isinstance(response, ModelResponse)
    assert [d.text for d in deltas if isinstance(d, TextDelta)] == ["a ", "b"]
    calls = [d for d in deltas if isinstance(d, ToolCallDelta)]
    assert calls[0].name == "t" and calls[0].call_id == "c1" and all(c.name is None for c in calls[1:])
    assert "".join(c.arguments_delta for c in calls) == '{"x": "0123456789"}'
    with pytest.raises(RuntimeError):
        await model.generate(ModelRequest([]))


async def test_runtime_mints_refs_and_keeps_the_provider_id():
    model = ScriptedModel([[tool_call("t", {}, call_id="provider-1"), tool_call("t", {}, call_id="provider-1")], "ok"])
    ai = Pausepoint()

    @ai.tool()
    async def t() -> str:
        """Tool."""
        return "r"

    agent = ai.define_agent(name="r", model=model, tools=[t])
    chat = agent.chat()
    await chat.send("go")
    first, second = (await chat.history())[1].tool_requests
    # the provider's id is kept for its round trip; its repeat goes back under the call's ref (two
    # results under one id could not be told apart)
    assert (first.call_id, second.call_id) == ("provider-1", None)
    assert first.ref != second.ref and len(first.ref) >= 16
    results = (await chat.history())[2].tool_responses
    assert [r.ref for r in results] == [first.ref, second.ref]
    assert [r.call_id for r in results] == ["provider-1", None]
