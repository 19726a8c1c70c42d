"""The shape of the package, held in CI: small rooms — no module over 600 lines, no function
over 80 — and the layers of ``.importlinter`` kept (no import loops, type-checking ones
included; stores import nothing of the core)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pausepoint"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_no_module_is_over_600_lines():
    long = {
        str(p.relative_to(PACKAGE)): n for p in modules() if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}, f"modules over {MAX_MODULE_LINES} lines (split them by concept): {long}"


def test_no_function_is_over_80_lines():
    long = {}
    for path in modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                if lines > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}"] = lines
    assert long == {}, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


def test_the_layers_are_kept():
    lint_imports = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if lint_imports is None:
        pytest.fail("lint-imports (import-linter, in the dev extra) is not installed")
    done = subprocess.run([lint_imports], cwd=PACKAGE.parent, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
