"""Fuzz a running server's OpenAPI document with schemathesis; print what failed as JSON.

    python -m tests.server.fuzz_openapi <base url> <token>

Run in a process of its own (see test_fuzz.py): outside pytest, schemathesis is imported as the
plain library it is, not through pytest's assertion rewriting (which, on CPython 3.11.7, can fail
to parse a module imported lazily deep in a test's stack: "AST constructor recursion depth
mismatch").
"""

from __future__ import annotations

import json
import sys
from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error


def fuzz(base: str, token: str) -> tuple[int, list[str]]:
    schema = schemathesis.openapi.from_url(base + "/openapi.json")
    schema.config.update(base_url=base)
    failures: list[str] = []
    operations = [o.ok() for o in schema.get_all_operations()]
    fuzzed = [op for op in operations if op.path != "/v1/feed"]  # the feed is endless: test_feed covers it
    for op in fuzzed:
        fuzz_operation(op, token, failures)
    return len(fuzzed), failures


def fuzz_operation(op: Any, token: str, failures: list[str]) -> None:
    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(case=op.as_strategy())
    def check(case: Any) -> None:
        for headers in ({"Authorization": f"Bearer {token}"}, {}):
            response = case.call(headers=headers, timeout=10)
            try:
                case.validate_response(response, checks=[not_a_server_error])
            except Exception as exc:
                failures.append(f"{op.method.upper()} {op.path}: {exc}")
                return

    check()


if __name__ == "__main__":
    fuzzed, failures = fuzz(sys.argv[1], sys.argv[2])
    print(json.dumps({"operations": fuzzed, "failures": failures}))
