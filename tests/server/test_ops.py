"""Health, readiness and metrics routes; the runtime without OpenTelemetry or prometheus-client."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import httpx

from examples import banking
from pausepoint.server import BearerTokens, create_app
from pausepoint.stores import PostgresSessionStore
from tests.server.harness import serve_in_thread
from tests.server.private_postgres import private_postgres

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


async def test_readyz_answers_within_its_timeout_while_postgresql_is_frozen():
    """A PostgreSQL server that accepts connections and never answers (its processes stopped):
    every probe says 503 within the readiness timeout (5 s), the first one too, whose query was
    already on its way to the frozen server; once it runs again, the store is ready again."""
    with private_postgres() as postgres:

        def factory():
            ai, _ = banking.build(PostgresSessionStore(postgres.url))
            return create_app(ai, auth=BearerTokens({"t": "alice"}), expiry_interval=None, webhooks=False)

        with serve_in_thread(factory) as base:
            # The readiness timeout, and a margin for a loaded machine: a guard against a hang.
            async with httpx.AsyncClient(timeout=5.0 + 3.0) as http:
                assert (await http.get(base + "/readyz")).status_code == 200  # connected, the pool open
                postgres.freeze()
                try:
                    probes = [await http.get(base + "/readyz") for _ in range(3)]
                finally:
                    postgres.thaw()
                for _ in range(50):  # the pool's connections come back as the server answers again
                    ready = await http.get(base + "/readyz")
                    if ready.status_code == 200:
                        break
                    await asyncio.sleep(0.1)
    for probe in probes:
        assert probe.status_code == 503
        assert probe.json()["stores"] == [{"backend": "PostgresSessionStore", "ok": False, "error": "TimeoutError"}]
    assert ready.status_code == 200, ready.text


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
