"""The one error the commands raise for bad usage: printed as ``pausepoint <command>: error: ...``, exit 2.

Checks that go on after a problem (a config file's: every problem is named at once) keep each
``CliError`` in ``Problems`` and raise them together, as one.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["CliError", "Problems", "named_at"]


class CliError(Exception):
    """Bad usage or a missing prerequisite the person can fix (a key, an extra, a free port)."""


@contextmanager
def named_at(where: str | None) -> Iterator[None]:
    """Run the block; a ``CliError`` it raises is raised named at ``where`` (a config file's
    ``FILE:LINE: key``), or as it is where ``where`` is None (the value came from a flag)."""
    try:
        yield
    except CliError as exc:
        if where is None:
            raise
        raise CliError(f"{where}: {exc}") from exc


class Problems:
    """The problems checks found so far, to be raised together.

    ``add(error)`` keeps one; ``with problems.each():`` around a check keeps the ``CliError`` it
    raises, and the next check runs; ``with problems.last():`` around a check the others cannot
    go on without (importing the app) raises its ``CliError`` with those kept; ``raise_found()``
    raises what was kept. ``heading`` (a config file's path) heads a list of several.
    """

    def __init__(self, heading: str | None = None) -> None:
        self.heading = heading
        self.found: list[str] = []

    def add(self, error: CliError) -> None:
        """Keep ``error`` with the others."""
        self.found.append(str(error))

    @contextmanager
    def each(self) -> Iterator[None]:
        """Run the block as one check: a ``CliError`` it raises is kept, not raised."""
        try:
            yield
        except CliError as exc:
            self.add(exc)

    @contextmanager
    def last(self) -> Iterator[None]:
        """Run the block as a check nothing goes on after: a ``CliError`` it raises is raised
        with the problems kept before it (all of them, as one)."""
        try:
            yield
        except CliError as exc:
            self.add(exc)
            raise self.error() from exc

    def raise_found(self) -> None:
        """Raises the problems kept (``error()``); nothing when there are none."""
        if self.found:
            raise self.error()

    def error(self) -> CliError:
        """The problems kept (one at least), as one ``CliError``: one problem as it is, several
        one a line under ``HEADING: N problems``."""
        if len(self.found) == 1:
            return CliError(self.found[0])
        count = f"{len(self.found)} problems"
        head = f"{self.heading}: {count}" if self.heading else count
        return CliError(head + "".join(f"\n  {problem}" for problem in self.found))
