"""``Pausepoint``: where tools, interrupts, models and agents are defined."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Collection, Sequence
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from pydantic import BaseModel

from ..approval._policy import ApprovalPolicy
from ..content._jsondata import JsonLimits
from ..content._messages import TextPart
from ..errors import DefinitionError, ModelNotFound
from ..models._model import FunctionModel, Model, ModelFunction, Plugin
from ..session._durations import SAID, duration
from ..session._grants import Grant
from ..stores import InMemorySessionStore, SessionStore
from ..tools._display import PauseDisplay
from ..tools._tool import Check, Interrupt, Tool
from ..turn._telemetry import Telemetry
from ..webhooks import Webhook, check_names
from ._agent import Agent, Clock, ExpiryPolicy, deny_on_expiry
from ._portal import run_sync

if TYPE_CHECKING:
    from ..mcp import ApprovalSpec, McpConnection

__all__ = ["Pausepoint"]

F = TypeVar("F", bound=Callable[..., Any])


def _utc_now() -> datetime:
    return datetime.now(UTC)


class Pausepoint:
    """The application object: define tools, interrupts, models and agents on it.

        ``plugins`` resolve ``provider/model`` names (see ``pausepoint.models``). ``clock`` returns
        the current time as an aware datetime; inject one to test expiry. ``webhooks`` are told
        about every agent's events (``pausepoint.webhooks``); ``telemetry`` sets up tracing and
        metrics (default: OpenTelemetry spans when ``opentelemetry-api`` is installed, no metrics).
    ``approval`` is the ``ApprovalPolicy`` of every agent (after the agent's own).

        ``await ai.aclose()`` (or ``async with Pausepoint(...) as ai:``) releases what the app holds:
        the plugins' connections and the agents' stores. ``create_app``'s server does it when it
        stops.
    """

    def __init__(
        self,
        plugins: Sequence[Plugin] = (),
        *,
        clock: Clock = _utc_now,
        webhooks: Sequence[Webhook] = (),
        telemetry: Telemetry | None = None,
        approval: ApprovalPolicy | None = None,
        model: str | Model | None = None,
    ) -> None:
        check_names(webhooks)
        if approval is not None and not isinstance(approval, ApprovalPolicy):
            raise DefinitionError(f"approval must be an ApprovalPolicy, not {approval!r}")
        self.approval = approval
        #: the model of an agent defined without one (as Genkit's ``Genkit(model=...)``)
        self.model = model
        self.plugins = list(plugins)
        _check_prefixes(self.plugins)
        self.clock = clock
        self.webhooks = list(webhooks)
        self.telemetry = telemetry if telemetry is not None else Telemetry()
        self._models: dict[str, Model] = {}
        self._tools: dict[str, Tool] = {}
        self._agents: dict[str, Agent] = {}

    # -- tools ----------------------------------------------------------------------------------

    @overload
    def tool(self, fn: F, /) -> Tool: ...

    @overload
    def tool(
        self,
        fn: str | None = None,
        description_: str | None = None,
        /,
        *,
        name: str | None = None,
        description: str | None = None,
        allow_input_edits: bool = False,
        idempotent: bool = False,
        display: PauseDisplay | None = None,
        requires_approval: bool | Check = False,
    ) -> Callable[[F], Tool]: ...

    def tool(
        self,
        fn: F | str | None = None,
        description_: str | None = None,
        /,
        *,
        name: str | None = None,
        description: str | None = None,
        allow_input_edits: bool = False,
        idempotent: bool = False,
        display: PauseDisplay | None = None,
        requires_approval: bool | Check = False,
    ) -> Tool | Callable[[F], Tool]:
        """Decorator turning a function into a tool (``@ai.tool()`` or ``@ai.tool``).

        The input is one pydantic model parameter or plain typed parameters; an optional
        parameter annotated ``ToolRunContext`` receives the call's context. The name defaults
        to the function's, the description to its docstring. ``allow_input_edits`` lets an
        answer restart the call with edited input. ``idempotent`` says running the tool twice
        does no harm: its calls are then not written down before they run, and a call whose
        process died mid-run is run again instead of being reported as of unknown outcome.
        ``display`` says how the tool's pauses read to a person (``PauseDisplay``).
        ``requires_approval`` (True, or a predicate of the validated input and the run context,
        sync or async) pauses every call — or those the predicate picks — *before* the tool
        runs; approving runs it with exactly the arguments shown (see ``ApprovalPolicy``).
        As in Genkit, the name and the description may also be given first, by position
        (``@ai.tool("weather", "The weather in a city")``).
        """
        if isinstance(fn, str):  # Genkit's ai.tool(name, description)
            if name is not None or (description is not None and description_ is not None):
                raise DefinitionError(f"tool {fn!r}: give its name and description once, by position or by keyword")
            name, fn = fn, None
            description = description if description is not None else description_
        elif description_ is not None:
            raise DefinitionError("ai.tool(name, description): the name comes first when the description is given")

        def define(f: F) -> Tool:
            tool = Tool(
                f,
                name=name,
                description=description,
                allow_input_edits=allow_input_edits,
                idempotent=idempotent,
                display=display,
                requires_approval=requires_approval,
            )
            return self._register(tool)

        return define(fn) if fn is not None else define

    def _named_tool(self, agent: str, name: str) -> Tool:
        tool = self._tools.get(name)
        if tool is None:
            known = ", ".join(sorted(self._tools)) or "none yet"
            raise DefinitionError(f"agent {agent!r}: no tool named {name!r} is defined (defined: {known})")
        return tool

    def define_interrupt(
        self,
        name: str,
        *,
        description: str = "",
        input_schema: type[BaseModel] | None = None,
        output_schema: type[Any] | None = None,
        ttl: timedelta | float | None = None,
        allow_input_edits: bool = False,
        display: PauseDisplay | None = None,
        approves: Callable[[Any], Grant | None] | None = None,
    ) -> Tool:
        """A tool that always pauses: the model fills ``input_schema``; a person answers.

        ``respond()`` answers are validated against ``output_schema`` when given. ``ttl`` bounds
        how long each pause waits (see the agent's ``on_expiry``). ``display`` says how its
        pauses read to a person (``PauseDisplay``: title, summary, fields, risk).
        ``approves(input)`` returns the ``Grant`` a yes to this interrupt also gives — the call
        it asked about, bounded to exactly its arguments — so that call is not asked about
        twice (None: nothing). It is shown with the pause and recorded with the yes.
        """
        if not (isinstance(input_schema, type) and issubclass(input_schema, BaseModel)):
            given = "none" if input_schema is None else getattr(input_schema, "__name__", type(input_schema).__name__)
            raise DefinitionError(
                f"interrupt {name!r}: input_schema must be a pydantic model class (what the model fills "
                f"in, validated on every call), not {given}; a JSON schema dict is not taken"
            )
        if isinstance(output_schema, dict):
            raise DefinitionError(
                f"interrupt {name!r}: output_schema must be a type (a pydantic model class, say: what "
                "respond() output is validated as), not a dict; a JSON schema dict is not taken"
            )
        signal_ttl = None if ttl is None else duration(ttl, seconds=True)
        if ttl is not None and signal_ttl is None:
            raise DefinitionError(f"interrupt {name!r}: ttl must be {SAID}, or that many seconds; not {ttl!r}")

        async def pause(_input: BaseModel) -> None:
            raise Interrupt(ttl=signal_ttl)

        pause.__name__ = name
        tool = Tool(
            pause,
            name=name,
            description=description,
            input_model=input_schema,
            output_schema=output_schema,
            allow_input_edits=allow_input_edits,
            idempotent=True,  # it only pauses: nothing happens twice
            pauses_only=True,
            display=display,
            approves=approves,
        )
        return self._register(tool)

    def mcp_tools(
        self,
        server: McpConnection,
        *,
        prefix: str = "",
        include: Collection[str] | Callable[[Any], bool] | None = None,
        exclude: Collection[str] = (),
        requires_approval: ApprovalSpec = False,
        idempotent: bool | Collection[str] = False,
        allow_input_edits: bool | Collection[str] = False,
    ) -> list[Tool]:
        """The tools an MCP server offers, as tools for agents (``pip install 'pausepoint[mcp]'``).

        Connects to ``server`` (``pausepoint.mcp.McpConnection.stdio(...)`` or ``.http(...)``)
        and lists its tools now: each becomes a tool named ``prefix + its name`` whose input
        schema is the server's JSON Schema (validated with ``jsonschema``; fingerprinted, so a
        pause taken on a definition the server later changed is refused when answered).
        ``include`` (names, or a predicate on the SDK's ``Tool``) and ``exclude`` (names) choose
        which. ``requires_approval`` makes calls pause before they reach the server: ``True``
        (every tool), names, a mapping from name to a bool or a predicate on the arguments, or
        a function ``(name, arguments) -> bool`` — it is each tool's ``requires_approval``, so
        the agent's ``ApprovalPolicy`` (rules, grants, quorum, separation of duties) applies as
        to any tool; approve with ``agent.approval(interrupt)``. ``idempotent`` / ``allow_input_edits``: as
        for ``@ai.tool()``, for every tool (a bool) or the tools named. A server's question
        during a call (elicitation) is a pause answered with ``respond(content)`` or ``deny()``.

        Lists synchronously (also at import time); inside a running event loop it blocks until
        the listing is done — prefer ``await ai.mcp_tools_async(...)`` there. Raises
        ``DefinitionError`` (a name that is not offered, a name already defined, an invalid
        schema) or an ``McpError`` (the server could not be reached, ``McpUnavailable``; did
        not answer, ``McpTimeout``).
        """

        async def listed() -> list[Tool]:
            try:
                return await self.mcp_tools_async(
                    server,
                    prefix=prefix,
                    include=include,
                    exclude=exclude,
                    requires_approval=requires_approval,
                    idempotent=idempotent,
                    allow_input_edits=allow_input_edits,
                )
            finally:
                await server.aclose()  # the calls open their own connection, on their own loop

        return run_sync(listed())

    async def mcp_tools_async(
        self,
        server: McpConnection,
        *,
        prefix: str = "",
        include: Collection[str] | Callable[[Any], bool] | None = None,
        exclude: Collection[str] = (),
        requires_approval: ApprovalSpec = False,
        idempotent: bool | Collection[str] = False,
        allow_input_edits: bool | Collection[str] = False,
    ) -> list[Tool]:
        """``mcp_tools``, awaited: the connection it opens stays open for the tools' calls."""
        from ..mcp._tools import load_tools

        tools = await load_tools(
            server,
            prefix=prefix,
            include=include,
            exclude=exclude,
            requires_approval=requires_approval,
            idempotent=idempotent,
            allow_input_edits=allow_input_edits,
        )
        taken = [t.name for t in tools if t.name in self._tools]
        if taken:
            raise DefinitionError(
                f"a tool named {taken[0]!r} is already defined (give the MCP tools a prefix= or exclude= it)"
            )
        return [self._register(tool) for tool in tools]

    def _register(self, tool: Tool) -> Tool:
        if tool.name in self._tools:
            raise DefinitionError(f"a tool named {tool.name!r} is already defined")
        self._tools[tool.name] = tool
        return tool

    # -- models ---------------------------------------------------------------------------------

    def define_model(self, *, name: str, fn: ModelFunction) -> Model:
        """Register ``fn(request)`` or ``fn(request, on_chunk)`` as the model called ``name``."""
        if name in self._models:
            raise DefinitionError(f"a model named {name!r} is already defined")
        model = self._models[name] = FunctionModel(name, fn)
        return model

    def resolve_model(self, model: str | Model) -> Model:
        """The model object for ``model``: a defined name, a plugin's ``provider/model``, or a Model."""
        if not isinstance(model, str):
            return model
        if model in self._models:
            return self._models[model]
        for plugin in self.plugins:
            found = plugin.resolve_model(model)
            if found is not None:
                self._models[model] = found
                return found
        raise ModelNotFound(
            f"no model {model!r}: define it with define_model() or add the plugin that serves it", model=model
        )

    # -- agents ---------------------------------------------------------------------------------

    def define_agent(
        self,
        name: str,
        *,
        model: str | Model | None = None,
        tools: Sequence[Tool | str] = (),
        system: str | Sequence[str | TextPart] | None = None,
        description: str | None = None,
        store: SessionStore | None = None,
        config: dict[str, Any] | None = None,
        max_turns: int | None = 10,
        tool_errors: Literal["model", "fail"] = "model",
        allow_changed_tools: bool = False,
        on_expiry: ExpiryPolicy = deny_on_expiry,
        abandon_after: timedelta | float = timedelta(minutes=15),
        cache_size: int = 1024,
        json_limits: JsonLimits | None = None,
        abort_poll: float = 0.5,
        webhooks: Sequence[Webhook] = (),
        approval: ApprovalPolicy | None = None,
    ) -> Agent:
        """Define an agent. The model name is resolved now, once; without one, the app's
        (``Pausepoint(model=...)``).

        ``system`` is the system prompt: it goes to the model only (text, or Genkit's list of
        text parts, read as their text joined). ``description`` says what
        the agent does, for people and clients (the REST API and the console show it).
        ``max_turns`` bounds the model calls of one turn (None: the default, 10, as in Genkit).
        ``tool_errors="model"`` hands a tool's exception to the model as its result;
        ``"fail"`` ends the turn with ``AgentFinishReason.FAILED``. ``allow_changed_tools``
        accepts answers to pauses whose tool definition changed since. ``on_expiry`` maps an
        expired interrupt to the result the model sees (default: a denial). A tool call that
        has been running longer than ``abandon_after`` (a ``timedelta`` or seconds) without a
        recorded result is presumed lost with its process: the next ``send`` or empty
        ``resume`` records it as of unknown outcome (or runs it again, for an idempotent tool).
        ``json_limits`` bounds the JSON data its sessions accept — messages, answers, model
        output, tool results (``JsonLimits()``: 64 levels deep, integers of 640 digits, strings
        as long as the store's records allow).
        A detached turn (``Chat.detach``) looks in the log every ``abort_poll`` seconds for an
        abort asked by another process. ``webhooks`` are told about this agent's events, beside
        the app's. A tool may be named instead of given, as in Genkit (``tools=["userApproval"]``).
        """
        if name in self._agents:
            raise DefinitionError(f"an agent named {name!r} is already defined")
        resolved = [self._named_tool(name, tool) if isinstance(tool, str) else tool for tool in tools]
        for tool in resolved:
            if not isinstance(tool, Tool):
                raise DefinitionError(f"agent {name!r}: {tool!r} is not a tool (decorate it with @ai.tool())")
        if approval is not None and not isinstance(approval, ApprovalPolicy):
            raise DefinitionError(f"agent {name!r}: approval must be an ApprovalPolicy, not {approval!r}")
        policy = approval + self.approval if approval and self.approval else approval or self.approval
        known = {id(w): w for w in self.all_webhooks()}
        check_names([*known.values(), *(w for w in webhooks if id(w) not in known)])
        chosen = model if model is not None else self.model
        if chosen is None:
            raise DefinitionError(f"agent {name!r} has no model: give it model=, or the app Pausepoint(model=...)")
        agent = Agent(
            name=name,
            model=self.resolve_model(chosen),
            tools=resolved,
            store=store if store is not None else InMemorySessionStore(),
            clock=self.clock,
            system=system_prompt(name, system),
            description=description,
            config=config,
            max_turns=max_turns,
            tool_errors=tool_errors,
            allow_changed_tools=allow_changed_tools,
            on_expiry=on_expiry,
            abandon_after=abandon_after,
            cache_size=cache_size,
            json_limits=json_limits,
            abort_poll=abort_poll,
            webhooks=[*self.webhooks, *webhooks],
            telemetry=self.telemetry,
            approval=policy,
            known_tools=set(self._tools),
        )
        self._agents[name] = agent
        return agent

    def add_webhook(self, webhook: Webhook) -> None:
        """Add ``webhook`` to the app after its agents were defined, as if ``Pausepoint`` had
        been given it: every agent defined now that it wants (``webhook.agents``; None: all)
        tells it about its events from now on (``Agent.add_webhook``), and so does every agent
        defined later. Raises ``DefinitionError`` when the app or one of its agents has a webhook
        of that name already."""
        check_names([*self.all_webhooks(), webhook])
        self.webhooks.append(webhook)
        for agent in self._agents.values():
            if webhook.agents is None or agent.name in webhook.agents:
                agent.add_webhook(webhook)

    def all_webhooks(self) -> list[Webhook]:
        """Every webhook of the app and of its agents, each once."""
        found = {id(w): w for w in self.webhooks}
        for agent in self._agents.values():
            found.update((id(w), w) for w in agent.webhooks)
        return list(found.values())

    @property
    def agents(self) -> dict[str, Agent]:
        """The agents defined on this app, by name."""
        return dict(self._agents)

    # -- lifecycle ------------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close every plugin that can be closed (its ``aclose()``, e.g. the providers' HTTP
        connections, or a local model's memory) and every agent's store, each once.

        Plugins make their clients again if used later; stores may not be used afterwards (see
        ``SessionStore.close``). Every one is closed even if another fails; the first failure
        is raised after. Turns still running in the background here (detached, streamed, or
        answering a request a server stopped waiting for) are cancelled first, and their stores
        closed once they ended: a tool they leave running is recorded as cut short (of unknown
        outcome; its turn ends ``aborted``), so no session waits ``abandon_after`` for this process.
        """
        here = asyncio.current_task()  # (not the task closing them, if it is one of them)
        running = [t for agent in self._agents.values() for t in agent.sessions.tasks if not t.done() and t is not here]
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        closers: list[Callable[[], Any]] = []
        for plugin in self.plugins:
            close = getattr(plugin, "aclose", None)
            if callable(close):
                closers.append(close)
        stores = {id(agent.store): agent.store for agent in self._agents.values()}
        closers += [store.close for store in stores.values()]
        failure: BaseException | None = None
        for close in closers:
            try:
                result = close()
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:
                failure = failure or exc
        if failure is not None:
            raise failure

    async def __aenter__(self) -> Pausepoint:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


def system_prompt(agent: str, system: object) -> str | None:
    """``system`` as the text the model is given: text, or (as Genkit takes it) a list of text
    parts and strings, joined; ``DefinitionError`` for anything else."""
    if system is None or isinstance(system, str):
        return system
    if isinstance(system, list | tuple) and all(isinstance(part, str | TextPart) for part in system):
        return "".join(part if isinstance(part, str) else part.text for part in system)
    raise DefinitionError(f"agent {agent!r}: system must be text, or a list of text parts, not {system!r}")


def _check_prefixes(plugins: Sequence[Plugin]) -> None:
    """Raise ``DefinitionError`` when two plugins serve one prefix (``openai/...``): the first
    would take every name of the second, its server and key, without a word."""
    seen: dict[str, Plugin] = {}
    for plugin in plugins:
        prefix = getattr(plugin, "prefix", None)
        if not isinstance(prefix, str):
            continue
        if prefix in seen:
            raise DefinitionError(
                f"two plugins serve the prefix {prefix!r} (a {type(seen[prefix]).__name__} and a "
                f"{type(plugin).__name__}): give one another (OpenAI.compatible(prefix, base_url) names its own)"
            )
        seen[prefix] = plugin
