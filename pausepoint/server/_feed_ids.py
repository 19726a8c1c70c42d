"""The feed's SSE ids: each store's event position, sealed with the store's secret.

A position is the count of events the store's one stream holds, every tenant's and every
session's. Sent as it is, the gaps between a reader's ids would count the events of sessions it
cannot see, and a made-up ``Last-Event-ID`` refused as "past the newest" would find their total
in a few tries. So each position goes out sealed: a keyed permutation of 64-bit numbers (a
six-round Feistel network over BLAKE2b) written as 16 hex digits, with the key the store keeps
with its data (``StoreSecret``: the same for every process, so a reconnect to another process
reads it back). A reader sees ids in no order that counts anything, and an id nobody was sent
opens to a position the stream never reached (almost surely): "an id this feed never sent".
"""

from __future__ import annotations

import secrets
from hashlib import blake2b

from ..stores import SessionStore, StoreSecret

__all__ = ["IdSeal", "seal_of"]

_ROUNDS = 6
_HALF = 0xFFFFFFFF
_DIGITS = 16

# For a store that keeps no secret: ids only this process reads back (a reconnect to another
# process is refused as an id the feed never sent, and follows from now).
_PROCESS_KEY = secrets.token_bytes(32)


class IdSeal:
    """Seals positions into ids and opens them again, with one store's key."""

    def __init__(self, key: bytes) -> None:
        self._keys = [blake2b(key, digest_size=32, person=b"pp-feed-%d" % n).digest() for n in range(_ROUNDS)]

    def _round(self, index: int, half: int) -> int:
        digest = blake2b(half.to_bytes(4, "big"), digest_size=4, key=self._keys[index]).digest()
        return int.from_bytes(digest, "big")

    def seal(self, position: int) -> str:
        left, right = position >> 32 & _HALF, position & _HALF
        for index in range(_ROUNDS):
            left, right = right, left ^ self._round(index, right)
        return f"{left << 32 | right:016x}"

    def open(self, sealed: str) -> int | None:
        """The position ``sealed`` stands for; None when it is no id this seal makes."""
        if len(sealed) != _DIGITS or not all(c in "0123456789abcdef" for c in sealed):
            return None
        number = int(sealed, 16)
        left, right = number >> 32, number & _HALF
        for index in reversed(range(_ROUNDS)):
            left, right = right ^ self._round(index, left), left
        return left << 32 | right


async def seal_of(store: SessionStore) -> IdSeal:
    """The seal of ``store``'s positions: with its secret, or this process's key."""
    return IdSeal(await store.secret() if isinstance(store, StoreSecret) else _PROCESS_KEY)
