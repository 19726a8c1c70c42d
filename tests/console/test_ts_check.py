"""Every console module is type-checked: it opts in with ``// @ts-check`` (editors check it as you
type), and tsconfig.json covers it (CI runs ``tsc -p .`` on the whole console, see .ci/run)."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONSOLE = ROOT / "pausepoint" / "console"


def test_every_console_module_is_type_checked() -> None:
    modules = sorted(CONSOLE.glob("*.js"))
    assert modules
    unchecked = [m.name for m in modules if m.read_text(encoding="utf-8").splitlines()[0] != "// @ts-check"]
    assert unchecked == []
    config = json.loads((ROOT / "tsconfig.json").read_text(encoding="utf-8"))
    assert config["include"] == ["pausepoint/console/*.js"]
    options = config["compilerOptions"]
    assert options["checkJs"] and options["strict"] and options["noUnusedLocals"] and options["noEmit"]
