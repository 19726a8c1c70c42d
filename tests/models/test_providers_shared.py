"""What every cloud provider adapter sends alike: the config keys agents share, checked and
translated the same way, and call ids unique across a request — a session moved from another
provider included.

Written once and run on each provider's wire, as ``test_providers.py`` is (``providers.py``
knows each format): the provider's real SDK over real HTTP to a loopback server whose fake
refuses what the API refuses (Anthropic a ``tool_use`` id used twice in a request, OpenAI a
``tool_call_id`` used twice).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pausepoint import Message, ModelRequest, Pausepoint, TextPart, ToolRequestPart
from pausepoint.errors import ModelBadRequest
from pausepoint.models.openai import OpenAI
from pausepoint.stores import InMemorySessionStore

from .providers import ALL, FAST, Call, Provider, refused_before_sending
from .wire_server import Reply, WireRequest, WireServer, scripted

USER = [Message("user", [TextPart("Hello")])]

#: where each wire carries the shared keys: (the body's field holding them, or None: the body
#: itself; each shared key's name there)
SENT_AS: dict[str, tuple[str | None, dict[str, str]]] = {
    "openai": (None, {"temperature": "temperature", "top_p": "top_p", "max_completion_tokens": "max_tokens",
                      "stop": "stop_sequences"}),
    "anthropic": (None, {"temperature": "temperature", "top_p": "top_p", "max_tokens": "max_tokens",
                         "stop_sequences": "stop_sequences"}),
    "googleai": ("generationConfig", {"temperature": "temperature", "topP": "top_p",
                                      "maxOutputTokens": "max_tokens", "stopSequences": "stop_sequences"}),
}  # fmt: skip


def shared_sent(provider: Provider, request: WireRequest) -> dict[str, Any]:
    """The shared keys the request carried, under their shared names."""
    field, names = SENT_AS[provider.name]
    body = request.body.get(field, {}) if field else request.body
    return {shared: body[name] for name, shared in names.items() if name in body}


# -- the shared config keys -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (
            {"temperature": 0.5, "top_p": 0.9, "max_output_tokens": 9, "stop_sequences": ["END", "STOP"]},
            {"temperature": 0.5, "top_p": 0.9, "max_tokens": 9, "stop_sequences": ["END", "STOP"]},
        ),
        ({"max_tokens": 64, "stop_sequences": ("END",)}, {"max_tokens": 64, "stop_sequences": ["END"]}),
        ({"max_tokens": None, "max_output_tokens": 7, "temperature": 0}, {"max_tokens": 7, "temperature": 0}),
    ],
    ids=["every-key", "max-tokens-and-a-tuple", "a-none-is-not-given"],
)
async def test_the_shared_config_keys_are_sent_alike(
    provider: Provider, config: dict[str, Any], expected: dict[str, Any]
) -> None:
    with provider.serve(scripted([provider.reply("ok", stream=False)])) as server:
        await provider.model(server).generate(ModelRequest(USER, config=config))
    [sent] = server.requests
    assert shared_sent(provider, sent) == expected


#: a config no provider is sent, the key named, and what the refusal says of it
BAD_SHARED_VALUES: dict[str, tuple[dict[str, Any], str, str]] = {
    "a-string": ({"stop_sequences": "END"}, "stop_sequences", "must be a list of non-empty strings, not 'END'"),
    "an-empty-sequence": ({"stop_sequences": ["END", ""]}, "stop_sequences", "must be a list of non-empty strings"),
    "a-number-in-the-list": ({"stop_sequences": ["END", 7]}, "stop_sequences", "must be a list of non-empty strings"),
    "zero": ({"max_tokens": 0}, "max_tokens", "must be a whole number of at least 1, not 0"),
    "negative": ({"max_tokens": -1}, "max_tokens", "must be a whole number of at least 1, not -1"),
    "a-fraction": ({"max_tokens": 2.7}, "max_tokens", "must be a whole number of at least 1, not 2.7"),
    "true": ({"max_output_tokens": True}, "max_output_tokens", "must be a whole number of at least 1, not True"),
    "a-word": ({"max_tokens": "abc"}, "max_tokens", "not 'abc'"),
    "a-numeral": ({"max_output_tokens": "50"}, "max_output_tokens", "not '50'"),
    "a-word-for-temperature": ({"temperature": "hot"}, "temperature", "must be a number, not 'hot'"),
    "true-for-top-p": ({"top_p": True}, "top_p", "must be a number, not True"),
}


@pytest.mark.parametrize(("config", "key", "said"), list(BAD_SHARED_VALUES.values()), ids=list(BAD_SHARED_VALUES))
@pytest.mark.parametrize("stream", [False, True])
async def test_a_shared_config_value_no_provider_takes_is_a_bad_request_naming_its_key_before_sending(
    provider: Provider, config: dict[str, Any], key: str, said: str, stream: bool
) -> None:
    """The same config fails the same way on every provider (found by a probe: Anthropic split a
    ``stop_sequences`` string into characters, sent 1024 for ``max_tokens=0``, 2 for 2.7, and
    failed on ``"abc"`` with an untyped ``ModelError``; OpenAI sent each as given; Gemini refused
    some). Neither coerced, nor an untyped error, nor sent."""
    refused = await refused_before_sending(provider, config, stream)
    assert refused.details["key"] == key
    assert refused.message.startswith(f"config {key!r} ") and said in refused.message


@pytest.mark.parametrize("order", [("max_tokens", "max_output_tokens"), ("max_output_tokens", "max_tokens")])
async def test_both_names_of_the_output_limit_are_refused_whichever_comes_first(
    provider: Provider, order: tuple[str, str]
) -> None:
    """Found by a probe: OpenAI sent whichever came last, Anthropic ``max_tokens``, Gemini
    ``max_output_tokens``."""
    config = {order[0]: 5, order[1]: 9}
    with (
        provider.serve(scripted([provider.reply("never", stream=False)])) as server,
        pytest.raises(ModelBadRequest, match="'max_tokens' and 'max_output_tokens' are one limit") as caught,
    ):
        await provider.model(server).generate(ModelRequest(USER, config=config))
    assert sorted(caught.value.details["keys"]) == ["max_output_tokens", "max_tokens"]
    assert server.requests == []


# -- call ids across a request ----------------------------------------------------------------


def per_reply_ids_server() -> WireServer:
    """An OpenAI-compatible server that numbers a reply's calls from 0, as Kimi/Moonshot do: every
    turn's first call is ``functions.lookup:0`` (and it takes its own ids back repeated)."""
    openai = ALL["openai"]

    def handler(request: WireRequest) -> Reply:
        if openai.results(request):
            return openai.reply("It is sunny.", stream=False)
        city = openai.last_user_text(request)
        return openai.reply(None, [Call("functions.lookup:0", "lookup", {"city": city})], stream=False)

    return WireServer(handler)


def helper_agent(plugins: list[Any], model: str, store: InMemorySessionStore, looked_up: list[str]) -> Any:
    ai = Pausepoint(plugins=plugins)

    @ai.tool()
    def lookup(city: str) -> str:
        """The weather of a city."""
        looked_up.append(city)
        return f"{city}: sunny"

    return ai.define_agent(name="helper", model=model, tools=[lookup], store=store)


async def test_a_session_whose_server_reused_call_ids_goes_on_with_ids_unique_across_the_request(
    provider: Provider,
) -> None:
    """Found by a probe: moved to Anthropic, both ``functions.lookup:0`` calls went as the same
    ``toolu_<hash>``, which the API refuses (``tool_use`` ids must be unique), on every later turn:
    the session could only be abandoned. A call whose id an earlier call has goes under its ref,
    on the call and on its result, the same on every request."""
    store, looked_up = InMemorySessionStore(), []
    with per_reply_ids_server() as kimi_server:
        kimi = OpenAI.compatible("kimi", f"{kimi_server.url}/v1", retry=FAST)
        chat = helper_agent([kimi], "kimi/kimi-k2", store, looked_up).chat()
        for city in ("Oslo", "Rome"):
            assert (await chat.send(city)).text == "It is sunny."
    history = await chat.history()
    refs = [p.ref for m in history for p in m.parts if isinstance(p, ToolRequestPart)]
    assert looked_up == ["Oslo", "Rome"] and len(refs) == 2

    with provider.serve(lambda request: provider.reply("Paris is sunny too.", stream=False)) as server:
        moved = helper_agent([provider.plugin(server)], provider.model_name, store, looked_up)
        again = moved.chat(chat.session_id)
        assert (await again.send("And Paris?")).text == "Paris is sunny too."
        assert (await again.send("Thanks.")).text == "Paris is sunny too."
    first, second = (provider.call_ids(request) for request in server.requests)
    calls, results = first
    assert len(set(calls)) == 2 and calls == results  # each result under its call's id
    assert calls[1] == refs[1]  # the repeat goes under its ref, unique in the session
    assert second == first  # the same history, the same ids


# -- tool names --------------------------------------------------------------------------------


async def test_a_call_the_model_named_as_no_provider_takes_goes_back_under_one_they_all_take(
    provider: Provider,
) -> None:
    """Found by a probe: OpenAI's models sometimes call ``multi_tool_use.parallel``, a name the API
    refuses in a request. Answered "unknown tool", it went back in the history as it came, and
    every later request of the session was a 400: the session could only be abandoned. It goes
    as ``multi_tool_use_parallel`` now, on every request; the history keeps what the model wrote."""

    def handler(request: WireRequest) -> Reply:
        if provider.results(request):
            return provider.reply("Done.", stream=False)
        return provider.reply(None, [Call("call_1", "multi_tool_use.parallel", {"tool_uses": []})], stream=False)

    store: InMemorySessionStore = InMemorySessionStore()
    with provider.serve(handler) as server:
        chat = helper_agent([provider.plugin(server)], provider.model_name, store, []).chat()
        assert (await chat.send("Oslo")).text == "Done."
        assert (await chat.send("And Rome?")).text == "Done."
    answered, again = server.requests[1], server.requests[2]  # the call's result; the next send's first
    assert [call.name for call in provider.calls(answered)] == ["multi_tool_use_parallel"]
    sent_again = json.dumps(again.body)  # the history, with that call in it (OpenAI's fake refuses the name)
    assert '"name": "multi_tool_use_parallel"' in sent_again and '"name": "multi_tool_use.parallel"' not in sent_again
    [result] = provider.results(answered)
    assert result.is_error or "unknown tool" in str(result.output)
    history = await chat.history()
    assert [p.name for m in history for p in m.parts if isinstance(p, ToolRequestPart)] == [
        "multi_tool_use.parallel"
    ] * 2  # one each send
