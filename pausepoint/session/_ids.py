"""The ids a caller may give a new session: 1 to 128 characters, letters, digits and ``. _ : @ -``,
starting with a letter or a digit — what every store keeps as it is and every surface carries
(a URL path segment, a Genkit ``sessionId``, a CLI argument) without escaping."""

from __future__ import annotations

import re

from ..errors import InvalidSessionId

__all__ = ["SESSION_ID_PATTERN", "check_session_id"]

_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}")
#: the ids ``check_session_id`` takes, as a JSON Schema ``pattern`` (anchored: patterns search)
SESSION_ID_PATTERN = f"^{_SESSION_ID.pattern}$"


def check_session_id(session_id: str) -> str:
    """``session_id`` if a caller may name a new session so; ``InvalidSessionId`` otherwise."""
    if not isinstance(session_id, str) or not _SESSION_ID.fullmatch(session_id):
        raise InvalidSessionId(
            f"session id {session_id!r} is not valid: 1 to 128 characters, letters, digits and . _ : @ -, "
            "starting with a letter or a digit",
            session_id=session_id if isinstance(session_id, str) else repr(session_id),
        )
    return session_id
