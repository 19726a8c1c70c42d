"""One route table: ``/openapi.json`` describes exactly the routes the app serves."""

from __future__ import annotations

import re

import httpx
from starlette.routing import Match, Route

from examples import payments
from pausepoint import Pausepoint
from pausepoint.errors import ModelError
from pausepoint.server import BearerTokens, create_app
from pausepoint.testing import ScriptedModel


async def test_the_document_describes_exactly_the_routes_served():
    app = create_app(payments.ai, auth=BearerTokens({"t": "alice"}), metrics=True)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
        paths = (await http.get("/openapi.json")).json()["paths"]
    documented = {(method.upper(), path) for path, item in paths.items() for method in item}
    served = [route for route in app.routes if isinstance(route, Route) and route.methods]

    def serves(route: Route, method: str, path: str) -> bool:
        concrete = re.sub(r"\{(\w+)\}", r"\1", path)  # each parameter stands for a value
        return route.matches({"type": "http", "method": method, "path": concrete})[0] == Match.FULL

    for method, path in documented:
        assert sum(serves(route, method, path) for route in served) == 1, f"{method} {path}: described, not served"
    undescribed = sorted(
        (method, route.path)
        for route in served
        for method in route.methods - {"HEAD"}
        if not any(serves(route, method, path) for m, path in documented if m == method)
    )
    # what is not the REST API: the document itself, Genkit's wire, Prometheus, the console
    assert undescribed == [
        ("GET", "/"),
        ("GET", "/console"),
        ("GET", "/metrics"),
        ("GET", "/openapi.json"),
        ("POST", "/agents/{agent}"),
        ("POST", "/agents/{agent}/abort"),
        ("POST", "/agents/{agent}/getSnapshot"),
    ]
    answers = [path for method, path in documented if path.startswith("/v1/agents/{agent}/sessions/{session_id}/inter")]
    assert sorted(p.rsplit("/", 1)[1] for p in answers) == ["approve", "deny", "interrupts", "respond", "restart"]


def test_no_two_routes_answer_the_same_request_so_matching_the_busy_ones_first_changes_nothing():
    app = create_app(payments.ai, auth=BearerTokens({"t": "alice"}), metrics=True, mcp=True)
    routes = [route for route in app.routes if isinstance(route, Route)]
    for route in routes:
        concrete = re.sub(r"\{(\w+)(?::\w+)?\}", r"\1", route.path)  # each parameter stands for a value
        for method in sorted(route.methods or {"GET", "POST"}):
            scope = {"type": "http", "method": method, "path": concrete}
            answering = [other.path for other in routes if other.matches(scope)[0] == Match.FULL]
            assert answering == [route.path], f"{method} {concrete}"
    # the routes that run turns come first; the rest keep the table's (and the document's) order
    first = [(sorted(route.methods or ()), route.path) for route in routes[:5]]
    assert first == [
        (["POST"], "/v1/agents/{agent}/sessions"),
        (["POST"], "/v1/agents/{agent}/sessions/{session_id}/messages"),
        (["POST"], "/v1/agents/{agent}/sessions/{session_id}/resume"),
        (["POST"], "/v1/agents/{agent}/sessions/{session_id}/interrupts/{ref}/{action:str}"),
        (["POST"], "/agents/{agent}"),
    ]
    assert routes[5].path == "/openapi.json"


async def test_the_document_says_its_bounds_in_json_schema_words():
    """Every bound the server holds a request to is one a JSON Schema validator reads (found by a
    probe: ``gt``/``le`` on a union, which validators ignore; a page size without its maximum)."""
    app = create_app(payments.ai, auth=BearerTokens({"t": "alice"}))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
        doc = (await http.get("/openapi.json")).json()

    def keys(node: object) -> set[str]:
        if isinstance(node, dict):
            return set(node) | {k for value in node.values() for k in keys(value)}
        return {k for value in node for k in keys(value)} if isinstance(node, list) else set()

    assert not keys(doc) & {"gt", "ge", "lt", "le", "min_length", "max_length"}
    ttl = doc["components"]["schemas"]["GrantBody"]["properties"]["ttl_seconds"]
    bounded = {s["type"]: s for s in ttl["anyOf"] if s.get("type") in ("number", "integer")}
    assert all(s["maximum"] == 10**9 for s in bounded.values())
    # a microsecond at least, as a duration is kept (found by a probe: 1e-7 passed, then was refused)
    assert (bounded["number"]["minimum"], bounded["integer"]["exclusiveMinimum"]) == (1e-6, 0)
    uses = doc["components"]["schemas"]["GrantBody"]["properties"]["uses"]
    assert [(s["minimum"], s["maximum"]) for s in uses["anyOf"] if s.get("type") == "integer"] == [(1, 10**9)]
    params = {p["name"]: p["schema"] for p in doc["paths"]["/v1/agents/{agent}/sessions"]["get"]["parameters"]}
    assert (params["limit"]["maximum"], params["offset"]["maximum"]) == (500, 10**9)


async def test_without_a_token_no_route_tells_an_agent_that_exists_from_one_that_does_not():
    """server.md: auth runs before anything is looked up, so without a token every route answers
    alike (found by a probe: /tools/{tool}/validate said "no agent named 'nosuch'", 404, where an
    agent that exists got 401)."""
    app = create_app(payments.ai, auth=BearerTokens({"t": "alice"}))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
        doc = (await http.get("/openapi.json")).json()
        for path, operations in doc["paths"].items():
            if "{agent}" not in path:
                continue
            for method in operations:
                said = set()
                for agent in ("paymentsAgent", "nosuch"):
                    url = re.sub(r"\{[a-z_]+\}", "x", path.replace("{agent}", agent))
                    reply = await http.request(method.upper(), url, json={})
                    said.add((reply.status_code, reply.json()["error"]["code"]))
                assert said == {(401, "unauthenticated")}, (method, path, said)


async def test_a_body_whose_every_field_is_optional_may_be_left_out_as_the_document_says():
    """Found by a probe (schemathesis): every body was documented as required, while a cancel or
    an approval with no body is taken."""
    app = create_app(payments.ai, auth=BearerTokens({"t": "alice"}))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
        doc = (await http.get("/openapi.json")).json()
    needed = {
        path.rsplit("/", 1)[-1]: op["requestBody"]["required"]
        for path, ops in doc["paths"].items()
        for op in ops.values()
        if "requestBody" in op
    }
    assert needed["messages"] is needed["sessions"] is True  # a message is required
    assert not any(needed[verb] for verb in ("cancel", "approve", "deny", "restart", "resume", "revoke"))


async def test_every_route_documents_the_statuses_any_request_or_its_model_may_get():
    """Found by a probe: the feed answers 401 without a token, a message whose model fails 502,
    a gzip-coded body 415 — none of them in the document, so a client generated from it (or
    schemathesis' status-code check) took documented answers for undocumented ones."""
    ai = Pausepoint()
    ai.define_agent(name="failing", model=ScriptedModel([ModelError("the provider failed")]))
    app = create_app(ai, auth=BearerTokens({"t": "alice"}))
    token = {"Authorization": "Bearer t"}
    messages = "/v1/agents/{agent}/sessions/{session_id}/messages"
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
        doc = (await http.get("/openapi.json")).json()
        answered = {
            ("get", "/v1/feed"): (await http.get("/v1/feed")).status_code,
            ("post", messages): (
                await http.post("/v1/agents/failing/sessions/s1/messages", json={"message": "hi"}, headers=token)
            ).status_code,
            ("post", "/v1/agents/{agent}/sessions"): (
                await http.post(
                    "/v1/agents/failing/sessions", content=b"\x1f\x8b", headers={**token, "Content-Encoding": "gzip"}
                )
            ).status_code,
        }
    assert answered == {("get", "/v1/feed"): 401, ("post", messages): 502, ("post", "/v1/agents/{agent}/sessions"): 415}
    for (method, path), status in answered.items():
        assert str(status) in doc["paths"][path][method]["responses"], (method, path, status)
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            declared = operation["responses"]
            assert {"500", "503"} <= set(declared), (method, path)
            assert ("401" in declared) == (operation.get("security") != []), (method, path)
            if "text/event-stream" in declared["200"].get("content", {}) and path != "/v1/feed":
                assert {"429", "502", "504"} <= set(declared), (method, path)
