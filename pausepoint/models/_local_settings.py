"""A local model's settings for one call: the request's ``config`` (over the plugin's) read and
checked — sampling, length, stop sequences, the seed, and which tool calls it may make."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ModelBadRequest
from ._model import ToolDefinition
from ._portable import OUTPUT_LIMIT_KEYS, output_limit, output_limit_given, stop_sequences

__all__ = ["Settings"]


@dataclass(frozen=True, slots=True)
class Settings:
    """How the model samples and stops, and the tool calls it may make at each model call of a
    turn (``tool_choice``, one entry per call, the last one holding for the rest)."""

    temperature: float = 0.2
    top_p: float = 0.95
    top_k: int = 40
    min_p: float = 0.05
    repeat_penalty: float = 1.0
    max_tokens: int = 512
    seed: int | None = None
    stop: tuple[str, ...] = ()
    tool_choice: tuple[str, ...] = ("auto",)
    parallel_tool_calls: bool = False

    @classmethod
    def from_config(
        cls, config: Mapping[str, Any], tools: list[ToolDefinition], *, defaults: Mapping[str, Any] | None = None
    ) -> Settings:
        """The settings of ``config`` over the plugin's ``defaults`` (unknown keys are ignored).
        Raises ``ModelBadRequest``."""
        config = _over(defaults or {}, config)
        values: dict[str, Any] = {}
        for key, kind in (("temperature", float), ("top_p", float), ("min_p", float), ("repeat_penalty", float)):
            if config.get(key) is not None:
                values[key] = _number(config, key, kind, 0.0)
        if config.get("top_k") is not None:
            values["top_k"] = _number(config, "top_k", int, 1)
        if config.get("seed") is not None:
            values["seed"] = _number(config, "seed", int, 0)
        # the output limit and the stop sequences are read as every provider reads them
        if (max_tokens := output_limit(config)) is not None:
            values["max_tokens"] = max_tokens
        if (stop := stop_sequences(config)) is not None:
            values["stop"] = tuple(stop)
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


def _over(defaults: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` over ``defaults``. The output limit has two names, and giving both is refused
    (``output_limit``): a limit in ``config`` under either name replaces the defaults' under both."""
    if output_limit_given(config):
        defaults = {key: value for key, value in defaults.items() if key not in OUTPUT_LIMIT_KEYS}
    return {**defaults, **config}


def _number(config: Mapping[str, Any], key: str, kind: type[int] | type[float], minimum: float) -> Any:
    value = config[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or (kind is int and not isinstance(value, int)):
        raise ModelBadRequest(f"config {key!r} must be a{'n integer' if kind is int else ' number'}, not {value!r}")
    if value < minimum:
        raise ModelBadRequest(f"config {key!r} must be at least {minimum}, not {value!r}")
    return kind(value)
