"""Tool definitions: what a function becomes, as a model sees it and as the runtime runs it."""

import asyncio
import threading
from datetime import timedelta
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

from pausepoint import (
    AgentFinishReason,
    Interrupt,
    ModelRequest,
    Pausepoint,
    TextPart,
    Tool,
    ToolResultChunk,
    ToolRunContext,
)
from pausepoint.errors import DefinitionError, ModelNotFound
from pausepoint.stores import InMemorySessionStore, SqliteSessionStore
from pausepoint.testing import ScriptedModel, last_tool_results, tool_call

from .helpers import late_and_early_pauses


class Question(BaseModel):
    question: str


class Transfer(BaseModel):
    amount: int
    to: str


def test_model_input_name_description_and_output_schema():
    ai = Pausepoint()

    @ai.tool()
    async def transfer_money(input: Transfer) -> str:
        """Move money.

        Only after approval."""
        return "ok"

    definition = transfer_money.definition
    assert definition.name == "transfer_money"
    assert definition.description == "Move money.\n\nOnly after approval."
    assert definition.input_schema == Transfer.model_json_schema()
    assert definition.output_schema == {"type": "string"}


def test_plain_parameters_become_an_input_schema_and_names_can_be_overridden():
    ai = Pausepoint()

    @ai.tool(name="lookup_user", description="Find a user.")
    def find(user_id: Annotated[int, Field(description="The id")], verbose: bool = False) -> dict:
        return {}

    schema = find.definition.input_schema
    assert find.name == "lookup_user" and find.description == "Find a user."
    assert schema["required"] == ["user_id"]
    assert schema["properties"]["user_id"]["description"] == "The id"
    assert schema["properties"]["verbose"]["default"] is False


class _Question(BaseModel):
    question: str


@pytest.mark.parametrize(
    "name", ["bank.lookup", "bank/lookup", "check balance", "überweisen", "a:b", "1tool", "-x", "x" * 65, "<lambda>"]
)
def test_a_tool_name_some_provider_refuses_is_refused_when_the_tool_is_defined(name: str) -> None:
    """Found by a probe: any name was taken and sent as it was, and each provider refuses some
    (a dotted one OpenAI and Anthropic, one of 65 characters OpenAI and Gemini): the agent failed
    with ``ModelBadRequest`` at its first model call, on some providers only."""
    ai = Pausepoint()
    with pytest.raises(DefinitionError, match="is not one every provider takes: a letter or '_' first"):
        ai.tool(name=name)(lambda: "")
    with pytest.raises(DefinitionError, match="is not one every provider takes"):
        ai.define_interrupt(name=name, input_schema=_Question)


@pytest.mark.parametrize("name", ["team/bank", "..", ".hidden", "a b", "a\nb", "bänk", "x" * 129])
def test_an_agent_name_no_url_can_carry_as_one_segment_is_refused_when_the_agent_is_defined(name: str) -> None:
    """Found by a probe: ``define_agent(name="team/bank")`` was taken and listed by ``GET
    /v1/agents``, and every REST and Genkit-wire route of it answered 404."""
    with pytest.raises(DefinitionError, match="cannot be one segment of a URL"):
        Pausepoint().define_agent(name=name, model=ScriptedModel([]))


def test_an_empty_tool_name_is_refused_not_replaced_by_the_functions() -> None:
    """Found by a probe: ``name=""`` was taken as no name (the function's), where
    ``define_interrupt(name="")`` is refused."""
    with pytest.raises(DefinitionError, match="tool name '' is not one every provider takes"):
        Pausepoint().tool(name="")(lambda: "")


@pytest.mark.parametrize("name", ["lookup", "_private", "bank-lookup", "Transfer_2", "x" * 64])
def test_a_tool_name_every_provider_takes_is_taken(name: str) -> None:
    assert Pausepoint().tool(name=name)(lambda: "").name == name


def test_bad_definitions_are_refused():
    ai = Pausepoint()

    @ai.tool()
    def once() -> str:
        return ""

    with pytest.raises(DefinitionError):

        @ai.tool(name="once")
        def again() -> str:
            return ""

    with pytest.raises(DefinitionError):

        @ai.tool()
        def variadic(*args: int) -> str:
            return ""

    with pytest.raises(DefinitionError):
        ai.define_agent(name="a", model=ScriptedModel([]), tools=[print])  # type: ignore[list-item]
    with pytest.raises(ModelNotFound):
        ai.define_agent(name="b", model="nowhere/model")
    for bad in (0, -1, 1.5, "3", True):
        with pytest.raises(DefinitionError, match="max_turns must be a whole number"):
            ai.define_agent(name="c", model=ScriptedModel([]), max_turns=bad)  # type: ignore[arg-type]
    # None is Genkit's default: the default limit (found by a probe porting Genkit code).
    assert ai.define_agent(name="c", model=ScriptedModel([]), max_turns=None).max_turns == 10
    for name in ("", None):
        with pytest.raises(DefinitionError, match="an agent needs a name"):
            ai.define_agent(name=name, model=ScriptedModel([]))  # type: ignore[arg-type]
    # Durations are a timedelta or seconds, as a ttl is (found by a probe: a float abandon_after
    # was taken, then raised TypeError in a race much later).
    agent = ai.define_agent(name="d", model=ScriptedModel([]), abandon_after=90.5)
    assert agent.abandon_after == timedelta(seconds=90.5)
    for bad in (-1, float("inf"), float("nan"), "60", True, None, timedelta(seconds=-1)):
        with pytest.raises(DefinitionError, match="abandon_after must be a timedelta or number of seconds"):
            ai.define_agent(name="e", model=ScriptedModel([]), abandon_after=bad)  # type: ignore[arg-type]
    for bad in (0, -0.5, float("nan"), "1", True, None):
        with pytest.raises(DefinitionError, match="abort_poll must be a positive number of seconds"):
            ai.define_agent(name="e", model=ScriptedModel([]), abort_poll=bad)  # type: ignore[arg-type]
    # A cache that can hold no session, a checkpoint interval that is no count (found by a probe:
    # taken, then every call raised KeyError or TypeError — the send written all the same).
    for bad in (0, -1, 1.5, "8", True, None):
        with pytest.raises(DefinitionError, match="cache_size must be a whole number of at least 1"):
            ai.define_agent(name="e", model=ScriptedModel([]), cache_size=bad)  # type: ignore[arg-type]
        if bad is not None:
            with pytest.raises(DefinitionError, match="checkpoint_every must be a whole number of at least 1, or None"):
                agent.checkpoint_every = bad  # type: ignore[assignment]
    agent.checkpoint_every = None  # never write checkpoints
    agent.checkpoint_every = 16
    # Nor a time-to-live that no date is that far ahead of (found by a probe: 9,000 years was
    # taken, then the turn raised OverflowError with a sibling call run and the session stuck).
    for ttl in (-5, 0, timedelta(0), "60", True, float("nan"), float("inf"), 1e12, timedelta(days=365 * 9000)):
        with pytest.raises(DefinitionError, match=r"ttl must be a timedelta from a microsecond to 10\*\*9 seconds"):
            ai.define_interrupt("ask", input_schema=Question, ttl=ttl)  # type: ignore[arg-type]
        with pytest.raises(DefinitionError, match=r"ttl must be a timedelta from a microsecond to 10\*\*9 seconds"):
            Interrupt(ttl=ttl)  # type: ignore[arg-type]  # as README says (it was a plain ValueError)
    assert Interrupt(ttl=10**9).ttl == timedelta(seconds=10**9)


async def test_a_callable_object_is_a_tool_its_async_call_awaited():
    """Found by a probe: an object with an async ``__call__`` was run in a thread, its coroutine
    never awaited; one without a name= raised AttributeError."""

    class Doubler:
        async def __call__(self, given: Question) -> str:
            await asyncio.sleep(0)
            return given.question * 2

    with pytest.raises(DefinitionError, match="a callable object or a partial has no name of its own: give it name="):
        Tool(Doubler())
    with pytest.raises(DefinitionError, match="a tool wraps a function, not 5"):
        Tool(5)  # type: ignore[arg-type]
    model = ScriptedModel([[tool_call("double", {"question": "ab"})], "done"])
    agent = Pausepoint().define_agent(name="a", model=model, tools=[Tool(Doubler(), name="double")])
    assert (await agent.chat().send("go")).text == "done"
    assert last_tool_results(model.requests[-1]) == {"double": "abab"}


async def test_sync_tools_run_off_the_event_loop_and_get_context():
    ai = Pausepoint()
    seen = {}

    @ai.tool
    def where(label: str, ctx: ToolRunContext) -> str:
        """Reports where it ran."""
        seen.update(thread=threading.current_thread().name, session=ctx.session_id, principal=ctx.principal)
        seen["resumed"] = ctx.is_resumed
        return label.upper()

    agent = ai.define_agent(
        name="t",
        model=ScriptedModel([[tool_call("where", {"label": "x"})], "done"]),
        tools=[where],
        store=InMemorySessionStore(),
    )
    chat = agent.chat(principal="pat")
    await chat.send("go")
    assert seen["thread"] != threading.main_thread().name
    assert (seen["session"], seen["principal"], seen["resumed"]) == (chat.session_id, "pat", False)
    assert (await chat.history())[2].tool_responses[0].output == "X"


async def test_pydantic_outputs_are_stored_as_json():
    ai = Pausepoint()

    @ai.tool()
    async def make(amount: int) -> Transfer:
        """Builds a transfer."""
        return Transfer(amount=amount, to="savings")

    model = ScriptedModel([[tool_call("make", {"amount": 3})], "ok"])
    agent = ai.define_agent(name="m", model=model, tools=[make])
    await agent.chat().send("go")
    assert model.requests[-1].messages[-1].tool_responses[0].output == {"amount": 3, "to": "savings"}


async def test_an_interrupts_metadata_may_be_a_model_and_must_be_a_json_object():
    ai = Pausepoint()

    @ai.tool()
    async def pay(amount: int) -> str:
        """Pauses with a model as its metadata."""
        raise Interrupt(Transfer(amount=amount, to="savings"))

    agent = ai.define_agent(name="why", model=ScriptedModel([[tool_call("pay", {"amount": 3})]]), tools=[pay])
    [pause] = (await agent.chat().send("go")).interrupts
    assert pause.metadata == {"amount": 3, "to": "savings"}
    for wrong, said in ((["a", "list"], "a list is not one"), (object(), "not object")):
        with pytest.raises(TypeError, match=said):
            Interrupt(wrong)


async def test_define_model_functions_and_the_request_the_model_sees():
    ai = Pausepoint()
    seen = []

    def echo(request):
        from pausepoint import Message, ModelResponse, TextPart

        seen.append(request)
        return ModelResponse(Message("model", [TextPart(f"echo {request.messages[-1].text}")]))

    ai.define_model(name="echo", fn=echo)

    @ai.tool()
    async def noop() -> None:
        """Does nothing."""

    agent = ai.define_agent(name="e", model="echo", system="Be brief.", tools=[noop], config={"temperature": 0})
    res = await agent.chat().send("hi")
    assert res.text == "echo hi"
    [request] = seen
    assert request.system == "Be brief." and request.config == {"temperature": 0}
    assert [t.name for t in request.tools] == ["noop"]


async def test_genkits_is_resumed_method_pauses_and_runs_the_restarted_call():
    """Genkit's ``ctx.is_resumed()`` is a method: code ported from it pauses, then runs once restarted."""
    ai = Pausepoint()
    ran: list[str] = []

    @ai.tool()
    async def run_shell(command: str, ctx: ToolRunContext) -> dict[str, object]:
        """Runs a command once a person agreed."""
        if not ctx.is_resumed():
            raise Interrupt({"command": command})
        assert ctx.is_resumed and ctx.is_resumed == True  # noqa: E712 - as a value, too
        ran.append(command)
        # and in a result, JSON's true; in text, as a bool reads
        return {"ran": command, "resumed": ctx.is_resumed, "said": f"resumed={ctx.is_resumed}, {ctx.is_resumed!s}"}

    agent = ai.define_agent(
        name="shell",
        model=ScriptedModel([[tool_call("run_shell", {"command": "ls"})], "done"]),
        tools=[run_shell],
        store=InMemorySessionStore(),
    )
    chat = agent.chat()
    paused = await chat.send("list it")
    assert paused.finish_reason == AgentFinishReason.INTERRUPTED and ran == []
    done = await chat.resume(restart=[paused.interrupts[0].restart()])
    assert (done.text, ran) == ("done", ["ls"])
    [result] = (await chat.history())[-2].tool_responses
    assert result.output == {"ran": "ls", "resumed": True, "said": "resumed=True, True"}


async def test_a_batchs_pauses_and_results_keep_the_order_the_model_asked_for_them():
    """The first call pauses late, the second at once, the third completes: every surface lists
    them as the model asked, not as their timing fell."""
    ai = Pausepoint()
    checks, calls = late_and_early_pauses(ai)

    @ai.tool()
    async def lookup(what: str) -> str:
        """Asked third; answers at once."""
        return what

    model = ScriptedModel([[*calls, tool_call("lookup", {"what": "c"})], "done"])
    agent = ai.define_agent(name="order", model=model, tools=[*checks, lookup], store=InMemorySessionStore())
    chat = agent.chat()
    turn = chat.send_stream("check both")
    chunks = [chunk async for chunk in turn]
    paused = await turn.response
    asked = ["slow_check", "quick_check"]
    assert [i.name for i in paused.interrupts] == asked
    assert [c.interrupt.name for c in chunks if c.kind == "interrupt"] == asked
    assert [i.name for i in await chat.interrupts()] == asked


async def test_a_call_that_pauses_again_keeps_its_place_among_the_open_pauses(tmp_path):
    """A restart of the first call that pauses anew lists it first again, before the second
    call's pause: in the response, the stream, ``chat.interrupts()`` and a process that loads
    the session from the store."""
    ai = Pausepoint()
    checks, calls = late_and_early_pauses(ai)
    store = SqliteSessionStore(str(tmp_path / "s.db"))
    agent = ai.define_agent(name="again", model=ScriptedModel([calls, "done"]), tools=checks, store=store)
    chat = agent.chat()
    first, second = (await chat.send("check both")).interrupts
    turn = chat.resume_stream(restart=[first.restart()])  # it pauses again
    chunks = [chunk async for chunk in turn]
    again = await turn.response
    asked = ["slow_check", "quick_check"]
    assert [i.name for i in again.interrupts] == asked and again.interrupts[1].ref == second.ref
    assert [c.response.interrupts for c in chunks if c.kind == "turn_end"] == [again.interrupts]
    assert [i.name for i in await chat.interrupts()] == asked
    assert [i.name for i in (await chat.last_response()).interrupts] == asked
    other = Pausepoint()
    cold = other.define_agent(name="again", model=ScriptedModel([]), tools=late_and_early_pauses(other)[0], store=store)
    assert [i.name for i in await cold.chat(chat.session_id).interrupts()] == asked
    await store.close()


async def test_a_failing_batch_ends_with_the_error_of_the_first_call_the_model_asked_for():
    ai = Pausepoint()

    @ai.tool()
    async def slow_fail(what: str) -> str:
        """Asked first; fails after a while."""
        await asyncio.sleep(0.05)
        raise RuntimeError("slow one broke")

    @ai.tool()
    async def quick_fail(what: str) -> str:
        """Asked second; fails at once."""
        raise RuntimeError("quick one broke")

    calls = [tool_call("slow_fail", {"what": "a"}), tool_call("quick_fail", {"what": "b"})]
    agent = ai.define_agent(
        name="failing", model=ScriptedModel([calls]), tools=[slow_fail, quick_fail], tool_errors="fail"
    )
    ended = await agent.chat().send("try both")
    assert ended.finish_reason == AgentFinishReason.FAILED
    assert "slow_fail" in (ended.error or "") and "slow one broke" in (ended.error or "")


async def test_genkits_call_shapes_define_the_same_tools_and_agents():
    """Names by position, an interrupt without a description, tools named in ``define_agent``."""
    ai = Pausepoint()

    class Question(BaseModel):
        question: str

    ask = ai.define_interrupt("askUser", input_schema=Question)
    assert (ask.name, ask.description) == ("askUser", "")

    @ai.tool("weather", "The weather in a city")
    def forecast(city: str) -> str:
        return f"sunny in {city}"

    assert (forecast.name, forecast.description) == ("weather", "The weather in a city")
    model = ScriptedModel([[tool_call("weather", {"city": "Oslo"})], "done"])
    agent = ai.define_agent("helper", model=model, tools=["weather", ask], store=InMemorySessionStore())
    assert [t.name for t in agent.tools.values()] == ["weather", "askUser"]
    chat = agent.chat()
    await chat.send("weather?")
    assert (await chat.history())[2].tool_responses[0].output == "sunny in Oslo"

    # what cannot be taken is a DefinitionError that says what to give instead
    with pytest.raises(DefinitionError, match="no tool named 'nowhere'"):
        ai.define_agent("other", model=model, tools=["nowhere"])
    with pytest.raises(DefinitionError, match=r"must be a pydantic model class .* not dict"):
        ai.define_interrupt("raw", input_schema={"type": "object"})  # type: ignore[arg-type]
    with pytest.raises(DefinitionError, match="not none"):
        ai.define_interrupt("bare")
    with pytest.raises(DefinitionError, match=r"output_schema must be a type .* not a dict"):  # was a SchemaError
        ai.define_interrupt("raw_out", input_schema=Question, output_schema={"type": "object"})  # type: ignore[arg-type]


async def test_a_batch_answered_from_two_processes_streams_its_tool_message_where_it_completes(tmp_path):
    """One process runs an approved tool while another answers the other pause of its batch:
    the batch completes in the first, whose stream then carries the tool results, as one
    process answering both would — the chunks are the history as it is written."""
    path = tmp_path / "sessions.db"
    tool_started = asyncio.Event()
    agents: list[Any] = []

    def build() -> Any:
        ai = Pausepoint()

        class Question(BaseModel):
            q: str

        ask = ai.define_interrupt("ask", input_schema=Question)

        @ai.tool(requires_approval=True)
        async def pay(amount: int, ctx: ToolRunContext) -> str:
            """Pays, once approved; slow: the other process answers "ask" meanwhile."""
            tool_started.set()
            for _ in range(500):
                trail = await agents[1].chat(ctx.session_id).audit_trail()
                if any(entry.decision == "respond" for entry in trail):
                    break
                await asyncio.sleep(0.01)
            return f"paid {amount}"

        def script(request: ModelRequest) -> Any:
            if request.messages[-1].role == "user":
                return [tool_call("ask", {"q": "why?"}), tool_call("pay", {"amount": 5})]
            return "done: " + ", ".join(str(v) for v in last_tool_results(request).values())

        return ai.define_agent(
            name="payer", model=ScriptedModel(script), tools=[ask, pay], store=SqliteSessionStore(path)
        )

    agents.extend([build(), build()])  # two processes' agents: each its own store object and cache
    chat = agents[0].chat()
    ask_pause, pay_pause = (await chat.send("pay 5")).interrupts

    async def answer_ask() -> None:
        await tool_started.wait()
        await agents[1].chat(chat.session_id).resume(respond=[ask_pause.respond({"because": "rent"})])

    other = asyncio.create_task(answer_ask())
    turn = chat.resume_stream(restart=[agents[0].approval(pay_pause)])
    chunks = [chunk async for chunk in turn]
    done = await turn.response
    await other
    assert done.finish_reason == AgentFinishReason.STOP and done.text == "done: {'because': 'rent'}, paid 5"
    tool_message = (await chat.history())[2]
    assert tool_message.role == "tool"
    streamed = [(c.ref, c.output) for c in chunks if isinstance(c, ToolResultChunk)]
    assert streamed == [(p.ref, p.output) for p in tool_message.tool_responses]
    assert [output for _, output in streamed] == [{"because": "rent"}, "paid 5"]


async def test_genkits_app_model_and_system_parts_are_taken_and_anything_else_is_refused_at_once():
    """Ported from Genkit: ``Genkit(model=...)`` names the model of agents defined without one,
    and ``system`` may be a list of text parts. A system prompt of anything else was taken and
    failed every turn at the provider (found by a probe); it is refused when defined."""
    seen: list[str | None] = []

    def model(request: ModelRequest) -> str:
        seen.append(request.system)
        return "Hi."

    ai = Pausepoint(model=ScriptedModel(model))
    agent = ai.define_agent("helper", system=[TextPart("Be terse. "), "Use tools."])
    assert agent.system == "Be terse. Use tools."
    assert (await agent.chat().send("hello")).text == "Hi."
    assert seen == ["Be terse. Use tools."]
    for bad in (42, ["ok", 1], {"text": "x"}, [TextPart("a"), None]):
        with pytest.raises(DefinitionError, match="system must be text, or a list of text parts"):
            ai.define_agent("other", system=bad)  # type: ignore[arg-type]
    with pytest.raises(DefinitionError, match="has no model"):
        Pausepoint().define_agent("modelless")


async def test_an_input_the_tool_refuses_reaches_the_model_as_json_the_history_keeps(store):
    """The model is shown the refusal's details as JSON (a field's path as a list), the same as
    any process reads them back from the session (found by a probe: a Python tuple in memory)."""

    class Stay(BaseModel):
        nights: int = Field(ge=1)

    ai = Pausepoint()

    @ai.tool()
    async def book(input: Stay) -> str:
        """Book a stay."""
        return "booked"

    model = ScriptedModel([[tool_call("book", {"nights": 0})], "I see"])
    chat = ai.define_agent(name="a", model=model, tools=[book], store=store).chat()
    await chat.send("book")
    [shown] = model.requests[-1].messages[-1].tool_responses
    [detail] = shown.output["details"]
    assert detail["loc"] == ["nights"] and detail["type"] == "greater_than_equal"
    again = Pausepoint().define_agent(name="a", model=model, tools=[book], store=store)
    [kept] = (await again.chat(chat.session_id).history())[2].tool_responses
    assert kept.output == shown.output


async def test_unusual_definitions_work_or_are_refused_when_defined():
    """Found by a probe: an async generator, positional-only fields, ``ctx: ToolRunContext | None``,
    a ``functools.partial``, a ``typing.TypedDict`` output and Genkit's ``(input, ctx)`` with the
    context unannotated were taken and failed each call, or raised pydantic's or Python's own
    errors."""
    import functools
    import typing

    async def stream_it(n: int):
        yield n

    def positional(a: int, b: int, /) -> int:
        return a + b

    with pytest.raises(DefinitionError, match="async generator: a tool returns one result"):
        Tool(stream_it)
    with pytest.raises(DefinitionError, match=r"'a', 'b' is positional-only \(before /\)"):
        Tool(positional)
    with pytest.raises(DefinitionError, match="a callable object or a partial has no name of its own"):
        Tool(functools.partial(positional, 1))

    class Shape(typing.TypedDict):
        side: int

    with pytest.raises(DefinitionError, match="cannot describe its input or output"):
        Tool(lambda question: question, name="ask", output_schema=Shape)

    async def scaled(q: Question, /, ctx: ToolRunContext | None = None) -> str:
        """Doubles the question."""
        assert ctx is not None and not ctx.is_resumed
        return q.question * 2

    def add(a: int, b: int) -> int:
        """Adds two numbers."""
        return a + b

    async def genkit_style(q: Question, ctx):  # Genkit passes the context second, unannotated
        return f"{q.question} ({'resumed' if ctx.is_resumed else 'first run'})"

    assert list(Tool(genkit_style).input_schema["properties"]) == ["question"]
    plus_one = Tool(functools.partial(add, b=1), name="plus_one")
    assert plus_one.description == "Adds two numbers." and list(plus_one.input_schema["properties"]) == ["a", "b"]
    asked = [tool_call("scaled", {"question": "ab"}), tool_call("plus_one", {"a": 2})]
    model = ScriptedModel([[*asked, tool_call("genkit_style", {"question": "hi"})], "done"])
    agent = Pausepoint().define_agent(name="a", model=model, tools=[Tool(scaled), plus_one, Tool(genkit_style)])
    assert (await agent.chat().send("go")).text == "done"
    told = {"scaled": "abab", "plus_one": 3, "genkit_style": "hi (first run)"}
    assert last_tool_results(model.requests[-1]) == told


async def test_a_genkit_context_named_ctx_is_the_context_whatever_the_input_is():
    """Found by a probe: ``async def weather(city: str, ctx)`` (and ``(data: dict, ctx)``,
    ``(input, ctx)``) made ``ctx`` a required input field the model was asked for, and every
    call failed validation. Genkit's second parameter is always the context."""

    async def weather(city: str, ctx) -> str:
        return f"sunny in {city} ({'resumed' if ctx.is_resumed else 'first run'})"

    def tagged(data: dict, context):
        return {"keys": sorted(data), "resumed": bool(context.is_resumed)}

    def untyped(input, ctx):
        return input

    def two_fields(city: str, country):  # another name: an input field, as before
        return f"{city}, {country}"

    def forecast(city: str, days: int, ctx):  # found by a second probe: ctx after two fields
        return f"{days} days in {city}"

    schemas = {t.name: t.input_schema for t in map(Tool, (weather, tagged, untyped, two_fields, forecast))}
    assert {name: schema.get("required") for name, schema in schemas.items()} == {
        "weather": ["city"],
        "tagged": ["data"],
        "untyped": ["input"],
        "two_fields": ["city", "country"],
        "forecast": ["city", "days"],
    }
    model = ScriptedModel(
        [[tool_call("weather", {"city": "Paris"}), tool_call("tagged", {"data": {"b": 1, "a": 2}})], "ok"]
    )
    agent = Pausepoint().define_agent(name="a", model=model, tools=[Tool(weather), Tool(tagged)])
    assert (await agent.chat().send("go")).text == "ok"
    assert last_tool_results(model.requests[-1]) == {
        "weather": "sunny in Paris (first run)",
        "tagged": {"keys": ["a", "b"], "resumed": False},
    }
