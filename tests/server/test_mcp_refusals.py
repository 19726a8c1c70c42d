"""What the server refuses before any route runs, at ``/mcp``: a JSON-RPC error there, as every
refusal at ``/mcp`` is, so that an MCP client shows the reason; the app's own error body on
every other route. Over real HTTP on loopback, with the MCP SDK's client, the app mounted under
a prefix as ``app.mount("/pp", create_app(...))`` mounts it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from starlette.applications import Starlette
from starlette.routing import Mount

from pausepoint import Pausepoint
from pausepoint.server import BearerTokens, create_app
from pausepoint.testing import ScriptedModel
from tests.server.harness import serve_in_thread
from tests.server.test_framing import chunked, exchange

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

AUTH = {"Authorization": "Bearer alice-token"}
LISTING = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}'


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    def factory() -> Starlette:
        ai = Pausepoint()
        ai.define_agent(name="bot", model=ScriptedModel(["hi"]))
        app = create_app(ai, auth=BearerTokens({"alice-token": "alice"}), mcp=True, console=False, webhooks=False)
        return Starlette(routes=[Mount("/pp", app)])

    with serve_in_thread(factory) as url:
        yield url


def leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


async def test_a_coded_body_reaches_the_mcp_client_as_the_reason_it_was_refused(served: str) -> None:
    """Found by a probe: a ``Content-Encoding`` at ``/mcp`` got the REST error body, which the
    SDK's client replaces with "Server returned an error response"."""
    headers = {**AUTH, "Content-Encoding": "gzip"}
    with pytest.raises(BaseException) as raised:  # the SDK raises it from its task groups
        async with Client(
            streamable_http_client(f"{served}/pp/mcp", http_client=httpx2.AsyncClient(headers=headers))
        ) as c:
            await c.list_tools()
    (said,) = {str(leaf) for leaf in leaves(raised.value) if isinstance(leaf, MCPError)}
    assert said == "unsupported_content_coding: Content-Encoding 'gzip' is not supported: send the body uncoded"
    async with httpx2.AsyncClient(timeout=30) as raw:
        reply = await raw.post(
            f"{served}/pp/mcp", content=LISTING, headers={**headers, "Content-Type": "application/json"}
        )
    assert reply.status_code == 415
    body = reply.json()
    assert (body["jsonrpc"], body["id"], body["error"]["code"], body["error"]["message"]) == ("2.0", None, -32600, said)
    assert body["error"]["data"]["code"] == "unsupported_content_coding"


async def test_a_query_parameter_given_twice_at_mcp_is_a_json_rpc_error(served: str) -> None:
    async with httpx2.AsyncClient(timeout=30) as raw:
        reply = await raw.post(
            f"{served}/pp/mcp?x=1&x=2", content=LISTING, headers={**AUTH, "Content-Type": "application/json"}
        )
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert reply.json()["jsonrpc"] == "2.0" and error["code"] == -32600
    assert error["data"]["code"] == "invalid_request" and "'x' is given more than once" in error["message"]


def test_a_transfer_coding_other_than_chunked_at_mcp_is_a_json_rpc_error(served: str) -> None:
    head = (
        f"POST /pp/mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {AUTH['Authorization']}\r\n"
        "Content-Type: application/json\r\nTransfer-Encoding: gzip, chunked\r\n"
    ).encode()
    status, headers, content = exchange(served, head, chunked(LISTING))
    assert (status, headers[b"connection"]) == (501, b"close")
    body: dict[str, Any] = json.loads(content)
    assert body["jsonrpc"] == "2.0" and body["error"]["data"]["code"] == "unsupported_transfer_coding"


async def test_every_other_route_refuses_in_the_apps_error_body(served: str) -> None:
    async with httpx2.AsyncClient(timeout=30) as raw:
        coded = await raw.post(
            f"{served}/pp/v1/agents/bot/sessions", json={"message": "hi"}, headers={**AUTH, "Content-Encoding": "gzip"}
        )
        twice = await raw.get(f"{served}/pp/v1/agents/bot/sessions?limit=1&limit=2", headers=AUTH)
    assert coded.status_code == 415 and coded.json()["error"]["code"] == "unsupported_content_coding"
    assert twice.status_code == 400 and twice.json()["error"]["code"] == "invalid_request"
    assert "jsonrpc" not in coded.json() and "jsonrpc" not in twice.json()
