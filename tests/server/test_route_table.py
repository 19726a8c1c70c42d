"""One route table: ``/openapi.json`` describes exactly the routes the app serves."""

from __future__ import annotations

import re

import httpx
from starlette.routing import Match, Route

from examples import payments
from pausepoint.server import BearerTokens, create_app


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
        ("GET", "/metrics"),
        ("GET", "/openapi.json"),
        ("POST", "/agents/{agent}"),
        ("POST", "/agents/{agent}/abort"),
        ("POST", "/agents/{agent}/getSnapshot"),
    ]
    answers = [path for method, path in documented if path.startswith("/v1/agents/{agent}/sessions/{session_id}/inter")]
    assert sorted(p.rsplit("/", 1)[1] for p in answers) == ["approve", "deny", "interrupts", "respond", "restart"]
