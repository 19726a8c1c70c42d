"""The local model's prompt: the conversation rendered through the model's own chat template.

A GGUF file carries the Jinja chat template its model was trained with
(``tokenizer.chat_template``). It is rendered here with Jinja2, as Hugging Face's
``apply_chat_template`` does (sandboxed, ``trim_blocks``/``lstrip_blocks``, a ``tojson`` that
keeps non-ASCII text, ``raise_exception``, ``strftime_now``), so the model sees exactly the
layout it learned.

Whether the template knows tools is found out by rendering probes, not by its name: a template
``knows_tools`` when tools passed to it, tool calls in an assistant message and a ``tool``
message all show up in what it renders. Such a template lists the tools and lays out calls and
results its own way (Qwen2.5's: ``# Tools`` with ``<tools>...</tools>``, calls in
``<tool_call>``, results in ``<tool_response>`` inside a user turn). For any other template
pausepoint writes the tool list into the system prompt itself and renders calls and results as
text (see ``local._map_messages``). A file without a template gets ChatML.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..errors import ModelBadRequest

__all__ = ["ChatTemplate", "chatml"]

_PROBE_TOOL = "pausepoint_probe_tool"
_PROBE_CALL = "pausepoint_probe_call"
_PROBE_RESULT = "pausepoint_probe_result"


def chatml(messages: list[dict[str, Any]]) -> str:
    """ChatML, for GGUF files that carry no chat template."""
    turns = "".join(f"<|im_start|>{m['role']}\n{m.get('content') or ''}<|im_end|>\n" for m in messages)
    return turns + "<|im_start|>assistant\n"


def _tojson(value: Any, indent: int | None = None, separators: Any = None, sort_keys: bool = False) -> str:
    return json.dumps(value, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys, default=str)


def _raise_exception(message: str) -> None:
    raise ValueError(message)


@dataclass(frozen=True, slots=True)
class _Probe:
    tools: bool
    tool_calls: bool
    tool_role: bool


class ChatTemplate:
    """A GGUF file's chat template, ready to render (ChatML when ``source`` is None).

    ``bos_token`` / ``eos_token`` are the texts templates may refer to. Raises ``ModelBadRequest``
    when the template does not compile.
    """

    def __init__(self, source: str | None, *, bos_token: str = "", eos_token: str = "") -> None:
        self.source = source
        self._bos, self._eos = bos_token, eos_token
        self._template: Any = None
        if source is not None:
            try:
                from jinja2 import TemplateError
                from jinja2.sandbox import ImmutableSandboxedEnvironment
            except ImportError as exc:  # pragma: no cover - jinja2 comes with the local extra
                from .._extras import missing_extra

                raise missing_extra("jinja2", "local") from exc
            env = ImmutableSandboxedEnvironment(
                trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"]
            )
            env.filters["tojson"] = _tojson
            env.globals["raise_exception"] = _raise_exception
            env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
            try:
                self._template = env.from_string(source)
            except TemplateError as exc:
                raise ModelBadRequest(f"the model's chat template does not compile: {exc}") from exc
        self._probe = self._find_capabilities()

    @property
    def knows_tools(self) -> bool:
        """Whether the template lists tools, lays out tool calls and takes ``tool`` messages itself."""
        return self._probe.tools and self._probe.tool_calls and self._probe.tool_role

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> str:
        """The prompt for ``messages`` (OpenAI-style dicts), ending where the model's answer starts.

        Raises ``ModelBadRequest`` when the template refuses the conversation.
        """
        if self._template is None:
            return chatml(messages)
        context: dict[str, Any] = {
            "messages": messages,
            "add_generation_prompt": True,
            "bos_token": self._bos,
            "eos_token": self._eos,
        }
        if tools:
            context["tools"] = tools
        try:
            return str(self._template.render(**context))
        except Exception as exc:  # a template may refuse a conversation it does not support
            raise ModelBadRequest(f"the model's chat template refused the conversation: {exc}") from exc

    def _find_capabilities(self) -> _Probe:
        if self._template is None:
            return _Probe(False, False, False)
        user = {"role": "user", "content": "Hi"}
        tool = {
            "type": "function",
            "function": {"name": _PROBE_TOOL, "description": "", "parameters": {"type": "object", "properties": {}}},
        }
        call = {"type": "function", "function": {"name": _PROBE_CALL, "arguments": {}}}
        return _Probe(
            tools=_PROBE_TOOL in self._try([{"role": "system", "content": "S"}, user], [tool]),
            tool_calls=_PROBE_CALL in self._try([user, {"role": "assistant", "content": "", "tool_calls": [call]}]),
            tool_role=_PROBE_RESULT
            in self._try(
                [
                    user,
                    {"role": "assistant", "content": "", "tool_calls": [call]},
                    {"role": "tool", "content": _PROBE_RESULT, "name": _PROBE_CALL},
                ]
            ),
        )

    def _try(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> str:
        try:
            return self.render(messages, tools)
        except ModelBadRequest:
            return ""
