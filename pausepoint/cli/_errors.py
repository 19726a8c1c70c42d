"""The one error the commands raise for bad usage: printed as ``pausepoint <command>: error: ...``, exit 2."""

from __future__ import annotations

__all__ = ["CliError"]


class CliError(Exception):
    """Bad usage or a missing prerequisite the person can fix (a key, an extra, a free port)."""
