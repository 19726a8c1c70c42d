"""Only a live pause (this session, named by its ref and tool, paused now) can be answered, and
only with a valid answer (the output schema; input edits only where the tool opts in).

Every refusal must execute nothing, record nothing, and leave the session usable: after each
one, the store's version is unchanged and the next valid resume works.
"""

import pytest

from pausepoint import AgentFinishReason, ToolResponse, ToolRestart
from pausepoint.errors import (
    AlreadyResolved,
    DuplicateAnswer,
    InputEditNotAllowed,
    InterruptNameMismatch,
    InvalidAnswer,
    NothingToResume,
    NotPaused,
    ResumeRefused,
    StaleInterrupt,
    UnknownInterrupt,
)
from pausepoint.testing import tool_call

from .helpers import approvals_agent, version

PAUSE_TWICE = [
    [tool_call("lookup", {"key": "a"}), tool_call("ask", {"question": "pay 5?"})],
    [tool_call("pay", {"amount": 5})],
    "paid",
    [tool_call("ask", {"question": "again?"})],
    "done",
]


async def paused_chat(store, ledger=None):
    agent, _ = approvals_agent(store, PAUSE_TWICE, ledger=ledger)
    chat = agent.chat()
    res = await chat.send("go")
    assert res.finish_reason == AgentFinishReason.INTERRUPTED
    return agent, chat, res


async def assert_refused(store, chat, error_type, ledger, **resume):
    before = await version(store, chat.session_id)
    runs_before = list(ledger)
    audit_before = await chat.audit_trail()
    with pytest.raises(error_type) as info:
        await chat.resume(**resume)
    assert isinstance(info.value, ResumeRefused)
    assert info.value.code == error_type.code
    assert await version(store, chat.session_id) == before
    assert ledger == runs_before
    assert await chat.audit_trail() == audit_before
    return info.value


async def then_valid_resume_works(chat, res, ledger):
    final = await chat.resume(respond=[res.interrupts[0].respond({"approved": True})])
    assert final.finish_reason == AgentFinishReason.STOP
    assert final.text == "paid"
    assert ledger.count("pay:5") == 1


async def test_unknown_ref(store):
    ledger: list[str] = []
    _, chat, res = await paused_chat(store, ledger)
    error = await assert_refused(
        store, chat, UnknownInterrupt, ledger, respond=[ToolResponse("nope", "ask", {"approved": True})]
    )
    assert "nope" in str(error)
    await then_valid_resume_works(chat, res, ledger)


async def test_ref_from_another_session(store):
    ledger: list[str] = []
    _, chat, res = await paused_chat(store, ledger)
    other_agent, _ = approvals_agent(store, PAUSE_TWICE)
    other = other_agent.chat()
    other_res = await other.send("go")
    await assert_refused(
        store, chat, UnknownInterrupt, ledger, respond=[other_res.interrupts[0].respond({"approved": True})]
    )
    await then_valid_resume_works(chat, res, ledger)
    assert (await other.interrupts())[0].ref == other_res.interrupts[0].ref  # the other session is untouched


async def test_right_ref_wrong_name(store):
    ledger: list[str] = []
    _, chat, res = await paused_chat(store, ledger)
    ref = res.interrupts[0].ref
    error = await assert_refused(store, chat, InterruptNameMismatch, ledger, respond=[ToolResponse(ref, "pay", "x")])
    assert error.details["actual"] == "ask"
    await then_valid_resume_works(chat, res, ledger)


async def test_answer_to_a_call_already_answered(store):
    ledger: list[str] = []
    _, chat, res = await paused_chat(store, ledger)
    await then_valid_resume_works(chat, res, ledger)
    again = await chat.send("more")  # pauses on a new ask
    with pytest.raises(AlreadyResolved):
        await chat.resume(respond=[res.interrupts[0].respond({"approved": True})])
    final = await chat.resume(respond=[again.interrupts[0].respond({"approved": True})])
    assert final.text == "done"
    assert ledger.count("pay:5") == 1


async def test_ref_of_a_completed_call_from_an_older_turn(store):
    ledger: list[str] = []
    _, chat, res = await paused_chat(store, ledger)
    await then_valid_resume_works(chat, res, ledger)
    history = await chat.history()
    lookup_ref = history[1].tool_requests[0].ref  # the lookup call of turn 1, which never paused
    new = await chat.send("more")
    await assert_refused(store, chat, StaleInterrupt, ledger, respond=[ToolResponse(lookup_ref, "lookup", "x")])
    assert (await chat.resume(respond=[new.interrupts[0].respond({"approved": True})])).text == "done"


async def test_ref_of_a_completed_sibling_in_this_turn(store):
    ledger: list[str] = []
    _, chat, res = await paused_chat(store, ledger)
    lookup_ref = (await chat.history())[1].tool_requests[0].ref
    await assert_refused(store, chat, NotPaused, ledger, respond=[ToolResponse(lookup_ref, "lookup", "x")])
    await then_valid_resume_works(chat, res, ledger)


async def test_empty_resume_while_paused(store):
    ledger: list[str] = []
    _, chat, res = await paused_chat(store, ledger)
    await assert_refused(store, chat, NothingToResume, ledger)
    await then_valid_resume_works(chat, res, ledger)


async def test_output_failing_the_output_schema(store):
    ledger: list[str] = []
    _, chat, res = await paused_chat(store, ledger)
    refused = await assert_refused(
        store, chat, InvalidAnswer, ledger, respond=[res.interrupts[0].respond({"approved": "maybe"})]
    )
    # What is wrong, in a person's words: the field and its problem, not pydantic's report of it
    assert refused.message.endswith("schema: approved: Input should be a valid boolean, unable to interpret input")
    await assert_refused(store, chat, InvalidAnswer, ledger, respond=[res.interrupts[0].respond("yes")])
    missing = await assert_refused(store, chat, InvalidAnswer, ledger, respond=[res.interrupts[0].respond(None)])
    assert "(no output was given)" in missing.message and "pydantic" not in missing.message
    await then_valid_resume_works(chat, res, ledger)


async def test_replace_input_on_a_tool_that_did_not_opt_in(store):
    ledger: list[str] = []
    _, chat, res = await paused_chat(store, ledger)
    await assert_refused(
        store, chat, InputEditNotAllowed, ledger, restart=[res.interrupts[0].restart(replace_input={"question": "x"})]
    )
    await then_valid_resume_works(chat, res, ledger)


async def test_the_same_input_again_is_no_edit_so_any_tool_takes_it(store):
    ledger: list[str] = []
    agent, _ = approvals_agent(store, [[tool_call("guarded", {"action": "x"})], "done"], ledger=ledger)
    chat = agent.chat()
    pause = (await chat.send("go")).interrupts[0]
    # what Genkit's client sends for restart(replace_input=<the same input>) on a tool without edits
    res = await chat.resume(restart=[pause.restart(replace_input={"action": "x"}, resumed_metadata={"ok": True})])
    assert res.text == "done" and ledger == ["guarded:x"]
    _, entry = await chat.audit_trail()  # the message sent, then the answer
    assert entry.replace_input is None  # recorded as what it is: a restart, not an edit


async def test_invalid_replacement_on_a_tool_that_opted_in(store):
    from examples import shell

    executed: list[dict] = []
    _, agent = shell.build(store, executed)
    chat = agent.chat()
    res = await chat.send("Run: rm x")
    before = await version(store, chat.session_id)
    with pytest.raises(InvalidAnswer):
        await chat.resume(restart=[res.interrupts[0].restart(replace_input={"cmd": 3})])
    assert await version(store, chat.session_id) == before
    final = await chat.resume(restart=[res.interrupts[0].restart(resumed_metadata={"tool_approved": True})])
    assert final.finish_reason == AgentFinishReason.STOP
    assert len(executed) == 1


async def test_one_bad_answer_refuses_the_whole_resume(store):
    agent, _ = approvals_agent(
        store, [[tool_call("ask", {"question": "a"}), tool_call("ask", {"question": "b"})], "both"]
    )
    chat = agent.chat()
    res = await chat.send("go")
    first, second = res.interrupts
    before = await version(store, chat.session_id)
    with pytest.raises(InvalidAnswer):
        await chat.resume(respond=[first.respond({"approved": True}), second.respond({"approved": 3})])
    with pytest.raises(DuplicateAnswer):
        await chat.resume(respond=[first.respond({"approved": True}), first.respond({"approved": False})])
    assert await version(store, chat.session_id) == before
    assert [i.ref for i in await chat.interrupts()] == [first.ref, second.ref]
    final = await chat.resume(respond=[first.respond({"approved": True}), second.respond({"approved": True})])
    assert final.text == "both"


async def test_wrong_answer_types_are_rejected(store):
    ledger: list[str] = []
    _, chat, res = await paused_chat(store, ledger)
    before = await version(store, chat.session_id)
    pause = res.interrupts[0]
    for respond, said in (
        ([{"ref": pause.ref}], "respond= takes ToolResponse answers"),
        (pause.respond({"approved": True}), r"respond= takes a list of ToolResponse answers: \[interrupt.respond"),
        ("approve", "respond= takes a list of ToolResponse answers"),
    ):
        with pytest.raises(TypeError, match=said):
            await chat.resume(respond=respond)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"restart= takes a list of ToolRestart answers: \[interrupt.restart"):
        await chat.resume(restart=pause.restart())  # type: ignore[arg-type]
    assert await version(store, chat.session_id) == before and ledger == ["lookup:a"]  # nothing more ran
    # None is no answers, as Genkit's resume(respond=None, restart=[...]) says (found by a probe)
    with pytest.raises(NothingToResume):
        await chat.resume(respond=None, restart=None)
    done = await chat.resume(respond=[pause.respond({"approved": True})], restart=None)
    assert done.text == "paid" and ledger == ["lookup:a", "pay:5"]
    assert isinstance(pause.restart(), ToolRestart)


async def test_answers_and_metadata_that_are_not_json_are_refused(store):
    ledger: list[str] = []
    _, chat, res = await paused_chat(store, ledger)
    await assert_refused(
        store,
        chat,
        InvalidAnswer,
        ledger,
        respond=[res.interrupts[0].respond({"approved": True})],
        metadata={"when": object()},
    )
    await then_valid_resume_works(chat, res, ledger)


async def test_an_interrupt_whose_metadata_is_not_json_is_reported_to_the_model(store):
    from pausepoint import Interrupt, Pausepoint
    from pausepoint.testing import ScriptedModel

    ai = Pausepoint()

    @ai.tool()
    async def odd() -> str:
        """Pauses with metadata that cannot be stored."""
        raise Interrupt({"handle": object()})

    model = ScriptedModel([[tool_call("odd")], "noted"])
    agent = ai.define_agent(name="odd", model=model, tools=[odd], store=store)
    res = await agent.chat().send("go")
    assert res.text == "noted"
    [result] = model.requests[-1].messages[-1].tool_responses
    assert result.is_error and "not JSON data" in result.output["error"]
    with pytest.raises(TypeError):
        Interrupt("not a dict")  # type: ignore[arg-type]
