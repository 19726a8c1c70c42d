"""The terminal chat: stream an agent's turns, show each pause as a card, ask the person what to do.

It reads lines (from a terminal, or from a pipe, so it can be scripted) and writes to stdout.
On a terminal a spinner shows that the model or a tool is working; elsewhere only the events
are printed. A pause reads as ``agent.view(interrupt)`` says (the console's title, summary and
fields), with where its approval stands under the agent's approval policy ("1 of 2 approvals",
who still decides; a quorum the person approved already is not asked about again). "Approve" is
``agent.approval(interrupt)``: the same meaning as in the console; "grant" approves later calls of
the tool in this session too, where the policy allows it. A card offers only what the pause's
view lets the person typing give, and an answer is checked as the resume checks it when it is
given, so that one refused never drops the other answers of the turn (``_offers``). A choice
is a whole line (``a`` or ``approve``), never the first letter of whatever was typed, and on a
high-risk pause every decision takes a second step: approving, granting, editing or answering
it a ``y`` to "are you sure", denying it a reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import signal
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TextIO

from ..content._jsondata import read_json_text, time_text
from ..errors import ApprovalForbidden, InterruptExpired, InvalidAnswer, PausepointError, PendingInterrupts
from ..runtime._agent import Agent
from ..runtime._chat import Chat
from ..session._grants import Grant
from ..session._interrupts import PendingInterrupt, ToolResponse, ToolRestart
from ..session._response import AgentFinishReason, AgentResponse
from ..stores import InMemorySessionStore
from ..tools._display import PauseView
from ..turn._streaming import TurnStream
from ._lines import LineReader
from ._offers import Offer, answer_refusal, asked_schema, offer_for, schema_refusal, unkept
from ._screen import Status, Style, plain, shown_json
from ._shape import shape

__all__ = ["TerminalChat"]

HELP = """\
Type a message and press Enter. Commands:
  /pending   answer the open pauses      /cancel   cancel the open pauses
  /session   show the session id         /quit     leave (Ctrl+D too)"""

VIA = "terminal"


class TerminalChat:
    """A chat with ``agent`` in the terminal, on a new session or ``session_id``.

    ``principal`` is who is typing (a new session's owner; recorded in the audit trail).
    """

    def __init__(
        self,
        agent: Agent,
        *,
        session_id: str | None = None,
        principal: str | None = None,
        stdin: TextIO | None = None,
        stdout: TextIO | None = None,
    ) -> None:
        self.agent = agent
        self.chat: Chat = agent.chat(session_id, principal=principal)
        self.principal = principal
        self._in = stdin or sys.stdin
        self._out = stdout or sys.stdout
        self._style = Style(self._out)
        self._status = Status(self._out, self._style)
        self._resuming = session_id is not None
        self._lines = LineReader(self._in)
        #: whether the session exists in the store (a new chat's id names nothing until a turn is written)
        self._written = self._resuming

    # -- output -----------------------------------------------------------------------------------

    def say(self, text: str = "", end: str = "\n") -> None:
        self._status.stop()
        self._out.write(text + end)
        self._out.flush()

    def note(self, text: str) -> None:
        self.say(self._style(text, "2"))

    async def ask(self, prompt: str) -> str | None:
        """One line from the person, without its newline; None at end of input."""
        self._status.stop()
        self._out.write(prompt)
        self._out.flush()
        line = await self._lines.readline()
        if line is None:
            self._out.write("\n")
            return None
        line = line.removesuffix("\r")
        if not self._in.isatty():
            # echo scripted input, so the transcript reads like a session: made visible as a -m
            # message's is (found by a probe: an ESC sequence or a bidi override went out as it was)
            self._out.write(plain(line) + "\n")
        return line

    # -- the loop ---------------------------------------------------------------------------------

    async def run(self, first_messages: list[str] | None = None) -> int:
        """Chat until the person quits or input ends. Returns the exit status (0).

        Cancelled (Ctrl+C), it says how to continue the session, if one was written, and
        re-raises. SIGTERM and SIGHUP (a terminal closed) stop it as Ctrl+C does: a tool call
        cut short is recorded as such, and the session takes its next message at once.
        """
        stops = _stop_as_ctrl_c()
        try:
            await self._loop(first_messages)
        except asyncio.CancelledError:
            self.say()
            if not self._written:  # cut short in its first turn, which recorded what it cut short
                with contextlib.suppress(Exception):
                    found = await asyncio.wait_for(self.chat.agent.store.get_summary(self.chat.session_id), 5)
                    self._written = found is not None
            self._say_how_to_continue()
            raise
        finally:
            for sig in stops:
                asyncio.get_running_loop().remove_signal_handler(sig)
        self._say_how_to_continue()
        return 0

    def _say_how_to_continue(self) -> None:
        if self._written and not isinstance(self.chat.agent.store, InMemorySessionStore):  # else gone with us
            self.note(f"session {self.chat.session_id}: continue it with --session {self.chat.session_id}")

    async def _loop(self, first_messages: list[str] | None) -> None:
        pending: list[PendingInterrupt] = []
        if self._resuming:
            pending = await self.chat.interrupts()  # SessionNotFound for an unknown id
            self.note(f"continuing session {self.chat.session_id}")
            last = await self.chat.last_response()
            if last is not None and last.finish_reason in (AgentFinishReason.ABORTED, AgentFinishReason.FAILED):
                why = f": {plain(last.error)}" if last.error else ""
                self.note(f"its last turn ended {last.finish_reason.value}{why}")
        queued = list(first_messages or [])
        while True:
            if pending:
                pending = await self._answer(pending)
                continue
            line: str | None
            if queued:  # a -m message: shown as a typed one is
                line = queued.pop(0)
                self.say(self._style("you> ", "1;36") + plain(line))
            else:
                line = await self.ask(self._style("you> ", "1;36"))
            if line is None:
                break
            line = line.strip()
            if not line:
                continue
            if line.startswith("/"):
                done, pending = await self._command(line)
                if done:
                    break
                continue
            pending = await self._send(line)

    async def _command(self, line: str) -> tuple[bool, list[PendingInterrupt]]:
        word = line.split()[0].lower()
        if word in ("/quit", "/exit", "/q"):
            return True, []
        if word == "/help":
            self.say(HELP)
        elif word == "/session":
            yet = "" if self._written else " (nothing yet: the first message makes it)"  # (found by a probe)
            self.note(f"session {self.chat.session_id}{yet}")
        elif word in ("/pending", "/cancel"):
            open_ = await self.chat.interrupts() if self.chat.session_id else []
            if not open_:
                self.note("no open pauses")
            elif word == "/pending":
                return False, open_
            else:
                await self.chat.cancel_pending("cancelled from the terminal", principal=self.principal, via=VIA)
                self.note(f"cancelled {len(open_)} pause(s)")
        else:
            self.say(f"unknown command {word}\n{HELP}")
        return False, []

    async def _send(self, text: str) -> list[PendingInterrupt]:
        try:
            response = await self._play(self.chat.send_stream(text, principal=self.principal, via=VIA))
        except PendingInterrupts:
            self.say(
                f"Some pauses are still open, so “{plain(text)}” was not sent: /pending answers them, "
                "/cancel cancels them; then send it again."
            )
            return []
        except PausepointError as exc:
            self.say(self._style(plain(f"error: {exc}"), "31"))
            return []
        return self._after(response)

    def _after(self, response: AgentResponse) -> list[PendingInterrupt]:
        self._written = True
        if response.finish_reason == AgentFinishReason.INTERRUPTED:
            return list(response.interrupts)
        if response.finish_reason != AgentFinishReason.STOP:
            detail = f": {plain(response.error)}" if response.error else ""
            self.say(self._style(f"[turn ended: {response.finish_reason.value}{detail}]", "33"))
        return []

    async def _play(self, stream: TurnStream) -> AgentResponse:
        """Show a turn as it happens; returns its response."""
        in_text = False
        self._status.start("thinking")
        try:
            async for chunk in stream:
                if chunk.kind == "text":
                    if not in_text:
                        self.say(self._style("agent> ", "1;32"), end="")
                        in_text = True
                    self.say(plain(chunk.text), end="")
                    continue
                if in_text:
                    self.say()
                    in_text = False
                if chunk.kind == "tool_call_delta":
                    self._status.start(f"writing a call to {plain(chunk.name or 'a tool')}")
                elif chunk.kind == "tool_request":
                    self.note(f"  → {plain(chunk.name)} {shown_json(chunk.input, None)}")
                    self._status.start(f"running {plain(chunk.name)}")
                elif chunk.kind == "tool_progress":
                    self._status.stop()
                    self._status.start(f"{plain(chunk.name)}: {shown_json(chunk.data, None)}")
                elif chunk.kind == "tool_result":
                    refused = chunk.is_error or (isinstance(chunk.output, dict) and chunk.output.get("denied") is True)
                    mark = self._style("✗", "31") if refused else self._style("✓", "32")
                    self.say(f"  {mark} {plain(chunk.name)}: {self._style(shown_json(chunk.output, None), '2')}")
                    self._status.start("thinking")
                elif chunk.kind == "interrupt":
                    self._status.stop()
        finally:
            if in_text:
                self.say()
            self._status.stop()
        return await stream.response

    # -- pauses -----------------------------------------------------------------------------------

    async def _answer(self, pending: list[PendingInterrupt]) -> list[PendingInterrupt]:
        """Ask about each pause, resume with the answers given; returns what is still open after."""
        now = self.agent.clock()
        if any(p.expires_at is not None and p.expires_at <= now for p in pending):
            return await self._settle_expired()  # nobody may answer them: never offered
        respond: list[ToolResponse] = []
        restart: list[ToolRestart] = []
        asked = [p for p in pending if not self._approved_already(p)]  # each said once
        for interrupt in asked:
            self._card(interrupt)
            answer = await self._decide(interrupt)
            if isinstance(answer, ToolResponse):
                respond.append(answer)
            elif isinstance(answer, ToolRestart):
                restart.append(answer)
        while True:
            if not respond and not restart:
                if asked:
                    self.note("left open: /pending answers it later")
                return []
            try:
                response = await self._play(
                    self.chat.resume_stream(respond=respond, restart=restart, principal=self.principal, via=VIA)
                )
            except PausepointError as exc:
                if await self._asked_again(exc, asked, respond, restart):
                    continue  # the other answers kept
                answered = {a.name for a in respond} | {a.name for a in restart}
                self.say(self._style(plain(self._refusal(exc, answered)), "31"))
                return await (self._settle_expired() if isinstance(exc, InterruptExpired) else self.chat.interrupts())
            # A pause skipped is left open, not asked about again at once (found by a probe: its
            # card came back, and the next line typed was taken as its choice, not sent).
            skipped = {p.ref for p in asked} - {a.ref for a in respond} - {a.ref for a in restart}
            still = self._after(response)
            if any(p.ref in skipped for p in still):
                self.note("left open: /pending answers it later")
            return [p for p in still if p.ref not in skipped]

    async def _asked_again(
        self,
        exc: PausepointError,
        asked: list[PendingInterrupt],
        respond: list[ToolResponse],
        restart: list[ToolRestart],
    ) -> bool:
        """Whether the one answer the resume refused as data no session keeps (its record over
        the store's limit, which only the resume measures) was asked for again, on its own, in
        place of the one given (skipped: left out) — the other answers kept (found by a probe:
        all were dropped, and every pause asked about again)."""
        ref = exc.details.get("ref")
        redo = next((p for p in asked if p.ref == ref), None) if isinstance(exc, InvalidAnswer) else None
        if redo is None or exc.details.get("rule") != "max_record_bytes":
            return False
        self.say(self._style(plain(f"refused: {exc.message}; try again"), "31"))
        respond[:] = [a for a in respond if a.ref != ref]
        restart[:] = [a for a in restart if a.ref != ref]
        self._card(redo)
        answer = await self._decide(redo)
        if isinstance(answer, ToolResponse):
            respond.append(answer)
        elif isinstance(answer, ToolRestart):
            restart.append(answer)
        return True

    def _refusal(self, exc: PausepointError, answered: set[str]) -> str:
        """How a refused answer (to pauses of the tools ``answered``) reads. A policy that names
        no ``members`` knows nobody's roles here (a server gives them: its config file, ``serve
        --approver``), so a refusal for want of a role says that, not that the person holds none."""
        roles = exc.details.get("roles")
        unknown = isinstance(exc, ApprovalForbidden) and exc.details.get("reason") == "role"
        if not unknown or self.agent.approval_policy.members is not None or not isinstance(roles, list):
            return f"refused: {exc}"
        who = self.principal or "an unnamed caller"
        tools = " or ".join(map(repr, sorted(answered)))
        return (
            f"refused: this chat knows no one's roles, so {who!r} cannot decide {tools} here: the roles that "
            f"decide it ({', '.join(map(str, roles))}) are given to people where the agent is served (a config "
            "file's [principals], serve --approver); answer it there (the console, the REST API)"
        )

    async def _settle_expired(self) -> list[PendingInterrupt]:
        """Settle the pauses whose time ran out by the agent's expiry policy (what the model then
        says is shown); returns what is still open."""
        try:
            settled = await self.chat.settle_expired()
        except PausepointError as exc:
            self.say(self._style(plain(f"error: {exc}"), "31"))
            return []
        if settled is None:  # nothing settled (a detached turn runs): never asked about again here
            self.note("left open: /pending answers it later")
            return []
        self.note("a pause expired unanswered: the agent's expiry policy settled it")
        if settled.text:
            self.say(self._style("agent> ", "1;32") + plain(settled.text))
        return self._after(settled)

    def _card(self, interrupt: PendingInterrupt) -> None:
        top, side, bottom = self._style.box
        view = self.agent.view(interrupt)
        title = self._style(f"paused: {interrupt.name}", "1;33")
        lines = [f"{top} {title}  {self._style('ref ' + interrupt.ref, '2')}"]
        lines.append(f"{side} {self._style(view.title, '1')}")
        if view.summary:
            lines.append(f"{side} {view.summary}")
        lines.extend(f"{side}   {field.label}: {field.text}" for field in view.fields)
        if view.risk == "high":
            warning = "high risk: approving asks you to confirm (y on the line after a; after an edit or an answer too)"
            lines.append(f"{side} {self._style(warning, '1;31')}")
        for label, value in (("input", interrupt.input), ("metadata", interrupt.metadata)):
            if value:
                lines.append(f"{side} {self._style(label, '1')}")
                lines.extend(f"{side}   {row}" for row in shown_json(value).splitlines())
        if interrupt.expires_at is not None:
            when = time_text(interrupt.expires_at.astimezone().replace(microsecond=0))  # ...Z, as everywhere
            lines.append(f"{side} expires {when}: {view.on_expiry}")
        lines.extend(f"{side} {row}" for row in self._approval_lines(view))
        offer = self._offer(interrupt)
        if offer.why_not:
            lines.append(f"{side} {offer.why_not}")
        lines.append(f"{bottom} {offer.choices()}")
        self.say("\n".join(lines))

    def _approval_lines(self, view: PauseView) -> list[str]:
        """Where the pause's approval stands ("1 of 2 approvals", who still decides), as the
        console shows it."""
        shown = view.approval
        if shown is None:
            return []
        head = shown.progress + (f" (approved by {', '.join(shown.approved_by)})" if shown.approved_by else "")
        rows = [f"{self._style('approval', '1')} {head}", f"  {shown.waiting_for}"]
        rows += [f"  {note}" for note in (shown.escalated, shown.offer, shown.grant_note) if note]
        return rows

    def _approved_already(self, interrupt: PendingInterrupt) -> bool:
        """Whether the person typing gave this pause's approval already (a quorum waits for
        others): said once, not asked again."""
        status = interrupt.approval
        if status is None or self.principal is None or self.principal not in status.approved_by:
            return False
        view = self.agent.view(interrupt)
        assert view.approval is not None
        self.note(f"{interrupt.name} ({interrupt.ref}): {view.approval.progress}. {view.approval.waiting_for}")
        return True

    def _offer(self, interrupt: PendingInterrupt) -> Offer:
        """The choices that can answer this pause, given by the person typing (as the console's
        buttons are): ``_decide`` takes no other."""
        return offer_for(self.agent, interrupt, self.principal)

    async def _decide(self, interrupt: PendingInterrupt) -> ToolResponse | ToolRestart | None:
        """The person's answer to one pause; None when skipped (or input ended)."""
        offer = self._offer(interrupt)
        while True:
            line = await self.ask(self._style("choice> ", "1;33"))
            if line is None:
                return None
            choice = _CHOICES.get(line.strip().lower(), "")
            answer: ToolResponse | ToolRestart | None = None
            if (choice == "a" and offer.approve) or (choice == "g" and offer.grant):
                # a grant "for this session": later calls of this tool, as the policy bounds it
                approval = self.agent.approval(interrupt, grant=Grant() if choice == "g" else None)
                if await self._confirmed(self.agent.view(interrupt), "approve"):
                    return approval
            elif choice == "d" and offer.deny:
                return await self._read_reason(interrupt)
            elif choice == "r" and offer.respond:
                answer = await self._read_response(interrupt)
            elif choice == "e" and offer.edit:  # the console's edit: approve the edited input
                answer = await self._read_edited(interrupt)
            elif choice == "s":
                return None
            else:
                self.say(f"type one of: {offer.choices()}")
            if answer is not None:
                return answer

    async def _read_response(self, interrupt: PendingInterrupt) -> ToolResponse | None:
        """The answer given as JSON, checked as the resume checks it; None: none given (back to
        the choices)."""
        tool = self.agent.tools.get(interrupt.name)
        self.note(f"expected: {shape(asked_schema(interrupt, tool))}")  # (a question's, where it is one)

        def refusal(output: Any) -> str | None:
            return unkept(interrupt.respond(output), self.agent) or answer_refusal(interrupt, tool, output)

        output = await self._read_checked(self._read_json, "answer JSON> ", refusal)
        if output is _NOTHING or not await self._confirmed(self.agent.view(interrupt), "answer"):
            return None
        return interrupt.respond(output)

    async def _read_edited(self, interrupt: PendingInterrupt) -> ToolResponse | ToolRestart | None:
        """The approval of an edited input, checked as the resume checks it; None: none given
        (back to the choices)."""
        self.note(f"current input: {shown_json(interrupt.input, None)}")
        tool = self.agent.tools.get(interrupt.name)
        validate = tool.validate_input if tool else None

        def approving(new_input: Any) -> ToolResponse | ToolRestart:
            return self.agent.approvals.approval_by_ref(
                interrupt.ref, interrupt.name, pause_id=interrupt.pause_id, replace_input=new_input, grant=None
            )

        def refusal(new_input: Any) -> str | None:
            return unkept(approving(new_input), self.agent) or schema_refusal(validate, new_input)

        new_input = await self._read_checked(self._read_edit, "new input JSON> ", refusal)
        if new_input is _NOTHING:
            return None
        edited = self.agent.view(dataclasses.replace(interrupt, input=new_input))  # what runs
        if await self._confirmed(edited, "approve", f" (your edit of “{self.agent.view(interrupt).title}”)"):
            return approving(new_input)
        return None

    async def _confirmed(self, view: PauseView, doing: str, edit: str = "") -> bool:
        """True when the pause is not high risk, or the person says yes to ``doing`` it (approve,
        answer; ``edit``: what an edited input replaces, ``view`` being the edited one's), as the
        console confirms every such decision."""
        if view.risk != "high":
            return True
        line = await self.ask(self._style(f"{doing} “{view.title}”{edit}? [y/N] ", "1;31"))
        if line is not None and line.strip().lower() in ("y", "yes"):
            return True
        if self._in.isatty():
            self.note("not approved" if doing == "approve" and not edit else "not decided")
        elif doing == "approve" and not edit:  # a script said a, then not y: say what it must send
            self.note("not approved: a high-risk approval needs y on the line after a (printf 'a\\ny\\n' | ...)")
        else:
            self.note("not decided: a decision on a high-risk pause needs y on the line after its JSON")
        return False

    async def _read_checked(
        self, read: Callable[[str], Awaitable[Any]], prompt: str, refusal: Callable[[Any], str | None]
    ) -> Any:
        """A JSON value ``read`` gets at ``prompt`` that ``refusal`` finds nothing wrong with (the
        checks the resume runs on it): one it refuses is asked again now (as malformed JSON is),
        not once every pause of the turn is answered, when the resume would refuse the whole
        batch and drop the good answers; ``_NOTHING`` to give up (an empty line: back to the
        choices)."""
        while True:
            value = await read(prompt)
            if value is _NOTHING:
                return value
            why = refusal(value)
            if why is None:
                return value
            self.say(self._style(plain(f"refused: {why}; try again"), "31"))

    async def _read_edit(self, prompt: str) -> Any:
        """The edited input, a JSON value that is not null (asked again); ``_NOTHING`` to give up."""
        while True:
            new_input = await self._read_json(prompt)
            if new_input is not None:
                return new_input
            self.say(self._style("null is no input: type the edited input, a JSON object", "31"))

    async def _read_reason(self, interrupt: PendingInterrupt) -> ToolResponse | None:
        """The denial, with why (the model is told): asked until the reason is not empty and one
        the resume keeps; None at end of input."""
        while True:
            reason = await self.ask("reason> ")
            if reason is None:
                return None
            if not reason.strip():
                self.say("a denial needs a reason: the model is told it")
                continue
            denial = interrupt.deny(reason.strip())
            why = unkept(denial, self.agent)
            if why is None:
                return denial
            self.say(self._style(plain(f"refused: {why}; try again"), "31"))

    async def _read_json(self, prompt: str) -> Any:
        """A JSON value, over as many lines as it takes; an empty line gives up (``_NOTHING``)."""
        text = ""
        while True:
            line = await self.ask(prompt if not text else "... ")
            if line is None or not line.strip():
                return _NOTHING
            text += line + "\n"
            try:
                return read_json_text(text)  # as every surface reads it: a name given twice is refused
            except json.JSONDecodeError as exc:
                if exc.pos < len(text.rstrip()):
                    self.say(self._style(f"not JSON: {exc.msg} (line {exc.lineno}); try again", "31"))
                    text = ""
            except (ValueError, RecursionError) as exc:  # as the server refuses them, never a traceback
                if isinstance(exc, RecursionError):
                    why = "nested too deeply to read"
                else:
                    why = "an integer of over 4,300 digits" if "integer string conversion" in str(exc) else str(exc)
                self.say(self._style(f"not JSON this chat can read: {why}; try again", "31"))
                text = ""


_NOTHING: Any = object()
# A whole line names a choice: "and thanks" typed at the prompt is not an approval.
_CHOICES = {word: word[0] for word in ("approve", "grant", "deny", "respond", "edit", "skip")} | {
    letter: letter for letter in "agdres"
}


def _stop_as_ctrl_c() -> list[signal.Signals]:
    """Make SIGTERM and SIGHUP interrupt the chat as Ctrl+C does (``asyncio.run`` cancels the
    chat, which records what it cut short); the signals so taken (none off the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return []
    loop = asyncio.get_running_loop()
    taken = []
    for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is not None:
            loop.add_signal_handler(sig, signal.raise_signal, signal.SIGINT)
            taken.append(sig)
    return taken
