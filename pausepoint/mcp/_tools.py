"""MCP tools as pausepoint tools: listing a server, and what one call does.

``load_tools`` lists a server's tools and makes each an ``McpTool`` — a ``Tool`` whose input
model is the server's JSON Schema (``_schema``), so the model is shown that schema, the runtime
validates arguments with it, and every pause's fingerprint covers it. A call:

1. checks that the server still offers the tool as it was defined (after every new connection
   and every ``tools/list_changed`` notice; and, for a call that paused — approved, say —
   always, by listing the tools again: a server redeployed behind the same HTTP connection
   says nothing, and the call must reach the definition it was approved on; a tool last seen
   changed is listed again too, as the server may have gone back): a tool that changed fails
   the call without sending it, and while it is changed its fingerprint is the offered
   definition's, so pauses taken on the agent's are refused when answered
   (``ToolDefinitionChanged``) — and accepted again once the server offers the agent's
   definition again;
2. (before it runs at all, the runtime's approval gate has paused it if it needs approval —
   ``Tool.requires_approval``, from ``mcp_tools(requires_approval=...)``, and the agent's
   ``ApprovalPolicy`` — so nothing reached the server before it was approved; a tool known to
   be changed needs no approval there (``_unless_changed``): its call fails at once, unsent,
   rather than ask a person for an approval that could never be sent — so every pause records
   the agent's definition's fingerprint);
3. sends one ``tools/call`` round; a question from the server becomes a pause (``_elicitation``),
   and its answer sends the next round;
4. hands the result to the model: the text the server wrote for models (``content``), or
   the structured content when it wrote no content.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import weakref
from collections import Counter
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any

import mcp.types as types
from pydantic import BaseModel, RootModel

from ..errors import DefinitionError, McpError
from ..models._portable import portable_tool_name
from ..tools._tool import Tool, ToolRunContext, fingerprint_of
from . import _elicitation as elicitation
from ._approval import ApprovalSpec, needs_approval, unknown_names
from ._connection import McpConnection
from ._schema import output_validator, schema_model

__all__ = ["McpTool", "load_tools"]

# The code a 2026-07-28 server answers a request_state it cannot verify with (expired, or
# sealed by a server process that is gone): the round must start over.
_STALE_STATE = types.INVALID_PARAMS
_MAX_ROUNDS = 10
# A call that paused goes on against the listing its answer was compared with a moment ago
# (``refresh_definition``), rather than asking the server for it twice in one resume.
_JUST_COMPARED = 1.0


class _Catalog:
    """The tools defined from one server, and whether they still match what it offers."""

    def __init__(self, connection: McpConnection) -> None:
        self.connection = connection
        self.tools: dict[str, McpTool] = {}  # by the server's name
        self._checked: object = None  # the connection (its live state) last compared
        self._checked_at = 0.0  # when (the event loop's clock)
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()

    def listen(self) -> None:
        """Hear the server's ``tools/list_changed`` notices (once the tools are defined)."""
        self.connection.on_tools_changed.append(self.stale)

    def stale(self) -> None:
        self._checked = None

    async def check(self, *, again: bool = False, within: float = 0.0) -> None:
        """Compare the server's listing with the definitions once per connection (``again``:
        now, unless this connection's was compared less than ``within`` seconds ago)."""
        loop = asyncio.get_running_loop()
        if self._current(again, within, loop.time()):
            return
        async with self._locks.setdefault(loop, asyncio.Lock()):
            if self._current(again, within, loop.time()):
                return
            offered = {t.name: t for t in await self.connection.list_tools()}
            for name, tool in self.tools.items():
                tool._compare(offered.get(name))
            self._checked, self._checked_at = self.connection._live, loop.time()

    def _current(self, again: bool, within: float, now: float) -> bool:
        compared = self._checked is not None and self._checked is self.connection._live
        return compared and (not again or now - self._checked_at < within)


class McpTool(Tool):
    """A tool an MCP server offers, as an agent's tool (see the module docstring).

    ``mcp_name`` is the server's name for it; ``connection`` the server. Its input schema is
    the server's, exactly; its result is the text the server wrote for models (its structured
    content when it wrote none), so it declares no output schema; its fingerprint covers the
    server's input and output schemas.
    """

    #: a changed tool's call is never sent (``run``): an answer to its pause would reach nobody,
    #: so it is refused whatever ``allow_changed_tools`` says (a denial is taken)
    runs_changed = False

    def __init__(
        self,
        spec: types.Tool,
        catalog: _Catalog,
        *,
        name: str,
        requires_approval: bool | Callable[[BaseModel], bool],
        idempotent: bool,
        allow_input_edits: bool,
    ) -> None:
        self.mcp_name = spec.name
        self.connection = catalog.connection
        self._catalog = catalog
        self._changed: str | None = None
        gated = requires_approval if requires_approval is False else self._unless_changed(requires_approval)
        about = f"MCP server {catalog.connection.name!r}, tool {spec.name!r}"
        model = schema_model(spec.input_schema, title=_title(name), what=f"{about}, input schema")
        if spec.output_schema is not None:  # the SDK checks results against it: it must be usable too
            output_validator(spec.output_schema, f"{about}, output schema")
        description = spec.description or spec.title or (spec.annotations.title if spec.annotations else None) or ""
        super().__init__(
            self._call,
            name=name,
            description=description,
            allow_input_edits=allow_input_edits,
            idempotent=idempotent,
            input_model=model,
            requires_approval=gated,
        )
        # What the model sees is the text the server wrote for models (see _result), so the tool
        # declares no output schema of its own; the fingerprint covers the server's anyway.
        self.fingerprint = fingerprint_of(self.name, self.input_schema, spec.output_schema)
        self._defined = (spec.input_schema, spec.output_schema)

    def __repr__(self) -> str:
        return f"<McpTool {self.name} ({self.connection.name}:{self.mcp_name})>"

    def asks(self, pause_metadata: dict[str, Any] | None) -> bool:
        return "mcp_round" in (pause_metadata or {})  # the server's question (``elicitation.question``)

    def answer_restart(self, pause_metadata: dict[str, Any] | None, answer: Any) -> dict[str, Any] | None:
        return elicitation.handed_answer(pause_metadata, answer)

    async def refresh_definition(self) -> None:
        # Listed again: a change notice may never come (a server redeployed behind a live
        # connection; a 2026 connection delivers notices to subscribers only). A server that
        # cannot be reached now is asked again before the call is sent (``run``).
        with contextlib.suppress(McpError):
            await self._catalog.check(again=True)

    def _unless_changed(self, required: bool | Callable[[BaseModel], bool]) -> Callable[[BaseModel], Awaitable[bool]]:
        """``required`` as the approval gate asks it, for a tool the server still offers as it
        was defined; for one it changed, no approval: ``run`` fails the call at once, unsent."""

        async def check(validated: BaseModel) -> bool:
            # Listed again, whatever the connection heard: an approval — a person's, or a rule's
            # or a grant's, given without a pause — must reach the definition it was given on.
            with contextlib.suppress(McpError):  # not reachable now: ``run`` says so, unsent
                await self._catalog.check(again=True, within=0.0)
            if self._changed is not None:
                return False
            return required if isinstance(required, bool) else required(validated)

        return check

    async def _compared(self, *, again: bool, within: float = _JUST_COMPARED) -> None:
        """Compare the server's listing with the definition (``again``, ``within``: see
        ``_Catalog.check``); a tool last seen changed is listed again (unless it was less than
        ``within`` seconds ago), as the server may offer the agent's definition again."""
        await self._catalog.check(again=again, within=_JUST_COMPARED)
        if self._changed is not None:
            await self._catalog.check(again=True, within=within)

    async def run(self, validated: BaseModel, ctx: ToolRunContext) -> Any:
        assert isinstance(validated, RootModel)
        arguments: dict[str, Any] = validated.model_dump(mode="json")
        # A call that paused (for approval, or to ask) goes on against what the pause showed:
        # the server's definition now is listed again, whatever the connection has heard (or was
        # a moment ago, when its answer was taken: ``refresh_definition``).
        await self._compared(again=bool(ctx.is_resumed))
        if self._changed is not None:
            raise McpError(self._changed, server=self.connection.name, tool=self.mcp_name, outcome="not_sent")
        about = {"server": self.connection.name, "tool": self.mcp_name}
        resumed = ctx.resumed_metadata or {}
        if isinstance(resumed.get("mcp_round"), dict) and isinstance(resumed.get("elicitation"), dict):
            round_state = elicitation.answered(resumed)
            asking = elicitation.question(round_state)
            if asking is not None:
                raise asking
            return await self._rounds(arguments, round_state, about)
        return await self._rounds(arguments, None, about)

    async def _call(self, validated: BaseModel, ctx: ToolRunContext) -> Any:  # pragma: no cover - see run()
        raise AssertionError("McpTool.run calls the server itself")

    async def _rounds(
        self,
        arguments: dict[str, Any],
        round_state: dict[str, Any] | None,
        about: dict[str, Any],
    ) -> Any:
        """Call the tool, sending a round's answers if there are any, until it has a result or
        a question for a person (raised as an ``Interrupt``)."""
        for _ in range(_MAX_ROUNDS):
            try:
                result = await self.connection.call_tool(
                    self.mcp_name,
                    arguments,
                    input_responses=None if round_state is None else elicitation.responses(round_state["answers"]),
                    request_state=None if round_state is None else round_state.get("request_state"),
                )
            except McpError as exc:
                if round_state is None or exc.details.get("mcp_code") != _STALE_STATE:
                    raise
                if not self.idempotent:
                    raise McpError(
                        f"MCP server {self.connection.name!r} no longer accepts the answer to its question about "
                        f"{self.mcp_name!r} (its state expired, or the server restarted since it asked); the call "
                        "did not complete: call the tool again to start over",
                        server=self.connection.name,
                        outcome="not_completed",
                    ) from exc
                round_state = None  # idempotent: start the call over; the server asks again
                continue
            if isinstance(result, types.CallToolResult):
                return self._result(result)
            try:
                round_state = elicitation.first_round(result, about)
            except ValueError as exc:
                raise McpError(f"MCP tool {self.mcp_name!r}: {exc}", server=self.connection.name) from None
            asking = elicitation.question(round_state)
            if asking is not None:
                raise asking
            if not result.input_requests:
                await asyncio.sleep(0.05)  # "not done yet": the server asked for nothing, only to call again
        raise McpError(
            f"MCP tool {self.mcp_name!r} kept asking for more input after {_MAX_ROUNDS} rounds, the last for "
            "nothing: the call was given up; it may or may not have taken effect",
            server=self.connection.name,
            outcome="unknown",
        )

    def _result(self, result: types.CallToolResult) -> Any:
        if result.is_error:
            raise McpError(
                f"MCP tool {self.mcp_name!r} failed: {_text(result.content) or 'no details'}",
                server=self.connection.name,
                tool=self.mcp_name,
            )
        texts = [b.text for b in result.content if isinstance(b, types.TextContent)]
        if texts and len(texts) == len(result.content):
            return "\n".join(texts)  # what MCP writes for models
        if not result.content:
            return result.structured_content
        return [b.model_dump(mode="json", by_alias=True, exclude_none=True) for b in result.content]

    def _compare(self, offered: types.Tool | None) -> None:
        """Take in the server's current definition of this tool (see the module docstring)."""
        if offered is None:
            self._changed = (
                f"MCP server {self.connection.name!r} no longer offers tool {self.mcp_name!r}; the call was not sent"
            )
            self.fingerprint = fingerprint_of(self.name, {"removed": True}, None)
            return
        if (offered.input_schema, offered.output_schema) == self._defined:
            self._changed = None
            self.fingerprint = fingerprint_of(self.name, *self._defined)
            return
        self._changed = (
            f"MCP server {self.connection.name!r} changed tool {self.mcp_name!r} since the agent was defined "
            "(its schemas differ), so the call, made for the earlier definition, was not sent; define the agent "
            "again to use the new definition"
        )
        self.fingerprint = fingerprint_of(self.name, offered.input_schema, offered.output_schema)


def _text(content: list[types.ContentBlock]) -> str:
    parts = [b.text if isinstance(b, types.TextContent) else json.dumps(b.model_dump(mode="json")) for b in content]
    return "\n".join(parts)


def _title(name: str) -> str:
    return (
        "".join(part[:1].upper() + part[1:] for part in name.replace("-", "_").replace(".", "_").split("_")) + "Input"
    )


async def load_tools(
    connection: McpConnection,
    *,
    prefix: str = "",
    include: Collection[str] | Callable[[types.Tool], bool] | None = None,
    exclude: Collection[str] = (),
    requires_approval: ApprovalSpec = False,
    idempotent: bool | Collection[str] = False,
    allow_input_edits: bool | Collection[str] = False,
) -> list[McpTool]:
    """The server's tools as ``McpTool``s (see ``Pausepoint.mcp_tools`` for the options)."""
    if not isinstance(connection, McpConnection):
        raise DefinitionError(f"mcp_tools() takes an McpConnection (McpConnection.stdio/.http), not {connection!r}")
    _check_options(prefix, include, exclude, requires_approval, idempotent, allow_input_edits)
    offered = await connection.list_tools()
    _check_names(connection, offered, include, exclude, requires_approval, idempotent, allow_input_edits)
    catalog = _Catalog(connection)
    tools = [
        McpTool(
            spec,
            catalog,
            name=portable_tool_name(prefix + spec.name),
            requires_approval=needs_approval(requires_approval, spec.name),
            idempotent=_flag(idempotent, spec),
            allow_input_edits=_flag(allow_input_edits, spec),
        )
        for spec in offered
        if spec.name not in exclude
        and (include is None or (include(spec) if callable(include) else spec.name in include))
    ]
    catalog.tools = {tool.mcp_name: tool for tool in tools}
    catalog.listen()  # every tool defined: only now does the connection know the catalog
    catalog._checked = connection._live
    return tools


def _check_options(
    prefix: object, include: object, exclude: object, requires_approval: object, idempotent: object, edits: object
) -> None:
    """Refuse options of the wrong kind where they are given (``DefinitionError`` naming the
    option), before the server is asked anything: not a ``TypeError`` from inside, nor one
    string read as a collection of one-letter names."""
    if not isinstance(prefix, str):
        raise DefinitionError(f"prefix takes a string (put before each tool's name), not {prefix!r}")
    shapes = {
        "include": (include, "a collection of tool names, a predicate on the SDK's Tool, or None", True, False),
        "exclude": (exclude, "a collection of tool names", False, False),
        "requires_approval": (requires_approval, "True, False, tool names, a mapping or a predicate", True, True),
        "idempotent": (idempotent, "True, False or a collection of tool names", False, True),
        "allow_input_edits": (edits, "True, False or a collection of tool names", False, True),
    }
    for option_name, (value, takes, callable_ok, bool_ok) in shapes.items():
        a_predicate = callable(value) and not isinstance(value, Mapping)
        if (value is None and option_name == "include") or (isinstance(value, bool) and bool_ok):
            continue
        if a_predicate and callable_ok:
            continue
        if isinstance(value, str):
            raise DefinitionError(f"{option_name} takes a collection of tool names, not one string")
        if isinstance(value, bool) or not isinstance(value, Collection) or not all(isinstance(n, str) for n in value):
            raise DefinitionError(f"{option_name} takes {takes}, not {value!r}"[:300])


def _check_names(
    connection: McpConnection,
    offered: list[types.Tool],
    include: Collection[str] | Callable[[types.Tool], bool] | None,
    exclude: Collection[str],
    requires_approval: ApprovalSpec,
    idempotent: bool | Collection[str],
    allow_input_edits: bool | Collection[str],
) -> None:
    """Refuse, before anything is defined, a listing that names a tool twice, and options that
    name a tool the server does not offer."""
    listed = Counter(t.name for t in offered)
    twice = sorted(name for name, count in listed.items() if count > 1)
    if twice:
        raise DefinitionError(
            f"MCP server {connection.name!r} listed {', '.join(map(repr, twice))} twice: a server's tool names must "
            "be unique, so which definition is meant cannot be known; nothing was defined"
        )
    named = set(exclude) | (set(include) if include is not None and not callable(include) else set())
    named |= unknown_names(requires_approval)
    for flags in (idempotent, allow_input_edits):
        if not isinstance(flags, bool):
            named |= set(flags)
    missing = sorted(named - set(listed))
    if missing:
        raise DefinitionError(
            f"MCP server {connection.name!r} has no tool {', '.join(map(repr, missing))} "
            f"(it offers: {', '.join(sorted(listed)) or 'none'})"
        )


def _flag(option: bool | Collection[str], spec: types.Tool) -> bool:
    return option if isinstance(option, bool) else spec.name in option
