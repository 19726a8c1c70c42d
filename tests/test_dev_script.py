"""``dev.py`` where ``python3`` cannot make a virtual environment with pip (Debian and Ubuntu
without ``python3-venv``): a clear exit saying what to install, and nothing half made left
behind for the next run to trip on (found by a probe: a traceback, then the same one on every
run until ``.venv`` was deleted by hand)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Run in a copy of dev.py: what ensurepip does on such a machine, as venv reports it.
NO_ENSUREPIP = textwrap.dedent(
    """
    import subprocess, sys, venv
    sys.path.insert(0, ".")
    import dev

    def create(self, env_dir):
        raise subprocess.CalledProcessError(1, [str(env_dir) + "/bin/python", "-m", "ensurepip"])

    venv.EnvBuilder.create = create
    dev.ensure_environment("")
    """
)


def test_a_venv_left_without_pip_is_made_again_and_a_python_that_cannot_says_what_to_install(tmp_path: Path):
    shutil.copy(ROOT / "dev.py", tmp_path / "dev.py")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    venv.EnvBuilder(with_pip=False).create(tmp_path / ".venv")  # what a failed creation leaves
    assert (tmp_path / ".venv" / "bin" / "python").exists()
    done = subprocess.run(
        [sys.executable, "-c", NO_ENSUREPIP], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "could not make a virtual environment with pip" in done.stderr
    assert "apt-get install python3-venv" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / ".venv").exists()
