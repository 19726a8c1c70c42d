"""``Pausepoint.aclose()``: an app releases its plugins' connections and its stores, once each,
and the server does it when it stops."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import httpx
import pytest
import uvicorn

from pausepoint import Pausepoint
from pausepoint.models.openai import OpenAI
from pausepoint.server import BearerTokens, create_app
from pausepoint.stores import InMemorySessionStore
from pausepoint.testing import ScriptedModel
from tests.models import openai_wire
from tests.models.wire_server import WireServer


class CountedStore(InMemorySessionStore):
    """A real in-memory store that counts how often it was closed."""

    def __init__(self) -> None:
        super().__init__()
        self.closed = 0

    async def close(self) -> None:
        self.closed += 1
        await super().close()


class FailingPlugin:
    """A plugin whose ``aclose`` fails: the others are closed all the same."""

    def resolve_model(self, name: str) -> None:
        return None

    async def aclose(self) -> None:
        raise RuntimeError("cannot close")


class NamesOnly:
    """A plugin that holds nothing, and so has no ``aclose``."""

    def resolve_model(self, name: str) -> None:
        return None


async def test_aclose_closes_every_plugin_and_each_store_once() -> None:
    shared, own = CountedStore(), CountedStore()
    openai = OpenAI(api_key="sk-test", base_url="http://127.0.0.1:9/v1")
    ai = Pausepoint(plugins=[NamesOnly(), FailingPlugin(), openai])
    for name, store in (("a", shared), ("b", shared), ("c", own)):
        ai.define_agent(name=name, model=ScriptedModel(["Hi."]), store=store)
    client = openai.client()
    with pytest.raises(RuntimeError, match="cannot close"):
        await ai.aclose()
    assert client.is_closed()  # closed although the plugin before it failed
    assert (shared.closed, own.closed) == (1, 1)


async def test_an_app_is_an_async_context_manager() -> None:
    store = CountedStore()
    async with Pausepoint() as ai:
        ai.define_agent(name="a", model=ScriptedModel(["Hi."]), store=store)
    assert store.closed == 1


async def test_the_server_closes_the_app_when_it_stops() -> None:
    store = CountedStore()
    with WireServer(lambda request: openai_wire.reply("Hello!", stream=bool(request.body.get("stream")))) as provider:
        plugin = OpenAI(api_key="sk-test", base_url=f"{provider.url}/v1")
        ai = Pausepoint(plugins=[plugin])
        ai.define_agent(name="greeter", model="openai/gpt-test", store=store)
        app = create_app(ai, auth=BearerTokens({"t": "alice"}))
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        serving = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:  # noqa: ASYNC110 - uvicorn says it started only by this flag
            await asyncio.sleep(0.01)
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": "Bearer t"}) as http:
            reply = await http.post("/v1/agents/greeter/sessions", json={"message": "Hi"})
        assert reply.status_code == 200, reply.text
        client: Any = plugin.client()  # the one the server's requests used (same loop)
        assert not client.is_closed() and store.closed == 0
        server.should_exit = True
        await serving
        sock.close()
    assert client.is_closed()
    assert store.closed == 1
