"""What the terminal chat shows, and how: colours where the stream is a terminal that takes
them (``Style``), a one-line spinner while the model or a tool works (``Status``), and text a
model, a tool or a person wrote, with every character a terminal would obey or a person cannot
see made visible (``shown_json``, ``plain``).
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any, TextIO

from ..tools._display import unseen

__all__ = ["Status", "Style", "plain", "shown_json"]


class Style:
    def __init__(self, stream: TextIO) -> None:
        self.color = stream.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
        unicode = (getattr(stream, "encoding", None) or "").lower().replace("-", "") in ("utf8", "utf8mb4")
        self.box = ("┌─", "│", "└─") if unicode else ("+-", "|", "+-")
        self.frames = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏" if unicode else "-\\|/"

    def __call__(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color else text


class Status:
    """A one-line spinner on a terminal (nothing elsewhere); ``stop()`` clears it before output."""

    def __init__(self, stream: TextIO, style: Style) -> None:
        self._stream = stream
        self._style = style
        self._enabled = stream.isatty()
        self._task: asyncio.Task[None] | None = None
        self._label = ""

    def start(self, label: str) -> None:
        self._label = label
        if self._enabled and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._spin())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
            self._stream.write("\r\x1b[K")
            self._stream.flush()

    async def _spin(self) -> None:
        frames = self._style.frames
        i = 0
        while True:
            self._stream.write(f"\r{self._style(frames[i % len(frames)] + ' ' + self._label + '…', '2')}\x1b[K")
            self._stream.flush()
            i += 1
            await asyncio.sleep(0.1)


def shown_json(value: Any, indent: int | None = 2) -> str:
    """``value`` as JSON, with every character a person cannot see escaped (``json`` escapes
    C0's, not DEL's, C1's, nor a bidi override's)."""
    text = json.dumps(value, indent=indent, ensure_ascii=False, default=str)
    if text.isprintable():
        return text
    return "".join(f"\\u{ord(char):04x}" if char != "\n" and unseen(char) else char for char in text)


def plain(text: str) -> str:
    """``text`` with no character a terminal would obey or a person cannot see (but a line break
    and a tab): each written as the views mark it, ``⟨U+001B⟩``. Written as they are, a model's
    text or a tool's output could move the cursor, clear lines and print a card or prompt of its
    own (ESC [, a bare CR, C1's CSI), or reorder what an approver reads (a bidi override)."""
    if text.isprintable():
        return text
    return "".join(f"⟨U+{ord(char):04X}⟩" if char not in "\n\t" and unseen(char) else char for char in text)
