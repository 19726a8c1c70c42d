"""How long things may last: a pause's time-to-live, a grant's, an escalation step's, a link's.

Every such duration is a positive ``timedelta`` (or, where a number is taken, seconds) of at
most ``MAX_DURATION``, about 31 years: a moment that far ahead is still a date (a ``timedelta``
of 9,000 years is not, once added to now), and REST bounds its ``ttl_seconds`` the same way.
"""

from __future__ import annotations

import math
from datetime import timedelta

__all__ = ["MAX_DURATION", "SAID", "duration"]

MAX_DURATION = timedelta(seconds=10**9)
SAID = "a timedelta from a microsecond to 10**9 seconds (about 31 years)"


def duration(value: object, *, seconds: bool = False) -> timedelta | None:
    """``value`` as a duration (``seconds``: a number of seconds is taken too); None when it is
    not one — the caller raises its own error, saying ``SAID``."""
    if seconds and isinstance(value, int | float) and not isinstance(value, bool):
        # Compared as it is (an int of 400 digits is no float: math.isfinite would overflow).
        if (isinstance(value, float) and not math.isfinite(value)) or not 0 < value <= MAX_DURATION.total_seconds():
            return None
        value = timedelta(seconds=value)
    if isinstance(value, timedelta) and timedelta(0) < value <= MAX_DURATION:
        return value
    return None
