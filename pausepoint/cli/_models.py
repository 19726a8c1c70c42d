"""The demo's ``--model``: ``local`` (the bundled SmolLM2), ``scripted``, or a provider's model."""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from typing import Any

from .._models import Model, Plugin
from ..errors import ModelError
from ._errors import CliError

__all__ = ["ModelChoice", "choose_model"]

# provider prefix -> (module, plugin factory, environment variables any one of which holds the key)
_PROVIDERS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "openai": ("openai", "OpenAI", ("OPENAI_API_KEY",)),
    "anthropic": ("anthropic", "Anthropic", ("ANTHROPIC_API_KEY",)),
    "googleai": ("google_genai", "GoogleAI", ("GEMINI_API_KEY", "GOOGLE_API_KEY")),
    "ollama": ("openai", "OpenAI.ollama", ()),
}


@dataclass
class ModelChoice:
    """What ``demo.build`` needs for a ``--model`` value: the model (None: scripted) and plugins."""

    label: str
    model: str | Model | None = None
    plugins: list[Plugin] = field(default_factory=list)


def choose_model(spec: str, *, threads: int | None = None) -> ModelChoice:
    """Resolve ``--model``. Raises ``CliError`` when a key, an extra or the model file is missing."""
    if spec == "scripted":
        return ModelChoice("the scripted stand-in model (offline)")
    if spec == "local" or spec.startswith("local/"):
        return _local("local/smollm2" if spec == "local" else spec, threads)
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
    module = _import_provider("local")
    if name == "local/smollm2":
        try:
            module.smollm2_path()
        except ModelError as exc:
            raise CliError(str(exc)) from exc
    # Greedy decoding keeps the demo repeatable; the small model is steered call by call.
    plugin = module.Local(n_ctx=2048, n_threads=threads, config={"temperature": 0, "seed": 0})
    model = plugin.resolve_model(name)
    if model is None:
        raise CliError(f"no local model {name!r}")
    from ..demo import steered

    return ModelChoice(f"{name} (local, offline)", steered(model), [plugin])


def _import_provider(name: str) -> Any:
    try:
        return importlib.import_module(f"pausepoint.models.{name}")
    except ImportError as exc:
        raise CliError(str(exc)) from exc  # it names the extra to install
