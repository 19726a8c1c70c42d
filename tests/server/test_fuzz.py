"""Fuzz the OpenAPI document with schemathesis against the running server: no 5xx, no hang."""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error

from tests.server.harness import build_app, serve_in_thread


def test_openapi_fuzzing_finds_no_server_error(tmp_path):
    spec = {"backend": "sqlite", "path": str(tmp_path / "fuzz.db")}
    with serve_in_thread(lambda: build_app(spec)) as url:
        schema = schemathesis.openapi.from_url(url + "/bank/openapi.json")
        schema.config.update(base_url=url + "/bank")
        failures: list[str] = []
        operations = [o.ok() for o in schema.get_all_operations()]
        for op in operations:
            if op.path != "/v1/feed":  # an endless stream: covered by test_feed
                fuzz(op, failures)
        assert failures == []


def fuzz(op, failures: list[str]) -> None:
    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(case=op.as_strategy())
    def check(case):
        for headers in ({"Authorization": "Bearer alice-token"}, {}):
            response = case.call(headers=headers, timeout=10)
            try:
                case.validate_response(response, checks=[not_a_server_error])
            except Exception as exc:
                failures.append(f"{op.method.upper()} {op.path}: {exc}")
                return

    check()
