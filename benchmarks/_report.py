"""Printing results: fixed-width tables written row by row, and number formats."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["Table", "mib", "note", "num", "ratio", "us", "verdict"]


class Table:
    """A fixed-width table printed a row at a time, so a long run shows results as they arrive.

    The first column is left-aligned (a label), the others right-aligned (figures).
    """

    def __init__(self, title: str, columns: Sequence[tuple[str, int]]) -> None:
        self.title = title
        self.columns = list(columns)

    def _line(self, cells: Sequence[str]) -> str:
        (_, first), *rest = self.columns
        figures = [f"{cell:>{width}}" for cell, (_, width) in zip(cells[1:], rest, strict=True)]
        parts = [f"{cells[0]:<{first}}", *figures]
        return " ".join(parts).rstrip()

    def header(self) -> None:
        print(f"\n{self.title}", flush=True)
        print(self._line([title for title, _ in self.columns]), flush=True)

    def row(self, *cells: str) -> None:
        print(self._line(cells), flush=True)

    def error(self, label: str, message: str) -> None:
        print(f"{label:<{self.columns[0][1]}} ERROR {message}", flush=True)


def note(text: str) -> None:
    """A line of explanation under a table, indented."""
    print(f"  {text}", flush=True)


def us(value: float | None) -> str:
    """Microseconds: one decimal below 100, thousands separators above."""
    if value is None:
        return "-"
    return f"{value:.1f}" if value < 100 else f"{value:,.0f}"


def num(value: float | None, decimals: int = 0) -> str:
    return "-" if value is None else f"{value:,.{decimals}f}"


def mib(value_bytes: float | None) -> str:
    return "-" if value_bytes is None else f"{value_bytes / 1048576:.1f}"


def ratio(theirs: float | None, ours: float | None) -> str:
    """``theirs / ours`` as ``12.3x``; above 1 means pausepoint is faster or smaller."""
    if not theirs or not ours:
        return "-"
    value = theirs / ours
    return f"{value:,.1f}x" if value < 100 else f"{value:,.0f}x"


def verdict(value: float | None, limit: float) -> str:
    """Whether a figure meets its target (at most ``limit``)."""
    if value is None:
        return "-"
    return "ok" if value <= limit else "MISSED"
