"""What every cloud provider adapter must do, written once and run on each provider's wire.

Each test runs the provider's real SDK over real HTTP against a loopback server speaking that
provider's wire format (``providers.py`` knows each format). What only one API has (its exact
request body, history mapping, config keys, quirks) is tested in ``test_<provider>.py``.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import socket
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest

from examples import banking
from pausepoint import (
    AgentFinishReason,
    InterruptChunk,
    Message,
    ModelRequest,
    Pausepoint,
    TextChunk,
    TextPart,
    ToolCallDelta,
    ToolCallDeltaChunk,
    ToolDefinition,
    ToolRequestPart,
    ToolResponsePart,
    TurnEndChunk,
)
from pausepoint.errors import (
    DefinitionError,
    ModelAuthError,
    ModelBadRequest,
    ModelError,
    ModelOutputError,
    ModelRateLimited,
    ModelTimeout,
    ModelUnavailable,
)
from pausepoint.models import RetryPolicy
from pausepoint.models.openai import OpenAI

from .providers import ALL, FAST, Call, Deltas, Provider, Result
from .wire_server import Hang, Raw, Reply, WireRequest, scripted

USER = [Message("user", [TextPart("Hello")])]
WEATHER = ToolDefinition("get_weather", "The weather in a city.", {"type": "object", "properties": {}})


async def generate(model: Any, request: ModelRequest, *, stream: bool) -> tuple[Any, Deltas]:
    deltas = Deltas()
    response = await model.generate(request, deltas if stream else None)
    return response, deltas


# -- names, extras, credentials ----------------------------------------------------------------


def test_a_plugin_resolves_its_own_names_only(provider: Provider) -> None:
    plugin = provider.plugin("http://127.0.0.1:9")
    model = plugin.resolve_model(f"{provider.name}/some-model-1.5")
    assert model is not None
    assert (model.name, model.model_id, model.plugin) == (f"{provider.name}/some-model-1.5", "some-model-1.5", plugin)
    assert plugin.resolve_model("other/some-model") is None
    assert plugin.resolve_model(f"{provider.name}/") is None
    assert plugin.resolve_model("some-model") is None
    assert Pausepoint(plugins=[plugin]).resolve_model(f"{provider.name}/m").name == f"{provider.name}/m"


def test_two_plugins_of_one_prefix_are_refused(provider: Provider) -> None:
    """The first would serve every name of the second — another server, another key — without a
    word (found by a probe); a compatible server under a prefix of its own stands beside it."""
    first, second = provider.plugin("http://127.0.0.1:9"), provider.plugin("http://127.0.0.1:10")
    with pytest.raises(DefinitionError, match=rf"two plugins serve the prefix '{provider.name}'"):
        Pausepoint(plugins=[first, second])
    beside = OpenAI.compatible("mine", "http://127.0.0.1:11")
    assert Pausepoint(plugins=[first, beside]).resolve_model("mine/m").name == "mine/m"


def test_a_missing_sdk_names_the_extra(provider: Provider, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, provider.sdk, None)
    monkeypatch.delitem(sys.modules, f"pausepoint.models.{provider.module}")
    with pytest.raises(ImportError, match=rf"pip install 'pausepoint\[{provider.extra}\]'"):
        importlib.import_module(f"pausepoint.models.{provider.module}")


async def test_the_key_comes_from_the_environment(provider: Provider, monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in provider.key_variables:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv(provider.key_variables[-1], "key-from-env")
    with provider.serve(scripted([provider.reply("ok", stream=False)])) as server:
        model = provider.keyless_plugin(server).resolve_model(provider.model_name)
        await model.generate(ModelRequest(USER))
    assert provider.key_sent(server.requests[0]) == "key-from-env"


async def test_no_key_is_an_auth_error_without_a_request(
    provider: Provider, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    provider.clear_credentials(monkeypatch, tmp_path)
    with provider.serve(scripted([provider.reply("ok", stream=False)])) as server:
        model = provider.keyless_plugin(server).resolve_model(provider.model_name)
        with pytest.raises(ModelAuthError, match=provider.key_variables[0]):
            model.prepare()  # what ``pausepoint chat`` checks before its first prompt
        with pytest.raises(ModelAuthError, match=provider.key_variables[0]):
            await model.generate(ModelRequest(USER))
        provider.model(server).prepare()  # with a key: nothing to say, and nothing sent
    assert server.requests == []


# -- replies -----------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_a_text_reply_with_its_usage(provider: Provider, stream: bool) -> None:
    reply = provider.reply("The quick brown fox", stream=stream, input_tokens=21, output_tokens=4)
    with provider.serve(scripted([reply])) as server:
        response, deltas = await generate(provider.model(server), ModelRequest(USER), stream=stream)
    assert response.message == Message("model", [TextPart("The quick brown fox")])
    assert response.finish_reason == "stop"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (21, 4)
    assert deltas.texts == (["The ", "quick ", "brown ", "fox"] if stream else [])
    [sent] = server.requests
    assert provider.is_stream(sent) is stream
    assert provider.texts(sent) == ["Hello"]


@pytest.mark.parametrize("stream", [False, True])
async def test_parallel_tool_calls_keep_their_ids_and_order(provider: Provider, stream: bool) -> None:
    calls = [
        Call("call_a", "get_weather", {"city": "Paris", "unit": "celsius", "days": [1, 2, 3]}),
        Call("call_b", "get_time", {"timezone": "Europe/Paris"}),
    ]
    with provider.serve(scripted([provider.reply("Checking.", calls, stream=stream)])) as server:
        response, deltas = await generate(provider.model(server), ModelRequest(USER, tools=[WEATHER]), stream=stream)
    assert response.message.parts == [
        TextPart("Checking."),
        *(ToolRequestPart(c.name, c.args, call_id=c.call_id) for c in calls),
    ]
    assert response.finish_reason == "stop"
    if not stream:
        return
    tool_deltas = [d for d in deltas if isinstance(d, ToolCallDelta)]
    for index, call in enumerate(calls):
        mine = [d for d in tool_deltas if d.index == index]
        assert (mine[0].name, mine[0].call_id) == (call.name, call.call_id)
        assert json.loads("".join(d.arguments_delta for d in mine)) == call.args
        if provider.arguments_in_pieces:
            assert len(mine) > 3  # the arguments came in many small pieces
            assert all(d.name is None and d.call_id is None for d in mine[1:])
        else:
            assert len(mine) == 1  # each call comes whole


@pytest.mark.parametrize(
    ("name", "wire", "expected"),
    [(p.name, wire, expected) for p in ALL.values() for wire, expected in p.finish_reasons],
    ids=lambda v: str(v),
)
@pytest.mark.parametrize("stream", [False, True])
async def test_finish_reasons(name: str, wire: str, expected: str, stream: bool) -> None:
    provider = ALL[name]
    reply = provider.reply("Partial", stream=stream, finish=wire, input_tokens=5, output_tokens=2)
    with provider.serve(scripted([reply])) as server:
        response, _ = await generate(provider.model(server), ModelRequest(USER), stream=stream)
    assert response.finish_reason == expected
    assert response.message.text == "Partial"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (5, 2)


# -- errors and retries ------------------------------------------------------------------------


async def test_a_rate_limit_is_retried_after_its_retry_after(provider: Provider) -> None:
    replies = [provider.error(429, "slow down", retry_after="0"), provider.reply("Finally.", stream=False)]
    with provider.serve(scripted(replies)) as server:
        response = await provider.model(server).generate(ModelRequest(USER))
    assert response.message.text == "Finally."
    assert len(server.requests) == 2
    # each attempt is the policy's: the SDK's own retries are off
    assert {provider.sdk_attempt(r) for r in server.requests} <= {"0", None}


async def test_a_rate_limit_that_lasts_is_rate_limited_with_its_retry_after(provider: Provider) -> None:
    limited = provider.error(429, "slow down", retry_after_ms="10")
    with provider.serve(scripted([limited])) as server, pytest.raises(ModelRateLimited, match="slow down") as caught:
        await provider.model(server).generate(ModelRequest(USER))
    assert caught.value.retry_after == pytest.approx(0.01)
    assert isinstance(caught.value.__cause__, provider.rate_limit_cause)
    assert caught.value.details["status"] == 429 and caught.value.details["provider"] == provider.name
    assert len(server.requests) == FAST.attempts  # the policy's attempts; the SDK's own retries are off


@pytest.mark.parametrize(
    ("header", "value", "seconds"),
    [
        ("retry_after", "7", 7.0),
        ("retry_after_ms", "2500", 2.5),
        ("retry_after", "120", 120.0),
        ("retry_after", "Wed, 21 Oct 2015 07:28:00 GMT", 0.0),  # a date already past
    ],
)
async def test_retry_after_is_read_and_one_beyond_the_policy_is_not_waited_for(
    provider: Provider, header: str, value: str, seconds: float
) -> None:
    patient = RetryPolicy(attempts=3, base_delay=0.01, max_retry_after=1.0)
    replies: list[Reply] = [provider.error(429, "later", **{header: value})]
    if seconds <= patient.max_retry_after:
        replies.append(provider.error(429, "later", retry_after="5"))  # the second answer is beyond the policy
    with provider.serve(scripted(replies)) as server, pytest.raises(ModelRateLimited) as caught:
        await provider.model(server, retry=patient).generate(ModelRequest(USER))
    if seconds <= patient.max_retry_after:
        assert len(server.requests) == 2 and caught.value.retry_after == 5.0
    else:
        assert len(server.requests) == 1 and caught.value.retry_after == seconds


@pytest.mark.parametrize("value", ["1e999", "Infinity", "-inf", "nan"])
async def test_a_retry_after_that_is_no_finite_number_is_not_one(provider: Provider, value: str) -> None:
    """Not a wait at all (found by a probe: ``inf`` became the error's ``retry_after``, and a
    server answering it said 500, failing to write the header)."""
    limited = provider.error(429, "slow down", retry_after=value)
    with provider.serve(scripted([limited])) as server, pytest.raises(ModelRateLimited) as caught:
        await provider.model(server).generate(ModelRequest(USER))
    assert caught.value.retry_after is None and "retry_after" not in caught.value.details
    assert len(server.requests) == FAST.attempts  # retried with the policy's backoff


async def test_an_unavailable_server_is_retried_after_its_retry_after(provider: Provider) -> None:
    """A 503's Retry-After is honoured as a rate limit's (it was retried at once, in backoff)."""
    patient = RetryPolicy(attempts=2, base_delay=0, max_delay=0, max_retry_after=1.0)
    busy = provider.error(503, "busy", retry_after="2")
    with provider.serve(scripted([busy])) as server, pytest.raises(ModelUnavailable) as caught:
        await provider.model(server, retry=patient).generate(ModelRequest(USER))
    assert caught.value.retry_after == 2.0 and len(server.requests) == 1  # beyond the policy: not waited for
    loop = asyncio.get_running_loop()
    replies = [provider.error(503, "busy", retry_after="0.3"), provider.reply("Back.", stream=False)]
    with provider.serve(scripted(replies)) as server:
        began = loop.time()
        response = await provider.model(server, retry=patient).generate(ModelRequest(USER))
        waited = loop.time() - began
    assert response.message.text == "Back." and len(server.requests) == 2
    assert waited >= 0.3  # what the server asked for (the policy alone waits 0)


@pytest.mark.parametrize("stream", [False, True])
async def test_a_server_error_is_retried_then_succeeds(provider: Provider, stream: bool) -> None:
    with provider.serve(scripted([provider.error(500, "boom"), provider.reply("Recovered.", stream=stream)])) as server:
        response, _ = await generate(provider.model(server), ModelRequest(USER), stream=stream)
    assert response.message.text == "Recovered."
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("status", "raised", "retried"),
    [
        (400, ModelBadRequest, False),
        (401, ModelAuthError, False),
        (403, ModelAuthError, False),
        (404, ModelBadRequest, False),
        (408, ModelTimeout, True),
        (409, ModelUnavailable, True),
        (500, ModelUnavailable, True),
        (503, ModelUnavailable, True),
        (504, ModelTimeout, True),
        (529, ModelUnavailable, True),
    ],
)
async def test_each_error_status_means_the_same_on_every_provider(
    provider: Provider, status: int, raised: type[ModelError], retried: bool
) -> None:
    with (
        provider.serve(scripted([provider.error(status, "The provider says no.")])) as server,
        pytest.raises(raised) as caught,
    ):
        await provider.model(server).generate(ModelRequest(USER))
    assert type(caught.value) is raised
    if raised is not ModelAuthError:  # an auth error's text is logged only (see the next test)
        assert "The provider says no" in caught.value.message
    assert (caught.value.details["provider"], caught.value.details["status"]) == (provider.name, status)
    assert caught.value.__cause__ is not None  # chained to the SDK's error
    assert len(server.requests) == (FAST.attempts if retried else 1)


@pytest.mark.parametrize("status", [401, 403])
async def test_a_refused_key_is_named_without_the_providers_text_which_goes_to_the_log(
    provider: Provider, status: int, caplog: pytest.LogCaptureFixture
) -> None:
    """The provider's text about a refused key may quote it (OpenAI's real 401 shows a masked
    fragment of the server's own key): clients get a message of pausepoint's own, the log the text."""
    said = "Incorrect API key provided: sk-abc***wxyz."
    with (
        provider.serve(scripted([provider.error(status, said)])) as server,
        pytest.raises(ModelAuthError) as caught,
        caplog.at_level("WARNING", logger="pausepoint"),
    ):
        await provider.model(server).generate(ModelRequest(USER))
    expected = f"{provider.name}: the provider refused the server's credentials (HTTP {status})"
    assert caught.value.message == expected
    assert "sk-abc" not in json.dumps(caught.value.details)
    assert any(said in record.getMessage() for record in caplog.records)
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    "body",
    [
        Raw(b"<html><body>Please sign in to the proxy</body></html>", "text/html"),
        Raw(b"{not json", "application/json"),
        Raw(b"", "application/json"),
    ],
    ids=["html", "broken-json", "empty"],
)
async def test_a_200_whose_body_is_no_reply_is_an_output_error_not_retried(provider: Provider, body: Raw) -> None:
    """A proxy's login page, a body cut short: a failure of the provider, typed and named, the
    same on every provider — never an internal error of the adapter (found by a probe:
    AttributeError, JSONDecodeError), and not sent again (Gemini's was retried as unavailable)."""
    with provider.serve(scripted([body])) as server, pytest.raises(ModelError) as caught:
        await provider.model(server).generate(ModelRequest(USER))
    assert type(caught.value) is ModelOutputError, repr(caught.value)
    assert caught.value.details["provider"] == provider.name
    assert len(server.requests) == 1


async def test_a_timeout_is_retried_then_raised(provider: Provider) -> None:
    with provider.serve(scripted([Hang(3)])) as server, pytest.raises(ModelTimeout) as caught:
        model = provider.model(server, timeout=0.2, retry=RetryPolicy(attempts=2, base_delay=0.01))
        await model.generate(ModelRequest(USER))
    assert isinstance(caught.value.__cause__, provider.timeout_cause)
    assert len(server.requests) == 2


async def test_a_server_that_is_down_is_unavailable(provider: Provider) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    model = provider.model(url, retry=RetryPolicy(attempts=2, base_delay=0.01))
    with pytest.raises(ModelUnavailable, match=provider.name) as caught:
        await model.generate(ModelRequest(USER))
    assert caught.value.__cause__ is not None


async def test_a_stream_that_fails_before_any_output_is_retried(provider: Provider) -> None:
    with provider.serve(scripted([provider.failing_stream(), provider.reply("Second try.", stream=True)])) as server:
        response, deltas = await generate(provider.model(server), ModelRequest(USER), stream=True)
    assert response.message.text == "Second try."
    assert "".join(deltas.texts) == "Second try."
    assert len(server.requests) == 2


async def test_a_stream_that_fails_after_output_is_not_retried(provider: Provider) -> None:
    replies = [provider.failing_stream("Half an answer"), provider.reply("never", stream=True)]
    with provider.serve(scripted(replies)) as server:
        deltas = Deltas()
        with pytest.raises(ModelUnavailable, match=r"(?i)overloaded") as caught:
            await provider.model(server).generate(ModelRequest(USER), deltas)
    assert "".join(deltas.texts) == "Half an answer"
    assert caught.value.__cause__ is not None
    assert len(server.requests) == 1  # the caller already saw part of the answer


async def test_a_stream_that_stalls_after_output_is_not_retried(provider: Provider) -> None:
    with provider.serve(scripted([provider.slow_stream("Hello there friend", delay=3.0)])) as server:
        deltas = Deltas()
        with pytest.raises(ModelTimeout):
            await provider.model(server, timeout=0.5).generate(ModelRequest(USER), deltas)
    assert deltas.texts == ["Hello "]
    assert len(server.requests) == 1


async def test_a_cut_stream_is_unavailable(provider: Provider) -> None:
    with (
        provider.serve(scripted([provider.cut_stream("Half an ans")])) as server,
        pytest.raises(ModelUnavailable, match="ended before"),
    ):
        await provider.model(server).generate(ModelRequest(USER), Deltas())
    assert len(server.requests) == 1  # a delta was reported: not retried


# -- clients -----------------------------------------------------------------------------------


async def test_a_given_client_is_used_without_its_own_retries_and_left_open(provider: Provider) -> None:
    with provider.serve(scripted([provider.error(500, "boom")])) as server:
        plugin = type(provider.plugin(server))(client=provider.given_client(server), retry=FAST)
        with pytest.raises(ModelUnavailable):
            await plugin.resolve_model(provider.model_name).generate(ModelRequest(USER))
        await plugin.aclose()
        assert not provider.is_closed(plugin.client())  # the caller's to close
    assert len(server.requests) == FAST.attempts
    assert provider.key_sent(server.requests[0]) in ("sk-given", "given-key")


def test_each_event_loop_gets_a_client_and_aclose_closes_them(provider: Provider) -> None:
    with provider.serve(scripted([provider.reply("ok", stream=False)])) as server:
        plugin = provider.plugin(server)
        model = plugin.resolve_model(provider.model_name)
        for _ in range(2):  # a loop per asyncio.run: each gets a client of its own
            assert asyncio.run(model.generate(ModelRequest(USER))).message.text == "ok"

        # a loop running in another thread (as a sync wrapper's would be) and the caller's loop
        other = asyncio.new_event_loop()
        thread = threading.Thread(target=other.run_forever, daemon=True)
        thread.start()
        try:

            async def client_of_this_loop() -> Any:
                await model.generate(ModelRequest(USER))
                return plugin.client()

            theirs = asyncio.run_coroutine_threadsafe(client_of_this_loop(), other).result(10)

            async def here() -> None:
                mine = await client_of_this_loop()
                assert mine is not theirs and plugin.client() is mine
                await plugin.aclose()
                assert provider.is_closed(mine) and provider.is_closed(theirs)
                assert plugin.client() is not mine  # made again when used again
                await plugin.aclose()

            asyncio.run(here())
        finally:
            other.call_soon_threadsafe(other.stop)
            thread.join(5)
            other.close()
    assert len(server.requests) == 4


# -- through an agent --------------------------------------------------------------------------


def pay_agent(plugin: Any, ledger: list[int], name: str) -> Any:
    ai = Pausepoint(plugins=[plugin])

    @ai.tool()
    def pay(amount: int) -> str:
        """Pay an amount."""
        ledger.append(amount)
        return f"paid {amount}"

    return ai.define_agent(name="payer", model=name, tools=[pay])


@pytest.mark.parametrize("stream", [False, True])
async def test_arguments_the_tool_cannot_take_are_reported_to_the_model_as_invalid_input(
    provider: Provider, stream: bool
) -> None:
    def handler(request: WireRequest) -> Reply:
        if not provider.results(request):
            return provider.reply(None, [Call("call_bad", "pay", provider.bad_arguments)], stream=stream)
        return provider.reply("Sorry, I could not pay.", stream=stream)

    ledger: list[int] = []
    with provider.serve(handler) as server:
        chat = pay_agent(provider.plugin(server), ledger, provider.model_name).chat()
        res = await (chat.send_stream("Pay 5.") if stream else chat.send("Pay 5."))
    assert (res.finish_reason, res.text) == (AgentFinishReason.STOP, "Sorry, I could not pay.")
    assert ledger == []
    second = server.requests[1]
    assert provider.calls(second) == [Call("call_bad", "pay", provider.sent_arguments(provider.bad_arguments))]
    [result] = provider.results(second)
    assert result.call_id == "call_bad" and result.is_error
    assert "invalid input for tool 'pay'" in json.dumps(result.output)
    if isinstance(provider.bad_arguments, str):  # arguments that are no JSON: the model is told so
        assert "the arguments must be a JSON object" in json.dumps(result.output)
    assert len(server.requests) == 2


async def test_a_failed_model_call_leaves_the_session_as_it_was(provider: Provider) -> None:
    failing = {"now": False}

    def handler(request: WireRequest) -> Reply:
        if failing["now"]:
            return provider.error(529, "Overloaded")
        return provider.reply(f"Reply to {provider.last_user_text(request)}", stream=False)

    with provider.serve(handler) as server:
        chat = pay_agent(provider.plugin(server), [], provider.model_name).chat()
        assert (await chat.send("First.")).text == "Reply to First."
        before = await chat.history()
        failing["now"] = True
        with pytest.raises(ModelUnavailable):
            await chat.send("Second.")
        assert await chat.history() == before
        failing["now"] = False
        res = await chat.send("Third.")
    assert res.finish_reason == AgentFinishReason.STOP and res.text == "Reply to Third."
    assert provider.texts(server.requests[-1]) == ["First.", "Reply to First.", "Third."]


@pytest.mark.parametrize("expected", ["length", "blocked"])
async def test_the_agent_finishes_as_the_model_did(provider: Provider, expected: str) -> None:
    wire = next(w for w, e in provider.finish_reasons if e == expected)
    with provider.serve(scripted([provider.reply("Cut", stream=False, finish=wire)])) as server:
        res = await pay_agent(provider.plugin(server), [], provider.model_name).chat().send("Tell me everything.")
    assert res.finish_reason == AgentFinishReason(expected)


@pytest.mark.parametrize("stream", [False, True])
async def test_a_reply_cut_off_inside_a_call_ends_the_turn_as_length(provider: Provider, stream: bool) -> None:
    """The model ran out of tokens inside a call's arguments: the call gets its invalid-input
    result (the history stays whole) and the turn ends ``length`` — the model is not asked
    again, as if nothing were cut (found by a probe: it ended ``stop``)."""
    if not isinstance(provider.bad_arguments, str):
        pytest.skip(f"{provider.name} sends a call's arguments whole: none is cut off inside")
    wire = next(w for w, e in provider.finish_reasons if e == "length")
    cut = provider.reply(None, [Call("call_cut", "pay", provider.bad_arguments)], stream=stream, finish=wire)
    ledger: list[int] = []
    with provider.serve(scripted([cut, provider.reply("never", stream=stream)])) as server:
        chat = pay_agent(provider.plugin(server), ledger, provider.model_name).chat()
        res = await (chat.send_stream("Pay 5.") if stream else chat.send("Pay 5."))
        assert res.finish_reason == AgentFinishReason.LENGTH and ledger == []
        assert len(server.requests) == 1
        assert [m.role for m in await chat.history()] == ["user", "model", "tool"]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_blocked_reply_runs_none_of_its_calls_and_ends_the_turn_blocked(
    provider: Provider, stream: bool
) -> None:
    """The provider's filter (OpenAI ``content_filter``, Anthropic ``refusal``, Gemini ``SAFETY``)
    stopped a reply that asks for a call: the call is not run, its result says so (the history
    stays whole) and the turn ends ``blocked`` — found by a probe: the tool ran, the model was
    asked again and the turn ended ``stop``."""
    wire = next(w for w, e in provider.finish_reasons if e == "blocked")
    flagged = provider.reply(None, [Call("call_flagged", "pay", {"amount": 5})], stream=stream, finish=wire)
    ledger: list[int] = []
    with provider.serve(scripted([flagged, provider.reply("never", stream=stream)])) as server:
        chat = pay_agent(provider.plugin(server), ledger, provider.model_name).chat()
        res = await (chat.send_stream("Pay 5.") if stream else chat.send("Pay 5."))
        assert res.finish_reason == AgentFinishReason.BLOCKED and ledger == []
        assert len(server.requests) == 1
        history = await chat.history()
        assert [m.role for m in history] == ["user", "model", "tool"]
        [result] = [p for p in history[-1].parts if isinstance(p, ToolResponsePart)]
        assert "blocked" in result.output["error"]


def banking_model(provider: Provider) -> Callable[[WireRequest], Reply]:
    """The model as the banking system prompt asks: approval first, then the transfer."""

    def handler(request: WireRequest) -> Reply:
        stream = provider.is_stream(request)
        assert "your first call is userApproval" in provider.system(request)
        assert sorted(provider.tool_names(request)) == ["transfer_money", "userApproval"]
        results = provider.results(request)
        if not results:
            args = {"action": "transfer_money", "details": "Transfer $500 to savings"}
            return provider.reply("Asking for approval.", [Call("call_approve", "userApproval", args)], stream=stream)
        [result] = results
        if result.call_id == "call_approve":
            transfer = Call("call_transfer", "transfer_money", {"amount": "500", "to_account": "savings"})
            return provider.reply(None, [transfer], stream=stream)
        assert result.call_id == "call_transfer"
        return provider.reply(f"Done. {provider.read_output(result.output)}", stream=stream)

    return handler


@pytest.mark.parametrize("stream", [False, True])
async def test_the_banking_example_pauses_and_resumes(provider: Provider, stream: bool) -> None:
    ledger: list[str] = []
    with provider.serve(banking_model(provider)) as server:
        _, agent = banking.build(ledger=ledger, model=provider.model_name, plugins=[provider.plugin(server)])
        chat = agent.chat()
        if stream:
            first = [chunk async for chunk in chat.send_stream("Transfer $500 to savings.")]
            assert any(isinstance(c, ToolCallDeltaChunk) and c.name == "userApproval" for c in first)
            [interrupt] = [c for c in first if isinstance(c, InterruptChunk)]
            assert isinstance(first[-1], TurnEndChunk)
            res = first[-1].response
        else:
            res = await chat.send("Transfer $500 to savings.")
        assert res.finish_reason == AgentFinishReason.INTERRUPTED
        [pause] = res.interrupts
        if stream:
            assert interrupt.interrupt.ref == pause.ref
        assert (pause.name, pause.input) == (
            "userApproval",
            {"action": "transfer_money", "details": "Transfer $500 to savings"},
        )
        assert pause.ref != "call_approve"  # refs are the runtime's
        assert ledger == []
        answer = pause.respond({"approved": True, "feedback": "Looks good!"})
        if stream:
            resumed = chat.resume_stream(respond=[answer])
            texts = [c.text async for c in resumed if isinstance(c, TextChunk)]
            res = await resumed.response
            assert "".join(texts) == "Done. Transferred $500 to savings."
        else:
            res = await chat.resume(respond=[answer])
    assert (res.finish_reason, res.text) == (AgentFinishReason.STOP, "Done. Transferred $500 to savings.")
    assert ledger == ["500->savings"]
    first_request, second, third = server.requests
    assert set(provider.tool_parameters(first_request, "userApproval")["properties"]) == {"action", "details"}
    assert provider.calls(second)[0].call_id == "call_approve"
    approval = provider.sent_output({"approved": True, "feedback": "Looks good!"})
    assert provider.results(second) == [Result("call_approve", approval, False)]
    transferred = provider.sent_output("Transferred $500 to savings.")
    assert provider.results(third) == [Result("call_transfer", transferred, False)]
    assert all(provider.is_stream(r) is stream for r in server.requests)
