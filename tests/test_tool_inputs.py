"""How a tool's input is read and kept: field aliases, validators that raise what pydantic does
not report, a tool's own ``CancelledError`` and parameter names pydantic cannot take (each
found by a probe of many kinds of tools; the same over HTTP: ``server/test_tool_inputs_http``)."""

import asyncio
import dataclasses
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field, field_validator

from pausepoint import AgentFinishReason, Interrupt, PauseDisplay, Pausepoint, ToolRunContext
from pausepoint.errors import DefinitionError, InvalidAnswer
from pausepoint.stores import SqliteSessionStore
from pausepoint.testing import ScriptedModel, last_tool_results, tool_call


class Move(BaseModel):
    from_: str = Field(alias="from", title="From account")
    to: str
    amount: int = 1


SENT = {"from": "checking", "to": "savings"}  # as the schema the model is shown names the fields


def _once(name: str, args: dict[str, Any]) -> ScriptedModel:
    """A model that calls ``name`` with ``args`` for each user message, then says "done"."""
    return ScriptedModel(lambda r: "done" if r.messages[-1].role == "tool" else [tool_call(name, args)])


async def test_an_aliased_input_pauses_as_the_model_sent_it_and_an_answer_runs_it(tmp_path):
    """Found by a probe: the pause kept ``from_`` (the field's name) and an approval or a restart
    read it by alias, so the approved call never ran: the model was told its input was invalid."""
    ai, runs = Pausepoint(), []

    @ai.tool(requires_approval=True, display=PauseDisplay(title="Move from {from_}", fields=["from_", "to"]))
    def move(input: Move) -> str:
        """Move money (asks first)."""
        runs.append(("move", input.from_, input.to, input.amount))
        return "moved"

    @ai.tool()
    async def checked_move(input: Move, ctx: ToolRunContext) -> str:
        """Move money after a check of its own."""
        if not ctx.is_resumed:
            raise Interrupt({"check": input.from_})
        runs.append(("checked_move", input.from_, input.to, input.amount, ctx.original_input))
        return "moved"

    @ai.tool(requires_approval=True)
    def plain_move(from_: Annotated[str, Field(alias="from")], to: str) -> str:
        """The same with plain parameters."""
        runs.append(("plain_move", from_, to))
        return "moved"

    store = SqliteSessionStore(tmp_path / "s.db")
    for tool in (move, checked_move, plain_move):
        name, model = tool.name, _once(tool.name, SENT)
        agent = ai.define_agent(name=name, model=model, tools=[tool], store=store)
        chat = agent.chat()
        [pause] = (await chat.send("go")).interrupts
        view = agent.view(pause)
        shown = view.fields[0]  # named as the input names it, labelled by its title
        assert (shown.name, shown.text) == ("from", "checking")
        if name == "move":  # a display names fields by their Python names, as they are defined
            assert view.title == "Move from checking" and [f.name for f in view.fields] == ["from", "to"]
        assert shown.label == ("From" if name == "plain_move" else "From account")
        if name in ("move", "checked_move"):  # a pause keeps its input by alias, defaults filled in
            assert pause.input == {**SENT, "amount": 1}
        if name == "checked_move":
            done = await chat.resume(restart=[pause.restart(resumed_metadata={"tool_approved": True})])
        else:
            if name == "plain_move":
                assert pause.input == SENT
            done = await chat.approve(pause.ref)
        assert done.text == "done" and last_tool_results(model.requests[-1]) == {name: "moved"}
    assert runs == [
        ("move", "checking", "savings", 1),
        ("checked_move", "checking", "savings", 1, None),  # restarted as it paused: no edit, no original
        ("plain_move", "checking", "savings"),
    ]
    assert move.validate_input({"from_": "a", "to": "b"}) == Move.model_validate({"from": "a", "to": "b"})


class Note(BaseModel):
    text: str
    tag: str | None = None

    @field_validator("tag")
    @classmethod
    def clean(cls, v: Any) -> Any:
        if v == "retired":
            raise LookupError("tag 'retired' was retired")  # a lookup that fails: no ValueError
        return v.strip().lower()  # AttributeError on the model's null


class Saved(BaseModel):
    id: int

    @field_validator("id")
    @classmethod
    def known(cls, v: int) -> int:
        return {1: 1}[v]  # KeyError for any other id


async def test_a_validator_that_raises_anything_is_invalid_input_and_the_session_goes_on(tmp_path):
    """Found by a probe: an ``AttributeError`` (or ``KeyError``, ``LookupError``) out of an input
    model's validator came out of ``send`` raw, left the call running in the store, made
    ``view`` raise and lost an approval given before the validator's data changed."""
    ai, runs = Pausepoint(), []

    @ai.tool()
    def save_note(input: Note) -> str:
        """Save a note."""
        runs.append(input.text)
        return "saved"

    @ai.tool()
    async def publish(input: Note, ctx: ToolRunContext) -> Saved:
        """Publish a note after a check."""
        if not ctx.is_resumed:
            raise Interrupt({"check": input.text})
        runs.append("published")
        return Saved(id=1)

    def script(request: Any) -> Any:
        if request.messages[-1].role == "tool":
            return "done"
        if request.messages[-1].text == "publish":
            return [tool_call("publish", {"text": "hi", "tag": "draft"})]
        return [tool_call("save_note", {"text": "hi", "tag": None})]

    model = ScriptedModel(script)
    store = SqliteSessionStore(tmp_path / "s.db")
    agent = ai.define_agent(name="notes", model=model, tools=[save_note, publish], store=store)
    chat = agent.chat()
    assert (await chat.send("note")).finish_reason == AgentFinishReason.STOP
    told = last_tool_results(model.requests[-1])["save_note"]
    assert told["error"] == "invalid input for tool 'save_note'"
    [detail] = told["details"]
    assert detail["type"] == "validator_failed" and "AttributeError" in detail["msg"]
    other = Pausepoint().define_agent(name="notes", model=model, tools=[save_note, publish], store=store)
    assert (await other.chat(chat.session_id).send("note")).finish_reason == AgentFinishReason.STOP
    assert runs == []

    [pause] = (await chat.send("publish")).interrupts
    with pytest.raises(InvalidAnswer, match="KeyError"):  # an answer's output, read by its type
        await chat.resume(respond=[pause.respond({"id": 2})])
    changed = dataclasses.replace(pause, input={"text": "hi", "tag": "retired"})
    assert agent.view(changed).fields[1].text == "retired"  # the input as it is: a view never raises
    published = await chat.resume(respond=[pause.respond({"id": 1})])
    assert published.text == "done" and last_tool_results(model.requests[-1]) == {"publish": {"id": 1}}


async def test_a_pause_whose_input_stops_validating_ends_as_invalid_input_when_approved():
    ai, runs, retired = Pausepoint(), [], {"tags": set()}

    class Tagged(BaseModel):
        tag: str

        @field_validator("tag")
        @classmethod
        def live(cls, v: str) -> str:
            if v in retired["tags"]:
                raise LookupError(f"tag {v!r} was retired")
            return v

    @ai.tool(requires_approval=True)
    def tag(input: Tagged) -> str:
        """Tag it (asks first)."""
        runs.append(input.tag)
        return "tagged"

    model = _once("tag", {"tag": "x"})
    agent = ai.define_agent(name="t", model=model, tools=[tag])
    chat = agent.chat()
    [pause] = (await chat.send("go")).interrupts
    retired["tags"].add("x")  # the data behind the validator changed while the pause waited
    assert agent.view(pause).title
    done = await chat.approve(pause.ref)
    assert done.finish_reason == AgentFinishReason.STOP and await chat.interrupts() == [] and runs == []
    told = last_tool_results(model.requests[-1])["tag"]
    assert told["error"] == "invalid input for tool 'tag'" and "LookupError" in told["details"][0]["msg"]
    retired["tags"].clear()
    assert (await chat.send("again")).interrupts  # the session goes on


async def test_a_tools_own_cancelled_error_is_its_failure_and_a_callers_cancellation_is_not():
    """Found by a probe: a tool awaiting a task something else cancelled let ``CancelledError``
    out, taken for the caller's cancellation: ``send`` raised it into a caller nobody cancelled,
    the turn ended ``aborted`` (over REST: 503 ``shutting_down`` from a running server)."""
    ai, started = Pausepoint(), asyncio.Event()

    @ai.tool()
    async def fetch_shared(key: str) -> str:
        """Read what another component loads."""
        loader = asyncio.get_running_loop().create_task(asyncio.sleep(10))
        await asyncio.sleep(0)
        loader.cancel()  # the other component gives up on its load
        return await loader

    @ai.tool()
    async def slow(key: str) -> str:
        """Takes its time."""
        started.set()
        await asyncio.sleep(10)
        return "late"

    said = "CancelledError: something the tool awaited was cancelled"
    for errors, finish in (("model", AgentFinishReason.STOP), ("fail", AgentFinishReason.FAILED)):
        model = _once("fetch_shared", {"key": "k"})
        agent = ai.define_agent(name=f"c-{errors}", model=model, tools=[fetch_shared], tool_errors=errors)
        response = await agent.chat().send("go")
        assert response.finish_reason == finish
        [results] = [m.tool_responses for m in (await agent.chat(response.session_id).history()) if m.role == "tool"]
        assert [r.output for r in results] == [{"error": said}]
    chat = ai.define_agent(name="s", model=_once("slow", {"key": "k"}), tools=[slow]).chat()
    sending = asyncio.create_task(chat.send("go"))
    await started.wait()
    sending.cancel()  # the caller's own cancellation still cuts the call short
    with pytest.raises(asyncio.CancelledError):
        await sending
    last = await chat.last_response()
    assert last is not None and last.finish_reason == AgentFinishReason.ABORTED


async def test_a_parameter_pydantic_cannot_take_as_a_field_is_refused_when_defined():
    """Found by a probe: ``def lookup(_id: int)`` was taken, ``_id`` left out of the schema (pydantic
    keeps such names private) and every call failed with ``TypeError``; ``model_config`` was
    refused with "'ellipsis' object is not iterable", ``model_extra`` read pydantic's value."""
    ai = Pausepoint()
    for name in ("_id", "__x", "model_config", "model_extra", "model_fields_set"):
        namespace: dict[str, Any] = {}
        exec(f"def lookup({name}: int) -> int:\n    return 1", namespace)
        with pytest.raises(DefinitionError, match=f"parameter '{name}'"):
            ai.tool(name=f"t{len(name)}{name[-1]}")(namespace["lookup"])
    with pytest.raises(DefinitionError, match=r"name it 'id' \(or, to show the model '_id', `id_: Annotated"):

        @ai.tool()
        def lookup(_id: int) -> str:
            return ""

    @ai.tool()
    def by_alias(id_: Annotated[int, Field(alias="_id")], _ctx: ToolRunContext) -> str:
        """The name the model sees starts with '_'; the context's name may."""
        return f"record {id_} in {_ctx.session_id}"

    @ai.tool()
    def whole(_input: Move) -> str:  # a lone model is passed as it is: its parameter's name is no field
        return _input.to

    assert by_alias.input_schema["required"] == ["_id"] and "_input" not in whole.input_schema["properties"]
    model = _once("by_alias", {"_id": 7})  # the name the error suggests runs
    chat = ai.define_agent(name="a", model=model, tools=[by_alias]).chat()
    await chat.send("go")
    assert last_tool_results(model.requests[-1]) == {"by_alias": f"record 7 in {chat.session_id}"}
