"""The ``pausepoint`` command: ``demo``, ``serve``, ``chat`` and ``config check`` (``pausepoint
<command> --help``; ``pausepoint --version``).

Each command is one module with ``add_parser(subparsers)`` and ``run(args)``; bad usage is
reported as ``pausepoint <command>: error: ...`` with exit status 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from .._extras import installed_version
from . import _chat, _config_cmd, _demo, _serve
from ._errors import CliError
from ._store_url import store_from_url

__all__ = ["CliError", "main", "store_from_url"]

_COMMANDS = (_demo, _serve, _chat, _config_cmd)


def parser() -> argparse.ArgumentParser:
    """The argument parser of the ``pausepoint`` command and its subcommands."""
    top = argparse.ArgumentParser(
        prog="pausepoint",
        description="LLM agents whose tools pause for people and resume later, exactly once.",
        epilog="Run 'pausepoint <command> --help' for a command's options.",
    )
    top.add_argument("--version", action="version", version=f"pausepoint {installed_version()}")
    subparsers = top.add_subparsers(dest="command", metavar="<command>", required=True)
    for command in _COMMANDS:
        command.add_parser(subparsers)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``); returns the exit status."""
    top = parser()
    args = top.parse_args(argv)
    try:
        status: int = args.run(args)
    except CliError as exc:
        print(f"pausepoint {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (``| head``): nothing more to say to it
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit's flush either
        return 1
    return status
