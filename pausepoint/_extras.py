"""What is installed: the one error a missing optional dependency raises, and pausepoint's own
version (as every surface that names it says it: the CLI, MCP, webhooks' User-Agent, traces)."""

from __future__ import annotations

from importlib import metadata

__all__ = ["installed_version", "missing_extra"]


def missing_extra(package: str, extra: str) -> ImportError:
    """The ImportError to raise when ``package``, installed by ``pausepoint[extra]``, is missing."""
    return ImportError(f"{package} is not installed: pip install 'pausepoint[{extra}]'")


def installed_version() -> str:
    """This installation's version (``unknown`` for a source tree that was never installed)."""
    try:
        return metadata.version("pausepoint")
    except metadata.PackageNotFoundError:
        return "unknown"
