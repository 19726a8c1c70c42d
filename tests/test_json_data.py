"""What a session accepts can be read back, as it was written — in this process and in any other.

Every value that breaks the stores' JSON rules (nested too deep, an integer too long, NaN or
Infinity, a lone surrogate, a string over the limit) is written through every entry point of
the Python API and of the model loop: answers and their metadata, user messages and their
senders, a model's text and tool-call arguments, a tool's result, an ``Interrupt``'s metadata.
Each is refused with a typed error naming the JSON path and the limit, or — for what a model or
a tool produced — handed to the model as an error result; either way nothing unreadable is
written, and a second Python process reads the session exactly as it was.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from pausepoint import (
    AgentFinishReason,
    Interrupt,
    JsonLimits,
    MediaPart,
    Message,
    ModelResponse,
    Pausepoint,
    TextPart,
    ToolResponse,
    ToolRestart,
    ToolRunContext,
)
from pausepoint.errors import (
    AlreadyResolved,
    DefinitionError,
    InvalidAnswer,
    InvalidMessage,
    ModelOutputError,
)
from pausepoint.stores import LogEntry, SessionSummary, SqliteSessionStore
from pausepoint.testing import ScriptedModel, tool_call
from tests.readback import read_elsewhere, view


def nested(depth: int, leaf: Any = 1) -> Any:
    """A value ``depth`` arrays deep (``nested(1) == [1]``)."""
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def nested_objects(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"k": value}
    return value


# name -> (value, the rule it breaks under the default limits)
BAD: dict[str, tuple[Any, str]] = {
    "nested 200 deep": (nested(200), "max_depth"),
    "nested 253 deep in objects": (nested_objects(253), "max_depth"),
    "a 4,301-digit integer": (10**4300, "max_int_digits"),
    "a 641-digit negative integer": (-(10**640), "max_int_digits"),
    "NaN": (math.nan, "finite_number"),
    "Infinity": (math.inf, "finite_number"),
    "-Infinity": (-math.inf, "finite_number"),
    "a lone surrogate": ("a\ud800b", "unpaired_surrogate"),
    "a lone surrogate as a key": ({"\udc00": 1}, "unpaired_surrogate"),
}
BAD_TEXT = {"a lone surrogate": "\ud800", "a trailing lone surrogate": "ok \udfff"}


class Ask(BaseModel):
    question: str


def data_agent(store: Any, script: Any, *, ledger: list[str] | None = None, **options: Any) -> Any:
    """``ask`` (an interrupt taking any answer), ``edit`` (pauses; restartable with edited input),
    ``pay`` (records a run), and tools handing back ``BAD[kind]`` as result, pause or progress."""
    ai = Pausepoint()
    runs = ledger if ledger is not None else []
    ask = ai.define_interrupt(name="ask", description="Ask a person.", input_schema=Ask)

    @ai.tool(allow_input_edits=True)
    async def edit(value: Any, ctx: ToolRunContext) -> str:
        """Pauses until approved."""
        if not (ctx.resumed_metadata or {}).get("ok"):
            raise Interrupt({"value": value})
        runs.append(f"edit:{value!r}")
        return "edited"

    @ai.tool()
    def pay(amount: Any) -> str:
        """Pay."""
        runs.append(f"pay:{amount!r}")
        return "paid"

    @ai.tool()
    async def produce(kind: str) -> Any:
        """Returns a value a session cannot keep."""
        runs.append(f"produce:{kind}")
        return BAD[kind][0]

    @ai.tool()
    async def pause_with(kind: str) -> str:
        """Pauses with metadata a session cannot keep."""
        runs.append(f"pause_with:{kind}")
        raise Interrupt({"value": BAD[kind][0]})

    @ai.tool()
    async def report(kind: str, ctx: ToolRunContext) -> str:
        """Reports progress a session cannot keep."""
        ctx.send_progress({"value": BAD[kind][0]})
        runs.append(f"report:{kind}")
        return "reported"

    model = ScriptedModel(script) if not isinstance(script, ScriptedModel) else script
    tools = [ask, edit, pay, produce, pause_with, report]
    return ai.define_agent(name="data", model=model, tools=tools, store=store, **options), model


@pytest.fixture
async def sqlite(tmp_path: Path) -> Any:
    store = SqliteSessionStore(tmp_path / "sessions.db")
    yield store
    await store.close()


def db_of(tmp_path: Path) -> str:
    return str(tmp_path / "sessions.db")


async def fresh_view(tmp_path: Path, session_id: str) -> dict[str, Any]:
    """What a new agent on a new store object (nothing cached) reads in this process."""
    store = SqliteSessionStore(db_of(tmp_path))
    try:
        return await view(store, session_id)
    finally:
        await store.close()


def assert_names(error: Any, path: str, rule: str) -> None:
    assert error.details["rule"] == rule, error.details
    assert error.details["path"].startswith(path), error.details
    assert error.details["path"] in error.message and "limit" in error.details


# -- answers ----------------------------------------------------------------------------------------


async def test_answers_that_cannot_be_kept_are_refused_with_the_path_and_nothing_is_written(sqlite, tmp_path):
    ledger: list[str] = []
    agent, _ = data_agent(
        sqlite, [[tool_call("ask", {"question": "?"}), tool_call("edit", {"value": 1})], "done"], ledger=ledger
    )
    chat = agent.chat(principal="alice")
    res = await chat.send("go")
    ask, edit = res.interrupts
    before = await fresh_view(tmp_path, chat.session_id)
    assert "error" not in before and len(before["interrupts"]) == 2

    attempts: list[tuple[str, str, dict[str, Any]]] = []
    for value, rule in BAD.values():
        attempts += [
            ("$.respond[0].output", rule, {"respond": [ask.respond({"a": value})]}),
            ("$.respond[0].metadata", rule, {"respond": [ask.respond("yes", metadata={"m": value})]}),
            ("$.metadata", rule, {"respond": [ask.respond("yes")], "metadata": {"m": value}}),
            ("$.restart[0].resumed_metadata", rule, {"restart": [edit.restart(resumed_metadata={"ok": value})]}),
            ("$.restart[0].replace_input", rule, {"restart": [edit.restart(replace_input={"value": value})]}),
        ]
    for text in BAD_TEXT.values():
        attempts += [
            ("$.respond[0].reason", "unpaired_surrogate", {"respond": [ask.deny(text)]}),
            ("$.principal", "unpaired_surrogate", {"respond": [ask.respond("yes")], "principal": text}),
            ("$.via", "unpaired_surrogate", {"respond": [ask.respond("yes")], "via": text}),
            ("$.idempotency_key", "unpaired_surrogate", {"respond": [ask.respond("yes")], "idempotency_key": text}),
            ("$.respond[0].ref", "unpaired_surrogate", {"respond": [ToolResponse(text, "ask", "yes")]}),
        ]
    attempts.append(("$.principal", "nul_in_name", {"respond": [ask.respond("yes")], "principal": "a\x00b"}))
    attempts.append(("$.principal", "control_in_name", {"respond": [ask.respond("yes")], "principal": "a\rb"}))
    for path, rule, resume in attempts:
        with pytest.raises(InvalidAnswer) as info:
            await chat.resume(**resume)
        assert_names(info.value, path, rule)
        with pytest.raises(InvalidAnswer):  # streamed: the same refusal
            await chat.resume_stream(**resume)
    with pytest.raises(InvalidAnswer) as info:
        await chat.cancel_pending("\ud800")
    assert_names(info.value, "$.reason", "unpaired_surrogate")

    assert ledger == []
    assert await fresh_view(tmp_path, chat.session_id) == before
    assert read_elsewhere(db_of(tmp_path), [chat.session_id]) == {chat.session_id: before}
    final = await chat.resume(
        respond=[ask.respond({"fine": [1.5, "é", None]})], restart=[edit.restart(resumed_metadata={"ok": True})]
    )
    assert final.finish_reason == AgentFinishReason.STOP and ledger == ["edit:1"]


async def test_an_output_schema_cannot_make_what_cannot_be_kept(sqlite):
    """A float field reads the string "nan" as NaN: the validated answer is checked too."""

    class Score(BaseModel):
        score: float

    ai = Pausepoint()
    rate = ai.define_interrupt(name="rate", description="Rate it.", input_schema=Ask, output_schema=Score)
    agent = ai.define_agent(name="rater", model=ScriptedModel([[tool_call("rate", {"question": "?"})]]), tools=[rate],
                            store=sqlite)  # fmt: skip
    chat = agent.chat()
    pause = (await chat.send("go")).interrupts[0]
    with pytest.raises(InvalidAnswer) as info:
        await chat.resume(respond=[pause.respond({"score": "nan"})])
    assert_names(info.value, "$.score", "finite_number")
    assert [p.ref for p in await chat.interrupts()] == [pause.ref]


async def test_refs_that_are_not_strings_are_invalid_answers(sqlite):
    agent, _ = data_agent(sqlite, [[tool_call("ask", {"question": "?"})], "done"])
    chat = agent.chat()
    pause = (await chat.send("go")).interrupts[0]
    for ref in (["a"], {"ref": pause.ref}, 7, None):
        with pytest.raises(InvalidAnswer) as info:
            await chat.resume(respond=[ToolResponse(ref, "ask", "yes")])  # type: ignore[arg-type]
        assert info.value.details == {"path": "$.respond[0].ref", "rule": "json_type", "limit": None}
        with pytest.raises(InvalidAnswer):
            await chat.resume(restart=[ToolRestart(pause.ref, ref)])  # type: ignore[arg-type]
    with pytest.raises(InvalidAnswer, match="decision"):
        await chat.resume(respond=[ToolResponse(pause.ref, "ask", "yes", decision="maybe")])  # type: ignore[arg-type]
    # what a decision does not take is refused, not dropped (found by a probe: a denial's output and
    # an answer's reason vanished here and on REST's /resume, where MCP and the wire refused them)
    with pytest.raises(InvalidAnswer, match=r"\$\.respond\[0\]\.output: a denial carries no output"):
        await chat.resume(respond=[ToolResponse(pause.ref, "ask", "x", decision="deny", reason="r")])
    with pytest.raises(InvalidAnswer, match=r"\$\.respond\[0\]\.reason: an answer with an output takes no reason"):
        await chat.resume(respond=[ToolResponse(pause.ref, "ask", "yes", reason="r")])
    assert (await chat.resume(respond=[pause.respond("yes")])).text == "done"


# -- user messages ----------------------------------------------------------------------------------


async def test_user_messages_that_cannot_be_kept_are_refused_and_nothing_is_written(sqlite, tmp_path):
    agent, _ = data_agent(sqlite, ["first", "second"], json_limits=JsonLimits(max_string_bytes=1000))
    chat = agent.chat(principal="alice")
    assert (await chat.send("hello")).text == "first"
    before = await fresh_view(tmp_path, chat.session_id)
    refused: list[tuple[Any, dict[str, Any], str, str]] = [
        ("\ud800", {}, "$.parts[0].text", "unpaired_surrogate"),
        ([TextPart("fine"), TextPart("x\udfff")], {}, "$.parts[1].text", "unpaired_surrogate"),
        ([MediaPart("https://example.com/\ud800.png")], {}, "$.parts[0].url", "unpaired_surrogate"),
        ([MediaPart("https://example.com/a.png", "image/\ud800")], {}, "$.parts[0].content_type", "unpaired_surrogate"),
        ([TextPart("x", provider_metadata={"n": math.nan})], {}, "$.parts[0].provider_metadata.n", "finite_number"),
        ("é" * 501, {}, "$.parts[0].text", "max_string_bytes"),  # 1,002 bytes of UTF-8
        ("hi", {"principal": "\ud800"}, "$.principal", "unpaired_surrogate"),
        ("hi", {"principal": "bob\x00"}, "$.principal", "nul_in_name"),
        # a line break would forge an audit line (found by a probe: "alice\nApproved by: bob" was kept)
        ("hi", {"principal": "alice\nApproved by: bob"}, "$.principal", "control_in_name"),
        ("hi", {"principal": "alice\u2028bob"}, "$.principal", "control_in_name"),
        ("hi", {"via": "x\ud800"}, "$.via", "unpaired_surrogate"),
    ]
    for message, options, path, rule in refused:
        for send in (chat.send, chat.send_stream):
            with pytest.raises(InvalidMessage) as info:
                await send(message, **options)
            assert_names(info.value, path, rule)
    for message in ([tool_call("pay", {"amount": 1})], Message("model", [TextPart("hi")]), 42, [b"bytes"]):
        with pytest.raises(InvalidMessage):
            await chat.send(message)  # type: ignore[arg-type]
    assert await fresh_view(tmp_path, chat.session_id) == before
    assert read_elsewhere(db_of(tmp_path), [chat.session_id]) == {chat.session_id: before}
    assert (await chat.send("é" * 500)).text == "second"  # 1,000 bytes: at the limit

    new = agent.chat(principal="alice")
    with pytest.raises(InvalidMessage):
        await new.send("\ud800")
    assert await new.history() == []  # a new chat reads as empty: the refused message created nothing
    assert await sqlite.get_summary(new.session_id) is None


# -- model output -------------------------------------------------------------------------------------


async def test_tool_arguments_that_cannot_be_kept_reach_the_model_as_invalid_input(sqlite, tmp_path):
    ledger: list[str] = []
    sessions: dict[str, str] = {}
    for name, (value, rule) in BAD.items():
        agent, model = data_agent(sqlite, [[tool_call("pay", {"amount": value})], "I see"], ledger=ledger)
        chat = agent.chat()
        res = await chat.send("pay")
        assert (res.finish_reason, res.text) == (AgentFinishReason.STOP, "I see"), name
        [result] = model.requests[-1].messages[-1].tool_responses
        assert result.is_error and "invalid input for tool 'pay'" in result.output["error"]
        [detail] = result.output["details"]
        assert (detail["rule"], detail["path"][:8]) == (rule, "$.amount"), name
        [call] = (await chat.history())[1].tool_requests
        assert isinstance(call.input, str)  # the arguments are kept as text, like malformed ones
        sessions[chat.session_id] = name
    assert ledger == []  # no call ran
    here = {sid: await fresh_view(tmp_path, sid) for sid in sessions}
    assert all("error" not in v and v["last"]["finish_reason"] == "stop" for v in here.values()), here
    assert read_elsewhere(db_of(tmp_path), list(sessions)) == here


async def test_a_reply_that_cannot_be_kept_is_a_model_output_error_and_nothing_is_written(sqlite, tmp_path):
    replies: list[Any] = [
        "fine \ud800",
        [TextPart("x", provider_metadata={"signature": math.inf})],
        [tool_call("pay", {"amount": 1}), TextPart("\udc00")],
        ModelResponse(Message("model", [TextPart("ok")]), finish_reason="exploded"),  # type: ignore[arg-type]
        [tool_call(["not", "a", "name"], {})],  # type: ignore[arg-type]
        ["not a part"],
    ]
    ledger: list[str] = []
    agent, _ = data_agent(sqlite, ["hello", *replies, "still fine"], ledger=ledger)
    chat = agent.chat()
    await chat.send("hi")
    before = await fresh_view(tmp_path, chat.session_id)
    for _ in replies:
        with pytest.raises(ModelOutputError):
            await chat.send("again")
    assert ledger == []
    assert await fresh_view(tmp_path, chat.session_id) == before
    assert read_elsewhere(db_of(tmp_path), [chat.session_id]) == {chat.session_id: before}
    assert (await chat.send("again")).text == "still fine"


class Asked(BaseModel):
    question: str


async def test_a_reply_whose_record_would_not_fit_is_a_model_output_error_before_and_after_a_tool_ran(tmp_path):
    """Each string under the store's limit, the reply over it (two long calls, found by a probe):
    as for a string over it, a ``ModelOutputError`` with nothing written — not the store's
    ``PayloadTooLarge``, a caller's error (413) — and, once an answer was recorded, a turn that
    ends ``failed`` (it was left unended: no pause open, the last response still interrupted)."""
    (tmp_path / "small").mkdir()
    store = SqliteSessionStore(db_of(tmp_path / "small"), max_record_bytes=20_000)
    ai = Pausepoint()
    ask = ai.define_interrupt(name="ask", description="Ask a person.", input_schema=Asked)

    @ai.tool()
    def note(text: str) -> str:
        """Take a note."""
        return "noted"

    long_calls = [tool_call("note", {"text": "n" * 12_000}), tool_call("note", {"text": "m" * 12_000})]
    model = ScriptedModel(["hello", long_calls, [tool_call("ask", {"question": "go?"})], long_calls, "fine"])
    agent = ai.define_agent(name="noter", model=model, tools=[note, ask], store=store)
    chat = agent.chat()
    await chat.send("hi")
    before = await fresh_view(tmp_path / "small", chat.session_id)
    with pytest.raises(ModelOutputError) as refused:
        await chat.send("note twice")
    assert refused.value.details == {"path": "$", "rule": "max_record_bytes", "limit": 20_000}
    assert await fresh_view(tmp_path / "small", chat.session_id) == before

    [pause] = (await chat.send("ask me")).interrupts
    res = await chat.resume(respond=[pause.respond({"answer": "yes"})])
    assert res.finish_reason == AgentFinishReason.FAILED and "exceeds the store's limit" in (res.error or "")
    assert await chat.interrupts() == [] and (await chat.last_response()).finish_reason == AgentFinishReason.FAILED
    with pytest.raises(AlreadyResolved):
        await chat.resume(respond=[pause.respond({"answer": "yes"})])
    assert (await chat.send("again")).text == "fine"
    await store.close()


async def test_a_message_or_answer_whose_record_would_not_fit_is_refused_as_data_no_session_keeps(tmp_path):
    """Each string under the store's limit, the record over it (found by a probe: the store's
    ``PayloadTooLarge``, a ``StoreError`` a caller may retry, came with no path or rule — for a
    message, after the model was called): ``InvalidMessage`` / ``InvalidAnswer`` naming the
    rule and the limit (an answer its pause's ref), before anything is written or asked; the
    other answers of the resume are not taken either, and the pause stays open."""
    (tmp_path / "small").mkdir()
    store = SqliteSessionStore(db_of(tmp_path / "small"), max_record_bytes=4_096)
    ai = Pausepoint()
    ask = ai.define_interrupt(name="ask", description="Ask a person.", input_schema=Asked)
    model = ScriptedModel(["hello", [tool_call("ask", {"question": "a?"}), tool_call("ask", {"question": "b?"})], "ok"])
    agent = ai.define_agent(name="asker", model=model, tools=[ask], store=store)
    chat = agent.chat()
    await chat.send("hi")
    before, asked = await fresh_view(tmp_path / "small", chat.session_id), len(model.requests)
    with pytest.raises(InvalidMessage) as refused:
        await chat.send([TextPart("x" * 2_500), TextPart("y" * 2_500)])
    assert refused.value.details == {"path": "$", "rule": "max_record_bytes", "limit": 4_096}
    assert "exceeds the store's limit of 4096 bytes" in str(refused.value)
    assert await fresh_view(tmp_path / "small", chat.session_id) == before and len(model.requests) == asked

    first, second = (await chat.send("ask twice")).interrupts
    before = await fresh_view(tmp_path / "small", chat.session_id)
    for answers in ([first.respond({"a": "fine"}), second.respond({"a": "z" * 4_000})], [second.deny("w" * 2_100)]):
        with pytest.raises(InvalidAnswer) as refused:
            await chat.resume(respond=answers)
        assert refused.value.details == {"ref": second.ref, "path": "$", "rule": "max_record_bytes", "limit": 4_096}
        assert await fresh_view(tmp_path / "small", chat.session_id) == before
    assert [p.ref for p in await chat.interrupts()] == [first.ref, second.ref]
    done = await chat.resume(respond=[first.respond({"a": "fine"}), second.respond({"a": "short"})])
    assert done.text == "ok"
    await store.close()


async def test_a_streamed_reply_that_cannot_be_kept_never_shows_the_text_it_cannot_keep(sqlite, tmp_path):
    """Found by a probe: the stream sent "\\ud800 " (no UTF-8; strict JSON parsers refuse it)
    before the turn failed with ModelOutputError, nothing of the reply written."""
    agent, _ = data_agent(sqlite, ["hello", "fine \ud800 then \udc00 more", "still fine"], ledger=[])
    chat = agent.chat()
    await chat.send("hi")
    shown: list[str] = []
    with pytest.raises(ModelOutputError):
        async for chunk in chat.send_stream("again"):
            shown += [chunk.text] if chunk.kind == "text" else []
    assert shown and all(text.encode() for text in shown), shown  # the keepable pieces only
    assert "".join(shown).startswith("fine ")
    assert (await chat.send("again")).text == "still fine"


async def test_a_streamed_reply_that_outgrows_its_record_fails_there_not_after_streaming_all_of_it(tmp_path):
    """Each part under the store's limit, the reply over it, streamed (found by a probe: all of it
    streamed, then refused, the history keeping none of it): the call fails once what it streamed
    passes the limit — a failure mid-stream, as the README's one exception says — nothing written."""
    (tmp_path / "small").mkdir()
    store = SqliteSessionStore(db_of(tmp_path / "small"), max_record_bytes=20_000)
    ai = Pausepoint()
    parts = [TextPart(text=letter * 9_000) for letter in "abcd"]  # each part under 20 KB, the four over it
    agent = ai.define_agent(name="talker", model=ScriptedModel(["hello", parts, "still fine"]), store=store)
    chat = agent.chat()
    await chat.send("hi")
    before = await fresh_view(tmp_path / "small", chat.session_id)
    shown: list[str] = []
    with pytest.raises(ModelOutputError) as refused:
        async for chunk in chat.send_stream("talk"):
            shown += [chunk.text] if chunk.kind == "text" else []
    assert refused.value.details == {"path": "$", "rule": "max_record_bytes", "limit": 20_000}
    assert "".join(shown) == "a" * 9_000 + "b" * 9_000  # up to the limit, not the 36 KB the model had
    assert await fresh_view(tmp_path / "small", chat.session_id) == before
    assert (await chat.send("again")).text == "still fine"
    await store.close()


# -- tools --------------------------------------------------------------------------------------------


async def test_tool_results_interrupt_metadata_and_progress_that_cannot_be_kept_are_errors_the_model_sees(
    sqlite, tmp_path
):
    sessions: list[str] = []
    for name, (_, rule) in BAD.items():
        for tool, path in (("produce", "$"), ("pause_with", "$.value"), ("report", "$.value")):
            agent, model = data_agent(sqlite, [[tool_call(tool, {"kind": name})], "noted"])
            chat = agent.chat()
            res = await chat.send("go") if tool != "report" else await chat.send_stream("go")
            assert (res.finish_reason, res.text) == (AgentFinishReason.STOP, "noted"), (tool, name)
            [result] = model.requests[-1].messages[-1].tool_responses
            assert result.is_error, (tool, name)
            if tool == "report":  # send_progress raised ValueError inside the tool
                assert result.output["error"].startswith("NotJsonData: $.value"), result.output
            else:
                [detail] = result.output["details"]
                assert (detail["rule"], detail["path"][: len(path)]) == (rule, path), (tool, name, detail)
            if tool == "produce":  # the model is told the call took effect: never to run it again on this
                assert "ran (what it did took effect)" in result.output["error"], result.output
            sessions.append(chat.session_id)
    here = {sid: await fresh_view(tmp_path, sid) for sid in sessions}
    assert all("error" not in v for v in here.values())
    assert read_elsewhere(db_of(tmp_path), sessions) == here


async def test_a_tool_error_whose_message_cannot_be_kept_is_made_printable(sqlite, tmp_path):
    ai = Pausepoint()

    @ai.tool()
    async def fail(reason: str) -> str:
        """Fails."""
        raise ValueError("bad \ud800 input " + "x" * 100_000)

    model = ScriptedModel([[tool_call("fail", {"reason": "r"})], "recovered"])
    agent = ai.define_agent(name="failing", model=model, tools=[fail], store=sqlite)
    chat = agent.chat()
    assert (await chat.send("go")).text == "recovered"
    [result] = model.requests[-1].messages[-1].tool_responses
    assert (
        result.output["error"].startswith("ValueError: bad \ufffd input xxx") and len(result.output["error"]) < 20_000
    )
    failing = ai.define_agent(
        name="failing2", model=ScriptedModel([[tool_call("fail", {"reason": "r"})]]), tools=[fail], store=sqlite,
        tool_errors="fail",
    )  # fmt: skip
    ended = await failing.chat().send("go")
    assert ended.finish_reason == AgentFinishReason.FAILED and "\ufffd" in (ended.error or "")
    assert read_elsewhere(db_of(tmp_path), [chat.session_id, ended.session_id])[ended.session_id]["last"]["error"] == (
        ended.error
    )


async def test_an_expiry_policy_output_that_cannot_be_kept_still_settles_the_pause(sqlite, tmp_path):
    from datetime import UTC, datetime, timedelta

    now = [datetime(2026, 1, 1, tzinfo=UTC)]
    ai = Pausepoint(clock=lambda: now[0])
    ask = ai.define_interrupt(name="ask", description="Ask.", input_schema=Ask, ttl=60)
    model = ScriptedModel([[tool_call("ask", {"question": "?"})], "gave up"])
    agent = ai.define_agent(name="expiring", model=model, tools=[ask], store=sqlite,
                            on_expiry=lambda _: {"score": math.nan})  # fmt: skip
    chat = agent.chat()
    await chat.send("go")
    now[0] += timedelta(minutes=2)
    settled = await chat.settle_expired()
    assert settled is not None and settled.text == "gave up"
    [result] = model.requests[-1].messages[-1].tool_responses
    assert result.output["expired"] is True and "$.score: nan is not a JSON number" in result.output["error"]
    assert "error" not in read_elsewhere(db_of(tmp_path), [chat.session_id])[chat.session_id]


# -- the limits, at their boundaries ------------------------------------------------------------------


async def answer_with(store: Any, value: Any, **options: Any) -> str:
    agent, _ = data_agent(store, [[tool_call("ask", {"question": "?"})], "done"], **options)
    chat = agent.chat()
    pause = (await chat.send("go")).interrupts[0]
    await chat.resume(respond=[pause.respond(value)])
    return chat.session_id


async def test_each_limit_is_accepted_and_read_back_elsewhere_and_one_more_is_refused(sqlite, tmp_path):
    ceiling = JsonLimits(max_depth=192, max_int_digits=4300)
    accepted: dict[str, Any] = {}
    cases: list[tuple[Any, Any, dict[str, Any], str]] = [
        (nested(64), nested(65), {}, "max_depth"),
        (nested_objects(64), nested_objects(65), {}, "max_depth"),
        ({"n": 10**640 - 1, "m": -(10**640 - 1)}, {"n": 10**640}, {}, "max_int_digits"),
        ("é" * 500, "é" * 500 + "x", {"json_limits": JsonLimits(max_string_bytes=1000)}, "max_string_bytes"),
        ({"é" * 500: 1}, {"é" * 500 + "x": 1}, {"json_limits": JsonLimits(max_string_bytes=1000)}, "max_string_bytes"),
        (nested(192), nested(193), {"json_limits": ceiling}, "max_depth"),
        (10**4300 - 1, 10**4300, {"json_limits": ceiling}, "max_int_digits"),
    ]
    for good, bad, options, rule in cases:
        accepted[await answer_with(sqlite, good, **options)] = good
        with pytest.raises(InvalidAnswer) as info:
            await answer_with(sqlite, bad, **options)
        assert info.value.details["rule"] == rule
    elsewhere = read_elsewhere(db_of(tmp_path), list(accepted))
    for session_id, value in accepted.items():
        [entry] = [e for e in elsewhere[session_id]["audit"] if e["decision"] == "respond"]
        assert entry["output"] == value


async def test_a_tool_input_at_the_deepest_limit_is_read_back_elsewhere(sqlite, tmp_path):
    """A tool-call input sits deepest in its record (record, message, parts, part)."""
    ceiling = JsonLimits(max_depth=192)
    agent, _ = data_agent(sqlite, [[tool_call("pay", {"amount": nested(191)})], "ok"], json_limits=ceiling)
    chat = agent.chat()
    assert (await chat.send("go")).text == "ok"
    [call] = (await chat.history())[1].tool_requests
    assert call.input == {"amount": nested(191)}
    [read] = read_elsewhere(db_of(tmp_path), [chat.session_id]).values()
    assert read["history"][1]["parts"][0]["input"] == {"amount": nested(191)}


def test_limits_beyond_what_can_be_read_back_cannot_be_configured():
    for options in ({"max_depth": 193}, {"max_depth": 0}, {"max_int_digits": 4301}, {"max_string_bytes": 0}):
        with pytest.raises(DefinitionError):
            JsonLimits(**options)
    # nor limits no count is (found by a probe: 2.5 let 3 through, True said "more than True deep")
    for options in ({"max_depth": 2.5}, {"max_depth": True}, {"max_int_digits": 2.5}, {"max_string_bytes": 2.5}):
        with pytest.raises(DefinitionError, match="whole number"):
            JsonLimits(**options)


# -- senders ------------------------------------------------------------------------------------------


async def test_the_audit_trail_names_who_sent_each_user_message(sqlite, tmp_path):
    agent, _ = data_agent(sqlite, [[tool_call("ask", {"question": "?"})], "done", "later"])
    chat = agent.chat(principal="alice")
    pause = (await chat.send("Transfer $5 to desk.", via="console")).interrupts[0]
    await chat.resume(respond=[pause.respond("yes")], principal="desk", via="http")
    await chat.send("Thanks.", principal="alice")
    trail = await chat.audit_trail()
    assert [(e.decision, e.principal, e.via) for e in trail] == [
        ("message", "alice", "console"),
        ("respond", "desk", "http"),
        ("message", "alice", "python"),
    ]
    assert trail[0].message is not None and trail[0].message.text == "Transfer $5 to desk."
    [read] = read_elsewhere(db_of(tmp_path), [chat.session_id]).values()
    assert [(e["decision"], e["principal"]) for e in read["audit"]] == [
        ("message", "alice"),
        ("respond", "desk"),
        ("message", "alice"),
    ]


async def test_logs_written_before_senders_were_recorded_still_read(sqlite):
    """A user message record as earlier versions wrote it: no principal, no via."""
    from datetime import UTC, datetime

    now = datetime(2026, 1, 1, tzinfo=UTC)
    old = [
        b'{"agent":"data","owner":"alice","at":"2026-01-01T00:00:00Z","kind":"session_started"}',
        b'{"message":{"role":"user","parts":[{"text":"hi","provider_metadata":null,"kind":"text"}]},'
        b'"at":"2026-01-01T00:00:00Z","kind":"message"}',
        b'{"message":{"role":"model","parts":[{"text":"hello","provider_metadata":null,"kind":"text"}]},'
        b'"at":"2026-01-01T00:00:00Z","kind":"message"}',
        b'{"turn":1,"finish_reason":"stop","open_refs":[],"error":null,"idempotency_key":null,'
        b'"message_index":1,"kind":"turn_ended"}',
    ]
    kinds = ["session_started", "message", "message", "turn_ended"]
    entries = [LogEntry(i, kind, data) for i, (kind, data) in enumerate(zip(kinds, old, strict=True), 1)]
    await sqlite.append("old", 0, entries, SessionSummary("old", "data", "alice", 4, now, now, turn=1))
    agent, _ = data_agent(sqlite, ["again"])
    chat = agent.chat("old", principal="alice")
    [entry] = await chat.audit_trail()
    assert (entry.decision, entry.principal, entry.via) == ("message", None, "unknown")
    assert (await chat.send("again?")).text == "again"


# -- every accepted value reads back equal ------------------------------------------------------------

TEXT = st.text(st.characters(exclude_categories=["Cs"]))  # no lone surrogates
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**639), max_value=10**639)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=20,
)
ODD_TEXT = st.text(max_size=6) | st.sampled_from(["\ud800", "a\udfff", "\udc00\ud800"])
ANY_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=10**630, max_value=10**650)
    | st.floats()
    | ODD_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(ODD_TEXT, inner, max_size=3) | st.tuples(inner),
    max_leaves=12,
)


def test_every_json_value_respond_accepts_reads_back_equal_in_a_fresh_agent(tmp_path):
    import asyncio

    paths = iter(range(10**6))

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(value=JSON_VALUES)
    def check(value: Any) -> None:
        asyncio.run(accepted_reads_back(tmp_path / f"p{next(paths)}.db", value, must_accept=True))

    check()


def test_every_value_respond_is_given_is_refused_or_reads_back_equal(tmp_path):
    import asyncio

    paths = iter(range(10**6))

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(value=ANY_VALUES)
    def check(value: Any) -> None:
        asyncio.run(accepted_reads_back(tmp_path / f"q{next(paths)}.db", value, must_accept=False))

    check()


async def accepted_reads_back(db: Path, value: Any, *, must_accept: bool) -> None:
    store = SqliteSessionStore(db)
    try:
        agent, _ = data_agent(store, [[tool_call("ask", {"question": "?"})], "done"])
        chat = agent.chat()
        pause = (await chat.send("go")).interrupts[0]
        version = (await store.get_summary(chat.session_id)).version  # type: ignore[union-attr]
        try:
            await chat.resume(respond=[pause.respond(value)])
        except InvalidAnswer:
            assert not must_accept
            assert (await store.get_summary(chat.session_id)).version == version  # type: ignore[union-attr]
            return
    finally:
        await store.close()
    fresh = SqliteSessionStore(db)
    try:
        agent, _ = data_agent(fresh, [])
        [entry] = [e for e in await agent.chat(chat.session_id).audit_trail() if e.decision == "respond"]
        assert entry.output == json_normal_form(value)
    finally:
        await fresh.close()


def json_normal_form(value: Any) -> Any:
    """The value as JSON keeps it: tuples are arrays (what an accepted value must read back as)."""
    if isinstance(value, list | tuple):
        return [json_normal_form(v) for v in value]
    if isinstance(value, dict):
        return {k: json_normal_form(v) for k, v in value.items()}
    return value


async def test_a_tool_result_too_large_for_a_record_reaches_the_model_as_an_error_and_the_session_goes_on(sqlite):
    """Each string under the store's limit, the record over it (found by a probe: the tool ran,
    nothing of its batch could be written, and the call was presumed lost 15 minutes later)."""
    from pausepoint import Pausepoint
    from pausepoint.testing import ScriptedModel

    ai = Pausepoint()
    ran: list[int] = []

    @ai.tool(requires_approval=True)
    def export(size: int, parts: int = 1) -> Any:
        """Export a report."""
        ran.append(size)
        return "x" * size if parts == 1 else ["y" * size for _ in range(parts)]

    limit = sqlite.max_record_bytes
    halves = {"size": limit // 2, "parts": 2}
    model = ScriptedModel(
        [[tool_call("export", {"size": limit - 10})], "too big", [tool_call("export", halves)], "still too big",
         [tool_call("export", {"size": 100})], "fine", "hello"]
    )  # fmt: skip
    agent = ai.define_agent(name="exporter", model=model, tools=[export], store=sqlite)
    chat = agent.chat()
    for expected in ("too big", "still too big", "fine"):
        [pause] = (await chat.send("export")).interrupts
        res = await chat.approve(pause.ref)
        assert (res.finish_reason, res.text) == (AgentFinishReason.STOP, expected)
        [result] = model.requests[-1].messages[-1].tool_responses
        if expected == "fine":
            assert not result.is_error and result.output == "x" * 100
        else:
            assert result.is_error and "more than a record of this store holds" in result.output["error"]
            assert "(the tool ran: what it did took effect)" in result.output["error"]
    assert ran == [limit - 10, limit // 2, 100]  # each ran once
    assert (await chat.send("hi")).text == "hello"
