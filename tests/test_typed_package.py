"""pausepoint is typed for its users: a strictly typed script type-checks against the installed package.

The package is built into a wheel from a copy of the source (what ``pip install pausepoint``
would install), unpacked into the site-packages of a fresh virtual environment, and a user's
script in a temporary folder is checked with ``mypy --strict`` using that environment. The
same check without the ``py.typed`` marker must fail (``import-untyped``): that is what the
marker changes for a user, and it shows the check can fail.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow

USER_SCRIPT = '''\
import asyncio
from decimal import Decimal

from pydantic import BaseModel

from pausepoint import AgentFinishReason, AgentResponse, Chat, Pausepoint, PendingInterrupt, ToolResponse
from pausepoint.errors import PausepointError
from pausepoint.stores import InMemorySessionStore
from pausepoint.testing import ScriptedModel, tool_call


class Ask(BaseModel):
    action: str


class Approval(BaseModel):
    approved: bool


class Transfer(BaseModel):
    amount: Decimal
    to_account: str


ai = Pausepoint()
approval = ai.define_interrupt(name="userApproval", description="Ask first.", input_schema=Ask, output_schema=Approval)


@ai.tool()
async def transfer_money(input: Transfer) -> str:
    """Move money."""
    return f"moved {input.amount}"


model = ScriptedModel([[tool_call("userApproval", {"action": "transfer"})], "done"])
agent = ai.define_agent(name="bank", model=model, tools=[approval, transfer_money], store=InMemorySessionStore())


def answer(pause: PendingInterrupt) -> ToolResponse:
    return pause.respond({"approved": True})


async def main() -> str:
    chat: Chat = agent.chat()
    res: AgentResponse = await chat.send("Transfer $5.")
    assert res.finish_reason == AgentFinishReason.INTERRUPTED
    try:
        res = await chat.resume(respond=[answer(res.interrupts[0])])
    except PausepointError as exc:
        code: str = exc.code
        return code
    text: str = res.text
    return text


def main_sync() -> str:
    chat = agent.chat().sync
    res: AgentResponse = chat.send("Transfer $5.")
    return res.text


print(asyncio.run(main()))
'''


def _install_wheel(site: Path, tmp: Path) -> None:
    """Build pausepoint's wheel from a copy of the source and unpack it into ``site``."""
    source = tmp / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "pausepoint", source / "pausepoint", ignore=shutil.ignore_patterns("__pycache__"))
    dist = tmp / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--disable-pip-version-check",
         "-q", "-w", str(dist), str(source)],
        check=True,
        cwd=tmp,
    )  # fmt: skip
    (wheel,) = dist.glob("pausepoint-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)


def _mypy(script: Path, python: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--python-executable", str(python), script.name],
        cwd=script.parent,
        capture_output=True,
        text=True,
    )


def test_a_users_strict_script_type_checks_against_the_installed_package(tmp_path: Path) -> None:
    env = tmp_path / "env"
    venv.EnvBuilder(with_pip=False).create(env)
    python = env / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()
    )  # fmt: skip
    _install_wheel(site, tmp_path)
    assert (site / "pausepoint" / "py.typed").is_file(), "the wheel does not ship pausepoint/py.typed"
    # pausepoint's dependencies (pydantic) come from this environment; pausepoint itself does not
    # (here it is an editable install, which type checkers do not follow): only the wheel's copy.
    deps = Path(__import__("pydantic").__file__).parent.parent
    (site / "deps.pth").write_text(f"{deps}\n")
    project = tmp_path / "user"
    project.mkdir()
    script = project / "app.py"
    script.write_text(USER_SCRIPT)

    typed = _mypy(script, python)
    assert typed.returncode == 0, typed.stdout + typed.stderr
    assert "Success: no issues found in 1 source file" in typed.stdout

    (site / "pausepoint" / "py.typed").unlink()
    untyped = _mypy(script, python)
    assert untyped.returncode == 1, untyped.stdout + untyped.stderr
    assert "import-untyped" in untyped.stdout
    assert "module is installed, but missing library stubs or py.typed marker  [import-untyped]" in untyped.stdout
