"""Large checkpoint bases as files beside a SQLite database, read through a memory map.

SQLite reads a large blob page by page along its overflow chain: a 44 MB base (a session of
10,000 approval cycles) took 60 ms to read, whatever part of it a cold load then used. A base
of at least ``SqliteSessionStore(checkpoint_file_bytes=...)`` is written instead to a file of
its own in the folder ``<database>-checkpoints``, and its row names the file. Reading it maps
the file: the operating system reads the pages the load touches, from its page cache.

A file is written whole before a row names it, never changed after, and removed once no row
names it. So a reader that mapped a file keeps valid bytes after another process replaced or
deleted the checkpoint (a removed file lives on until it is unmapped, on POSIX). A file left
behind by a process that stopped between writing it and committing its row is removed by the
next store to open the database, once it is an hour old (not before: another process may be
about to commit it).

A file is flushed to stable storage before its row is committed, so a row that survives a
power loss names a whole file (its entry in the folder is not flushed: a file lost with it is
missing, and the log is folded instead). A load checks the file's text and chunk sums, and
each chunk of its bounds and items the first time the session reads it (``_chunks``): a file
damaged later (a failing disk, a hand that edited it) fails the call that reads the damage,
once, and the session is read from its log from then on. The files are a cache like the rest of the
checkpoint: safe to delete, or to leave out of a backup of the database.
"""

from __future__ import annotations

import hashlib
import logging
import mmap
import os
import secrets
import time
from collections.abc import Collection

__all__ = ["CheckpointFiles"]

log = logging.getLogger("pausepoint")

SUFFIX = ".ppck"
# An unreferenced file younger than this may be one another process is about to commit.
ORPHAN_SECONDS = 3600.0


class CheckpointFiles:
    """The checkpoint files of one database, in ``directory``."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def write(self, session_id: str, version: int, data: bytes) -> str:
        """Write ``data`` to a new file, flushed to stable storage, and return its name (not
        yet named by any row)."""
        os.makedirs(self.directory, exist_ok=True)
        key = hashlib.blake2b(session_id.encode(), digest_size=10).hexdigest()
        name = f"{key}-{version}-{secrets.token_hex(4)}{SUFFIX}"
        path = os.path.join(self.directory, name)
        try:
            with open(path, "xb") as file:
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
        except BaseException:
            self.remove(name)
            raise
        return name

    def open(self, name: str) -> bytes | memoryview | None:
        """The bytes of the file ``name``, mapped read-only; ``b""`` for an empty file (one torn
        by a power loss), None when there is no such file (replaced or deleted meanwhile)."""
        if os.sep in name or (os.altsep and os.altsep in name) or not name.endswith(SUFFIX):
            return None  # a row naming anything but a file of ours is not followed
        try:
            fd = os.open(os.path.join(self.directory, name), os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            size = os.fstat(fd).st_size
            if size == 0:
                return b""
            return memoryview(mmap.mmap(fd, size, access=mmap.ACCESS_READ))
        finally:
            os.close(fd)

    def remove(self, name: str) -> None:
        """Remove the file ``name`` if it is there (a reader's map of it stays valid)."""
        try:
            os.remove(os.path.join(self.directory, name))
        except FileNotFoundError:
            pass
        except OSError as exc:  # e.g. mapped by a reader on a system that will not remove it
            log.warning("could not remove checkpoint file %s: %s", name, exc)

    def sweep(self, named: Collection[str], now: float | None = None) -> int:
        """Remove the files no row names that are older than ``ORPHAN_SECONDS``; their count."""
        try:
            entries = list(os.scandir(self.directory))
        except FileNotFoundError:
            return 0
        cutoff = (time.time() if now is None else now) - ORPHAN_SECONDS
        removed = 0
        for entry in entries:
            if not entry.name.endswith(SUFFIX) or entry.name in named:
                continue
            try:
                if entry.stat().st_mtime < cutoff:
                    self.remove(entry.name)
                    removed += 1
            except FileNotFoundError:
                continue
        return removed
