"""The local model's runtime: llama.cpp, embedded through the prebuilt ``xllamacpp`` wheel.

Why this runtime: it installs as a wheel (no compiler, nothing built on the user's machine), and
its Linux x86-64 wheel is one build for a fixed CPU baseline rather than for the machine it was
built on. That build (``GGML_NATIVE=OFF``) compiles the CPU kernels for SSE4.2, AVX, AVX2, BMI2,
FMA and F16C only: no AVX-512 and no AMX kernels are in it, and nothing is chosen at run time,
so a Xeon with AMX runs the same AVX2 code as any other x86-64 CPU of the last decade. A CPU
without those features would stop the process with an illegal instruction; ``check_cpu`` refuses
it first, with a ``ModelError`` naming what is missing.

xllamacpp wraps llama.cpp's own server: ``Server(params)`` loads the model and runs its loop in a
thread, and ``handle_completions(body, callback)`` runs one request in the calling thread
(without the GIL), streaming chunks to the callback, which stops the generation by returning
True. The server also listens for HTTP; here it listens on a Unix socket in a private temporary
folder (mode 0700) and requires a random API key, so nothing outside this process can use it.
"""

from __future__ import annotations

import os
import platform
import re
import secrets
import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..errors import ModelError

__all__ = ["REQUIRED_CPU_FEATURES", "Runtime", "check_cpu", "default_threads", "runtime_features"]

#: what the xllamacpp Linux x86-64 wheel is compiled for: the /proc/cpuinfo flag of each
#: feature, by the name llama.cpp's system information gives it
REQUIRED_CPU_FEATURES = {"SSE3": "pni", "SSSE3": "ssse3", "AVX": "avx", "AVX2": "avx2", "F16C": "f16c",
                         "FMA": "fma", "BMI2": "bmi2"}  # fmt: skip


def check_cpu(cpuinfo: str | None = None) -> None:
    """Raise ``ModelError`` when this x86-64 CPU lacks a feature the runtime's kernels use.

    ``cpuinfo`` is the text of ``/proc/cpuinfo`` (read when None). Other platforms, and a
    machine whose CPU flags cannot be read, are not checked.
    """
    if cpuinfo is None:
        if platform.system() != "Linux" or platform.machine().lower() not in ("x86_64", "amd64"):
            return
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            flags = set(value.split())
            break
    if not flags:
        return
    missing = [name for name, flag in REQUIRED_CPU_FEATURES.items() if flag not in flags]
    if missing:
        raise ModelError(
            f"this CPU lacks {', '.join(missing)}, which the local model runtime (the xllamacpp wheel, built "
            "for x86-64 CPUs with AVX2: Intel Haswell and AMD Excavator or later) needs; use a hosted model instead"
        )


def runtime_features() -> set[str]:
    """The CPU features the installed runtime was compiled for, as llama.cpp reports them.

    Only safe to call on a CPU that passed ``check_cpu`` (asking initialises the kernels).
    """
    import xllamacpp

    return set(re.findall(r"(\w+) = 1\b", str(xllamacpp.get_system_info())))


def default_threads() -> int:
    """One thread less than the cores this process may use, and at least one.

    Never all of them: llama.cpp's threads wait for each other at every layer, so one core
    taken by anything else (the event loop, a database, another process) stalls them all.
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        cores = os.cpu_count() or 1
    return max(1, cores - 1)


class Runtime:
    """One GGUF model loaded in an embedded llama.cpp server. Raises ``ModelError`` if it cannot load.

    ``options`` sets more of xllamacpp's ``CommonParams`` by attribute name (dotted for nested
    ones, e.g. ``{"n_batch": 512, "sampling.penalty_last_n": 32}``).
    """

    def __init__(self, path: Path, *, n_ctx: int, n_threads: int, options: Mapping[str, Any] | None = None) -> None:
        check_cpu()
        import xllamacpp

        self.n_ctx = n_ctx
        self._folder = tempfile.mkdtemp(prefix="pausepoint-llama-")
        params: Any = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.n_ctx = n_ctx
        params.n_parallel = 1  # one conversation at a time, so each keeps the prompt cache
        params.cpuparams.n_threads = n_threads
        params.cpuparams_batch.n_threads = n_threads
        params.ctx_shift = False  # a full context ends the answer ("length"); it never forgets the prompt
        params.warmup = False
        params.verbosity = -1  # llama.cpp's own log stays quiet
        params.n_threads_http = 1
        params.hostnames = [os.path.join(self._folder, "llama.sock")]
        params.api_keys = [secrets.token_urlsafe(32)]
        for name, value in (options or {}).items():
            *owners, last = name.split(".")
            target = params
            try:
                for owner in owners:
                    target = getattr(target, owner)
                setattr(target, last, value)
            except (AttributeError, TypeError, ValueError) as exc:
                self._remove_folder()
                raise ModelError(f"bad runtime option {name}={value!r}: {exc}") from exc
        try:
            self._server: Any = xllamacpp.Server(params)
        except (RuntimeError, ValueError, OSError) as exc:
            self._remove_folder()
            raise ModelError(f"could not load the GGUF model {path}: {exc}") from exc
        self._closed = threading.Event()

    def complete(self, body: dict[str, Any], on_chunk: Callable[[dict[str, Any]], bool]) -> None:
        """Run one streamed completion request (llama.cpp's OpenAI-style ``/v1/completions`` body).

        ``on_chunk`` gets each chunk (a dict; an error is ``{"error": {...}}``) and stops the
        generation by returning True. Blocks; call it in a worker thread.
        """
        if self._closed.is_set():
            raise ModelError("the local model was closed")
        self._server.handle_completions({**body, "stream": True}, on_chunk)

    def close(self) -> None:
        """Stop the server and free the model (waits for its loop to end)."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._server = None  # the server's destructor stops its loop and frees the model
        self._remove_folder()

    def _remove_folder(self) -> None:
        shutil.rmtree(self._folder, ignore_errors=True)
