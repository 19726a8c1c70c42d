"""The demo's ``--model``: ``local`` (Qwen2.5-Coder-1.5B, offline), ``scripted``, or a provider's model.

Every model decides by itself when to call which tool, except ``local/smollm2``: SmolLM2-135M is
too small to decide, so the demo runs it *guided* (it chooses each call's tool for the model by
the banking flow, and the model fills in the arguments and the text), and says so on screen.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any

from ..errors import ModelError, ModelNotFound
from ..models._model import ChunkSink, Model, ModelRequest, ModelResponse, Plugin
from ..testing import last_tool_results
from ._errors import CliError

__all__ = ["ModelChoice", "choose_model"]

# provider prefix -> (module, plugin factory, environment variables any one of which holds the key)
_PROVIDERS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "openai": ("openai", "OpenAI", ("OPENAI_API_KEY",)),
    "anthropic": ("anthropic", "Anthropic", ("ANTHROPIC_API_KEY",)),
    "googleai": ("google_genai", "GoogleAI", ("GEMINI_API_KEY", "GOOGLE_API_KEY")),
    "ollama": ("openai", "OpenAI.ollama", ()),
}


DEFAULT_LOCAL = "local/qwen2.5-coder-1.5b"
GUIDED = "local/smollm2"
GUIDED_NOTE = (
    "GUIDED: SmolLM2-135M cannot decide when to ask for approval, so this demo picks each tool call "
    "for it (approval for a money request, the transfer once approved) and the model only writes "
    "the arguments and the text. The default model decides by itself."
)


@dataclass
class ModelChoice:
    """What ``demo.build`` needs for a ``--model`` value: the model (None: scripted) and plugins.

    ``guided`` is the notice to show on screen when the demo chooses the model's tool calls.
    """

    label: str
    model: str | Model | None = None
    plugins: list[Plugin] = field(default_factory=list)
    guided: str | None = None


def choose_model(spec: str, *, threads: int | None = None) -> ModelChoice:
    """Resolve ``--model``. Raises ``CliError`` when a key, an extra or the model file is missing."""
    if spec == "scripted":
        return ModelChoice("the scripted stand-in model (offline)")
    if spec == "local" or spec.startswith("local/"):
        return _local(DEFAULT_LOCAL if spec == "local" else spec, threads)
    prefix, _, model_id = spec.partition("/")
    if prefix not in _PROVIDERS or not model_id:
        known = ", ".join(f"{p}/<model>" for p in _PROVIDERS)
        raise CliError(f"unknown model {spec!r}: use local, scripted, local/<file.gguf>, {known}")
    module_name, factory, keys = _PROVIDERS[prefix]
    if keys and not any(os.environ.get(k) for k in keys):
        raise CliError(f"--model {spec} needs an API key: set {' or '.join(keys)} (or use --model local / scripted)")
    module = _import_provider(module_name)
    make: Any = module
    for part in factory.split("."):
        make = getattr(make, part)
    return ModelChoice(spec, spec, [make()])


def _local(name: str, threads: int | None) -> ModelChoice:
    """The local model, prepared and loaded now, with progress on screen (a first run joins its file)."""
    module = _import_provider("local")
    # Greedy decoding keeps the demo repeatable.
    plugin = module.Local(n_threads=threads, config={"temperature": 0, "seed": 0}, progress=_say)
    try:
        model = plugin.resolve_model(name)
    except ModelNotFound:
        model = None
    if model is None:
        raise CliError(f"no local model {name!r}: use local, {DEFAULT_LOCAL}, {GUIDED} or local/<file.gguf>")
    try:
        described = model.prepare()
    except ModelError as exc:
        raise CliError(str(exc)) from exc
    if name == GUIDED:
        return ModelChoice(f"{name} (guided, local, offline)", _Guided(model), [plugin], guided=GUIDED_NOTE)
    return ModelChoice(f"{name} ({described}, local, offline)", model, [plugin])


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


_MONEY_WORDS = re.compile(r"\$|\b(transfer|send|pay|move|wire)\b", re.IGNORECASE)


def next_tool_choice(request: ModelRequest) -> str:
    """Which call the banking flow allows next: approval for a money request, the transfer once
    approved, otherwise a plain answer (so a denial is never followed by a transfer)."""
    last = request.messages[-1]
    if last.role == "user":
        return "userApproval" if _MONEY_WORDS.search(last.text) else "none"
    approval = last_tool_results(request).get("userApproval")
    if isinstance(approval, dict) and approval.get("approved") is True:
        return "transfer_money"
    return "none"


class _Guided:
    """``model`` with its ``tool_choice`` set per call by the banking flow (``next_tool_choice``)."""

    def __init__(self, model: Model) -> None:
        self.name = model.name
        self._model = model

    async def generate(self, request: ModelRequest, on_chunk: ChunkSink | None = None) -> ModelResponse:
        # A one-entry list applies to every call of the turn (a bare name only to its first call).
        config = {**request.config, "tool_choice": [next_tool_choice(request)]}
        return await self._model.generate(dataclasses.replace(request, config=config), on_chunk)


def _import_provider(name: str) -> Any:
    try:
        return importlib.import_module(f"pausepoint.models.{name}")
    except ImportError as exc:
        raise CliError(str(exc)) from exc  # it names the extra to install
