"""MCP elicitation as a pause.

A 2026-07-28 MCP server that needs something from a person mid-call does not hold the call
open: it *returns* an ``InputRequiredResult`` — its questions (``input_requests``) and an
opaque, sealed ``request_state`` — and the client calls the same tool again with the answers.
Nothing is in flight while a person thinks, so the pause is durable: the question and the
state are the pause's metadata, written to the session's log like any pause.

- ``question`` turns a round's first unanswered elicitation into an ``Interrupt`` whose
  metadata holds ``elicitation`` (``message`` and ``requested_schema``, or ``url``) — what a
  person sees — and ``mcp_round`` (the state to carry back; not for people).
- ``handed_answer`` is the tool's ``answer_restart`` hook: ``respond(content)`` is checked
  against ``requested_schema`` and becomes a restart carrying ``{"action": "accept",
  "content": ...}``; ``deny(reason)`` carries ``{"action": "decline"}``; a restart may carry
  ``resumed_metadata={"elicitation": {"action": "cancel"}}`` itself. So the answer is claimed
  exactly once, and the call goes on — one ``tools/call`` round per answered round.
- ``next_round`` collects the answers of a round (a round may ask several questions: each is a
  pause of its own) and says what to send back.

Servers of the handshake era (before 2026-07-28) ask over a back-channel while the request
waits; that cannot outlive the process, so pausepoint refuses those questions (the server sees
an error, the model sees the call fail) — see docs/mcp.md.
"""

from __future__ import annotations

from typing import Any

import mcp.types as types

from ..errors import DefinitionError
from ..session._interrupts import ToolResponse, ToolRestart
from ..tools._tool import Interrupt
from ._schema import answer_validator, check_against, output_validator

__all__ = ["answered", "first_round", "handed_answer", "question", "responses"]

_ACTIONS = ("accept", "decline", "cancel")


def first_round(result: types.InputRequiredResult, about: dict[str, Any]) -> dict[str, Any]:
    """The state of a round of questions: each question (as a person reads it), the answers so
    far (requests no person answers are answered now: roots, none shared), the ``request_state``.
    Raises ``ValueError`` for a request pausepoint cannot answer (sampling the agent's model)."""
    questions: dict[str, Any] = {}
    answers: dict[str, Any] = {}
    for key, request in sorted((result.input_requests or {}).items()):
        if isinstance(request, types.ListRootsRequest):
            answers[key] = {"roots": []}
        elif isinstance(request, types.ElicitRequest):
            params = request.params
            asked: dict[str, Any] = {"message": params.message}
            if isinstance(params, types.ElicitRequestURLParams):
                asked["url"] = params.url
            else:
                try:  # a schema no answer could be checked against makes no question a person can answer
                    output_validator(params.requested_schema, "the question's requested_schema")
                except DefinitionError as exc:
                    raise ValueError(f"it asked a question no answer can fit: {exc}") from None
                asked["requested_schema"] = params.requested_schema
            questions[key] = asked
        else:
            raise ValueError(f"the server asked for {request.method!r}, which pausepoint does not answer")
    return {
        "questions": questions,
        "answers": answers,
        "request_state": result.request_state,
        "about": about,
    }


def question(round_state: dict[str, Any]) -> Interrupt | None:
    """The pause asking the round's first unanswered question (None: every one is answered)."""
    for key, asked in round_state["questions"].items():
        if key not in round_state["answers"]:
            return Interrupt(
                {"elicitation": asked, "mcp": round_state["about"], "mcp_round": {**round_state, "key": key}}
            )
    return None


def handed_answer(pause_metadata: dict[str, Any] | None, answer: Any) -> dict[str, Any] | None:
    """``Tool.answer_restart`` for MCP tools (see the module docstring); None for pauses that
    are not questions (an approval pause is answered as any pause is, but a restart of one may
    not carry an ``mcp_round``: that state reaches the server only from its question's pause)."""
    asked = (pause_metadata or {}).get("elicitation")
    round_state = (pause_metadata or {}).get("mcp_round")
    if not isinstance(asked, dict) or not isinstance(round_state, dict):
        if isinstance(answer, ToolRestart) and "mcp_round" in (answer.resumed_metadata or {}):
            # the server's state goes back to it only with the answer to its own question
            raise ValueError("this pause is no question from the MCP server: a restart cannot carry an mcp_round")
        return None
    if isinstance(answer, ToolRestart):
        if answer.replace_input is not None:
            raise ValueError("an MCP server's question cannot change the call's arguments")
        given = (answer.resumed_metadata or {}).get("elicitation")
        if not isinstance(given, dict) or given.get("action") not in _ACTIONS:
            raise ValueError(
                "this pause is a question from the MCP server: answer it with respond(content) or deny(reason), "
                "or restart it with resumed_metadata={'elicitation': {'action': 'accept'|'decline'|'cancel', ...}}"
            )
        action, content = given["action"], given.get("content")
    elif isinstance(answer, ToolResponse) and answer.decision == "deny":
        action, content = "decline", None
    else:
        action, content = "accept", answer.output
    if action != "accept":
        content = None
    elif "url" in asked:
        content = None  # a URL elicitation's accept carries no content: the person went there
    else:
        if not isinstance(content, dict):
            raise ValueError(f"the answer must be an object with the fields asked for, not {type(content).__name__}")
        # a ValidationError (a ValueError): the answer's refusal names each field's problem
        check_against(answer_validator(asked.get("requested_schema") or {}, "the question"), content, "answer")
    reply: dict[str, Any] = {"action": action}
    if content is not None:
        reply["content"] = content
    return {"elicitation": reply, "mcp_round": round_state}


def answered(resumed: dict[str, Any]) -> dict[str, Any]:
    """The round carried by a restart (``handed_answer``'s), with its answer added."""
    round_state = dict(resumed["mcp_round"])
    round_state["answers"] = {**round_state.get("answers", {}), round_state.pop("key"): resumed["elicitation"]}
    return round_state


def responses(answers: dict[str, Any]) -> types.InputResponses:
    """The answers as the SDK sends them (``ElicitResult`` / ``ListRootsResult``)."""
    found: types.InputResponses = {}
    for key, value in answers.items():
        if "roots" in value:
            found[key] = types.ListRootsResult(roots=[])
        else:
            found[key] = types.ElicitResult(action=value["action"], content=value.get("content"))
    return found
