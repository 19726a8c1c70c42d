"""The code blocks of the README and docs/, read from the Markdown as a reader sees them.

A block may be preceded (on the line before its fence) by one directive, an HTML comment a
rendered page does not show:

- ``<!-- docs: file NAME -->``: the block is the file ``NAME`` (the text says "save it as");
  it is written to the working folder before the page's blocks run, so later blocks (and
  other pages) can import it, and then run as ``python NAME`` like any block.
- ``<!-- docs: illustrative -->``: a sketch, not a program; not run (keep these few).
- ``<!-- docs: needs VARIABLE -->``: runs only where ``VARIABLE`` is set (a cloud key).
- ``<!-- docs: server ARGS -->``: runs while ``pausepoint serve ARGS`` serves (on a free port,
  whose URL the block reads from ``PAUSEPOINT_URL``; the page shows the default port).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_FENCE = re.compile(r"^( *)```(\w*)\s*$")  # a block inside a list item is indented
_DIRECTIVE = re.compile(r"^<!--\s*docs:\s*(\w+)\s*(.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    path: Path  # the Markdown file
    line: int  # the line of the opening fence, 1-based
    language: str
    code: str
    directive: str = ""  # "file", "illustrative", "needs", "server" or ""
    argument: str = ""

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def pages() -> list[Path]:
    """The README, then every page under docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(path: Path) -> list[Block]:
    """The fenced code blocks of ``path``, in order, with their directives."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        start, indent = i, len(opening[1])
        i += 1
        body: list[str] = []
        while i < len(lines) and not lines[i].startswith(" " * indent + "```"):
            body.append(lines[i][indent:] if lines[i].startswith(" " * indent) else lines[i].lstrip())
            i += 1
        i += 1  # the closing fence
        directive = argument = ""
        previous = start - 1
        while previous >= 0 and not lines[previous].strip():
            previous -= 1
        if previous >= 0 and (marked := _DIRECTIVE.match(lines[previous].strip())) is not None:
            directive, argument = marked[1], marked[2]
            if directive not in ("file", "illustrative", "needs", "server"):
                raise ValueError(f"{path}:{previous + 1}: unknown docs directive {directive!r}")
        found.append(Block(path, start + 1, opening[2], "\n".join(body) + "\n", directive, argument))
    return found
