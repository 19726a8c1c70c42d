"""Optional extras: the one error a missing optional dependency raises."""

from __future__ import annotations

__all__ = ["missing_extra"]


def missing_extra(package: str, extra: str) -> ImportError:
    """The ImportError to raise when ``package``, installed by ``pausepoint[extra]``, is missing."""
    return ImportError(f"{package} is not installed: pip install 'pausepoint[{extra}]'")
