"""The reference system's server: ``anchor_app``'s banking agent served by genkit-fastapi under uvicorn.

Runs under the reference's own Python (the genkit 0.12.0 venv that ``shared/reference-bench``'s
``setup.sh`` makes), never ours: it imports nothing from pausepoint, only the standard library,
genkit, genkit_fastapi, fastapi, uvicorn, ``_inherited.py`` beside it (the serving loop both
kinds of bench server share) and ``anchor_app`` from the reference folder given as
``--reference`` (a copy; see ``benchmarks/_reference.py``). ``benchmarks/server.py`` starts it::

    GENKIT_PY benchmarks/_genkit_server.py --reference DIR --store memory|file --fd N [--files DIR]

It serves ``serve_agent(banking_agent)`` (the turn at ``POST /bankingAgent``, plus the
reference's ``/getSnapshot`` and ``/abort``) on the inherited listening socket ``N``, with the
agent's in-memory session store or its file store (one JSON file per snapshot, in ``--files``),
the scripted model not streaming words (as ``bench.py`` runs it). It prints ``ready`` once it
listens, serves until SIGTERM, then prints ``ran=<transfers the tool made>``.
"""

from __future__ import annotations

import argparse
import socket
import sys
from typing import Any


def build(reference: str, store_kind: str, files: str | None) -> tuple[Any, dict[str, int]]:
    """The FastAPI app serving the reference's banking agent, and the app's tool counters."""
    sys.path.insert(0, reference)
    from anchor_app import build_app  # type: ignore[import-not-found]
    from fastapi import FastAPI  # type: ignore[import-not-found, unused-ignore]
    from genkit.exp import FileSessionStore, InMemorySessionStore  # type: ignore[import-not-found]
    from genkit_fastapi import serve_agent  # type: ignore[import-not-found]

    if store_kind == "memory":
        store = InMemorySessionStore()
    elif store_kind == "file" and files:
        store = FileSessionStore(files)
    else:
        raise SystemExit(f"unknown store {store_kind!r} (memory, or file with --files)")
    anchor = build_app(store=store, log_tools=False, stream_words=False)
    app = FastAPI()
    app.include_router(serve_agent(anchor.banking_agent))
    return app, anchor.counters


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reference", required=True, help="a copy of shared/reference-bench (holds anchor_app.py)")
    parser.add_argument("--store", choices=("memory", "file"), default="memory")
    parser.add_argument("--files", help="the file store's folder")
    parser.add_argument("--fd", type=int, required=True, help="an inherited listening socket")
    parser.add_argument(
        "--loop", choices=("auto", "asyncio", "uvloop"), default="auto", help="auto: uvloop if installed"
    )
    args = parser.parse_args()
    # Run as a script, so this folder is on sys.path: the same serving code as pausepoint's side.
    from _inherited import run_on, serve_inherited  # type: ignore[import-not-found, unused-ignore]

    app, counters = build(args.reference, args.store, args.files)
    sock = socket.socket(fileno=args.fd)
    run_on(args.loop, serve_inherited(app, sock, lambda: f"ran={counters['transfer_money']}"))


if __name__ == "__main__":
    main()
