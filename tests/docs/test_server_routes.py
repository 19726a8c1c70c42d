"""docs/server.md names every route the server serves (a route missing there is one nobody finds)."""

from __future__ import annotations

import re

from starlette.routing import Mount, Route

from examples import payments
from pausepoint.server import BearerTokens, create_app

from .blocks import ROOT


def test_every_route_is_in_the_route_table() -> None:
    page = (ROOT / "docs" / "server.md").read_text(encoding="utf-8")
    table = "\n".join(line for line in page.splitlines() if line.startswith("| `"))
    app = create_app(payments.ai, auth=BearerTokens({"t": "alice"}), metrics=True)
    paths = {route.path for route in app.routes if isinstance(route, Route | Mount)}
    assert "/v1/agents/{agent}/sessions/{session_id}/interrupts/{ref}/{action:str}" in paths
    missing = []
    for path in sorted(paths):
        if path.endswith("{action:str}"):  # one route, an action per segment
            names = ["respond", "deny", "restart", "approve"]
        else:
            literal = [part for part in path.split("/") if part and not part.startswith("{")]
            names = [literal[-1]] if literal else []
        for name in names:
            if not re.search(rf"[/`]{re.escape(name)}\b", table):
                missing.append(f"{path} ({name})")
    assert missing == [], f"docs/server.md's route table does not name: {missing}"
