"""Streamed turns — exact chunk sequences, pauses visible before the turn ends, and
consumers that stop reading without corrupting the session."""

import asyncio

import pytest
from pydantic import BaseModel

from pausepoint import AgentFinishReason, Pausepoint, ToolRunContext
from pausepoint.errors import ModelError, UsageError
from pausepoint.stores import InMemorySessionStore
from pausepoint.testing import ScriptedModel, tool_call

from .helpers import approvals_agent


def summarise(chunks):
    """Chunks as comparable tuples; consecutive tool-call deltas are joined into one entry."""
    out = []
    for c in chunks:
        if c.kind == "tool_call_delta":
            if out and out[-1][0] == "tool_call_delta" and c.name is None and out[-1][1] == c.index:
                out[-1] = (*out[-1][:3], out[-1][3] + c.arguments_delta)
            else:
                out.append(("tool_call_delta", c.index, c.name, c.arguments_delta))
        elif c.kind == "text":
            out.append(("text", c.text))
        elif c.kind == "tool_request":
            out.append(("tool_request", c.name, c.input))
        elif c.kind == "interrupt":
            out.append(("interrupt", c.interrupt.name, c.interrupt.input, c.interrupt.metadata))
        elif c.kind == "tool_progress":
            out.append(("tool_progress", c.name, c.data))
        elif c.kind == "tool_result":
            out.append(("tool_result", c.name, c.output, c.is_error))
        elif c.kind == "turn_end":
            out.append(("turn_end", c.response.finish_reason.value))
    return out


async def collect(stream):
    chunks = [chunk async for chunk in stream]
    response = await stream.response
    assert chunks[-1].kind == "turn_end" and chunks[-1].response == response
    assert "".join(c.text for c in chunks if c.kind == "text") == response.text
    return summarise(chunks), response


async def test_plain_text_turn(store):
    agent, _ = approvals_agent(store, ["Hello there, friend."])
    chunks, res = await collect(agent.chat().send_stream("hi"))
    assert chunks == [("text", "Hello "), ("text", "there, "), ("text", "friend."), ("turn_end", "stop")]
    assert res.text == "Hello there, friend."


async def test_turn_that_calls_a_tool(store):
    agent, _ = approvals_agent(store, [[tool_call("lookup", {"key": "a"})], "Found it."])
    chunks, _ = await collect(agent.chat().send_stream("find a"))
    assert chunks == [
        ("tool_call_delta", 0, "lookup", '{"key": "a"}'),
        ("tool_request", "lookup", {"key": "a"}),
        ("tool_result", "lookup", "value of a", False),
        ("text", "Found "),
        ("text", "it."),
        ("turn_end", "stop"),
    ]


async def test_a_pause_is_streamed_before_the_turn_ends(store):
    agent, _ = approvals_agent(store, [[tool_call("lookup", {"key": "a"}), tool_call("ask", {"question": "ok?"})]])
    stream = agent.chat().send_stream("go")
    seen = []
    async for chunk in stream:
        seen.append(chunk)
        if chunk.kind == "interrupt":
            break  # a UI can show the card now, without waiting for the turn to end
    interrupt = seen[-1].interrupt
    response = await stream.response
    assert response.finish_reason == AgentFinishReason.INTERRUPTED
    assert response.interrupts == [interrupt]
    assert summarise(seen) == [
        ("tool_call_delta", 0, "lookup", '{"key": "a"}'),
        ("tool_call_delta", 1, "ask", '{"question": "ok?"}'),
        ("tool_request", "lookup", {"key": "a"}),
        ("tool_request", "ask", {"question": "ok?"}),
        ("interrupt", "ask", {"question": "ok?"}, None),
    ]  # lookup's result streams with the tool message, when the batch is complete (after the answer)


async def test_resume_with_respond_restart_and_partial_answers(store):
    ledger: list[str] = []
    agent, _ = approvals_agent(
        store,
        [[tool_call("ask", {"question": "a"}), tool_call("guarded", {"action": "x"})], "All done."],
        ledger=ledger,
    )
    chat = agent.chat()
    res = await chat.send("go")
    ask, guarded = res.interrupts

    chunks, res = await collect(chat.resume_stream(respond=[ask.respond({"approved": True})]))
    assert chunks == [("turn_end", "interrupted")]  # the answer is recorded; the tool message comes with the last
    assert [i.ref for i in res.interrupts] == [guarded.ref]

    chunks, res = await collect(chat.resume_stream(restart=[guarded.restart()]))
    assert chunks == [("interrupt", "guarded", {"action": "x"}, {"action": "x"}), ("turn_end", "interrupted")]

    chunks, res = await collect(chat.resume_stream(restart=[res.interrupts[0].restart(resumed_metadata={"ok": True})]))
    assert chunks == [
        ("tool_result", "ask", {"approved": True}, False),
        ("tool_result", "guarded", "did x", False),
        ("text", "All "),
        ("text", "done."),
        ("turn_end", "stop"),
    ]
    assert ledger == ["guarded:x"]


async def test_tool_progress_and_a_tool_that_raises():
    ai = Pausepoint()

    @ai.tool()
    async def slow_job(steps: int, ctx: ToolRunContext) -> str:
        """Reports progress."""
        for i in range(steps):
            ctx.send_progress({"step": i + 1, "of": steps})
        return "finished"

    @ai.tool()
    def crash() -> str:
        """Fails (a sync tool, reporting from a worker thread first)."""
        raise ValueError("bad state")

    model = ScriptedModel([[tool_call("slow_job", {"steps": 2}), tool_call("crash")], "Recovered."])
    agent = ai.define_agent(name="p", model=model, tools=[slow_job, crash])
    chunks, _ = await collect(agent.chat().send_stream("go"))
    results = [c for c in chunks if c[0] in ("tool_progress", "tool_result")]
    assert ("tool_progress", "slow_job", {"step": 1, "of": 2}) in results
    assert results.index(("tool_progress", "slow_job", {"step": 2, "of": 2})) < results.index(
        ("tool_result", "slow_job", "finished", False)
    )
    assert ("tool_result", "crash", {"error": "ValueError: bad state"}, True) in results
    assert chunks[-2:] == [("text", "Recovered."), ("turn_end", "stop")]


async def test_progress_from_a_sync_tool_thread_arrives():
    ai = Pausepoint()

    @ai.tool()
    def sync_job(ctx: ToolRunContext) -> str:
        """Reports from a worker thread."""
        ctx.send_progress("halfway")
        return "ok"

    agent = ai.define_agent(name="s", model=ScriptedModel([[tool_call("sync_job")], "fine"]), tools=[sync_job])
    chunks, _ = await collect(agent.chat().send_stream("go"))
    assert ("tool_progress", "sync_job", "halfway") in chunks


async def test_a_consumer_that_breaks_out_early_does_not_corrupt_the_session(store):
    agent, _ = approvals_agent(store, ["One two three four.", "Second turn."])
    chat = agent.chat()
    stream = chat.send_stream("first")
    async for _chunk in stream:
        break
    # the turn finishes in the background; the next call on the session waits for it
    res = await chat.send("second")
    assert res.text == "Second turn."
    assert [m.text for m in await chat.history()] == ["first", "One two three four.", "second", "Second turn."]
    assert (await stream.response).text == "One two three four."


async def test_a_cancelled_consumer_does_not_corrupt_the_session(store):
    gate = asyncio.Event()
    thinking = asyncio.Event()

    async def slow_model(request):
        from pausepoint import Message, ModelResponse, TextPart

        if request.messages[-1].text == "first":
            thinking.set()
            await gate.wait()
        return ModelResponse(Message("model", [TextPart(f"re: {request.messages[-1].text}")]))

    ai = Pausepoint()
    ai.define_model(name="slow", fn=slow_model)
    agent = ai.define_agent(name="c", model="slow", store=store)
    chat = agent.chat()
    stream = chat.send_stream("first")

    async def consume():
        return [c async for c in stream]

    consumer = asyncio.create_task(consume())
    await thinking.wait()  # the turn is in its model call, the consumer waiting for a chunk
    await asyncio.sleep(0)
    consumer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await consumer
    gate.set()
    res = await chat.send("second")
    assert res.text == "re: second"
    assert [m.text for m in await chat.history()] == ["first", "re: first", "second", "re: second"]


async def test_a_failing_turn_raises_through_the_stream_and_the_response(store):
    agent, _ = approvals_agent(store, [ModelError("provider down"), "later"])
    chat = agent.chat()
    stream = chat.send_stream("go")
    with pytest.raises(ModelError):
        async for _chunk in stream:
            pass
    with pytest.raises(ModelError):
        await stream.response
    assert (await chat.send("again")).text == "later"


async def test_the_response_is_available_without_reading_the_stream(store):
    agent, _ = approvals_agent(store, ["Just the answer."])
    stream = agent.chat().send_stream("hi")
    assert (await stream).text == "Just the answer."


async def test_genkits_chunk_text_loop_reads_every_kind_of_chunk():
    """Genkit's ``async for chunk in turn.stream: if chunk.text: ...`` works on every chunk kind:
    those that carry no answer text have an empty ``text``."""
    ai = Pausepoint()

    @ai.tool()
    def lookup(city: str) -> str:
        """Looks a city up."""
        return f"{city} is sunny"

    model = ScriptedModel([[tool_call("lookup", {"city": "Oslo"})], "Oslo is sunny today."])
    agent = ai.define_agent(name="weather", model=model, tools=[lookup])
    turn = agent.chat().send_stream("weather in Oslo?")
    kinds, text = set(), ""
    async for chunk in turn.stream:
        kinds.add(chunk.kind)
        if chunk.text:
            text += chunk.text
    response = await turn.response
    assert {"tool_request", "tool_result", "text"} <= kinds
    assert text == response.text == "Oslo is sunny today."


async def test_a_call_paused_for_approval_streams_in_the_models_order_after_the_calls_before_it(store):
    """A call the approval policy pauses is decided before any call runs, but its interrupt
    chunk comes in its place: after the pauses of the calls asked before it, once those ended."""
    ai = Pausepoint()
    events: list[str] = []

    class Question(BaseModel):
        q: str

    ask = ai.define_interrupt("ask", input_schema=Question)

    @ai.tool()
    async def slow() -> str:
        """Takes a while."""
        await asyncio.sleep(0.05)
        events.append("slow ended")
        return "slow done"

    @ai.tool(requires_approval=True)
    async def pay(amount: int) -> str:
        """Pays, once approved."""
        return f"paid {amount}"

    model = ScriptedModel(
        [[tool_call("ask", {"q": "why?"}), tool_call("slow"), tool_call("pay", {"amount": 5})], "done"]
    )
    agent = ai.define_agent(name="a", model=model, tools=[ask, slow, pay], store=store)
    chat = agent.chat()
    turn = chat.send_stream("go")
    order = []
    async for chunk in turn:
        if chunk.kind == "interrupt":
            order.append(chunk.interrupt.name)
            events.append(f"{chunk.interrupt.name} streamed")
    res = await turn.response
    assert order == [p.name for p in res.interrupts] == ["ask", "pay"]
    assert events.index("slow ended") < events.index("pay streamed")
    resumed = chat.resume_stream(restart=[agent.approval(res.interrupts[1])])
    assert [c.interrupt.name async for c in resumed if c.kind == "interrupt"] == []


def test_a_stream_started_where_no_event_loop_runs_is_refused_at_once() -> None:
    """Found by a probe: made at a module's top level, the turn's task waited for a loop that
    never ran it, and reading the stream later in ``asyncio.run`` waited for ever. It is refused
    when called, nothing started; the chat works as ever from async code."""
    agent, _ = approvals_agent(InMemorySessionStore(), ["Hello."])
    chat = agent.chat()
    with pytest.raises(UsageError, match="none runs here"):
        chat.send_stream("hello")

    async def afterwards():
        return await chat.history(), await chat.send_stream("hello")  # awaiting a stream: its response

    history, response = asyncio.run(asyncio.wait_for(afterwards(), 10))
    assert history == [] and response.text == "Hello."
