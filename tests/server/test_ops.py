"""Health, readiness and metrics routes; the runtime without OpenTelemetry or prometheus-client."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from examples import banking
from pausepoint.server import BearerTokens, create_app
from pausepoint.stores import PostgresSessionStore
from tests.server.harness import serve_in_thread

ROOT = Path(__file__).resolve().parents[2]


async def test_readyz_names_a_store_that_does_not_answer():
    # Nothing listens on port 9 of loopback: the store cannot connect.
    def factory():
        ai, _ = banking.build(PostgresSessionStore("postgresql://nobody@127.0.0.1:9/none"))
        return create_app(ai, auth=BearerTokens({"t": "alice"}), expiry_interval=None, webhooks=False)

    with serve_in_thread(factory) as base:
        async with httpx.AsyncClient(timeout=30) as http:
            assert (await http.get(base + "/healthz")).json() == {"status": "ok"}
            reply = await http.get(base + "/readyz")
            metrics = await http.get(base + "/metrics")
    assert reply.status_code == 503
    assert reply.json() == {
        "status": "unavailable",
        "stores": [{"backend": "PostgresSessionStore", "ok": False, "error": "store_error"}],
    }
    assert "127.0.0.1:9" not in reply.text  # what failed, not where: no connection strings
    assert metrics.status_code == 404  # metrics are off unless asked for


# Runs in a fresh interpreter where importing a package fails, as if it were not installed.
PROBE = """
import sys
class Missing:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ImportError("No module named " + repr(name))
sys.meta_path.insert(0, Missing())
import asyncio
from examples import banking
ai, agent = banking.build()
assert not ai.telemetry.tracing
async def main():
    chat = agent.chat()
    res = await chat.send("Transfer $5 to q.")
    res = await chat.resume(respond=[res.interrupts[0].respond({{"approved": True}})])
    print(res.text)
asyncio.run(main())
try:
    import pausepoint.metrics
except ImportError as exc:
    print(exc)
"""


def test_everything_works_without_opentelemetry_and_prometheus_client():
    result = subprocess.run(
        [sys.executable, "-c", PROBE.format(blocked=["opentelemetry", "prometheus_client"])],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "Transferred $5 to q.",
        "prometheus-client is not installed: pip install 'pausepoint[metrics]'",
    ]
