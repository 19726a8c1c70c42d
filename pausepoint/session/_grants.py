"""Grants, as values: what a person approves beyond the call they answer (``Grant``), and a
grant as callers read it (``GrantInfo``). How a grant is checked and applied is approval's
(``pausepoint.approval._grants``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

__all__ = ["Grant", "GrantInfo", "GrantStatus"]

GrantStatus = Literal["active", "revoked", "expired", "used"]


@dataclass(frozen=True, slots=True)
class Grant:
    """What a person approves beyond the call they answer (``pause.restart(grant=Grant())``).

    ``tool`` defaults to the paused call's tool; ``bounds`` limit the arguments of the calls it
    approves (None: any arguments — "for this session"); ``uses`` bounds how many calls it
    approves (None: no limit); ``ttl`` how long it lasts (None: as long as the policy allows).
    A grant never approves a call that needs several approvals, nor, under separation of
    duties, a call its own grantor asked for.
    """

    tool: str | None = None
    bounds: Mapping[str, Mapping[str, Any]] | None = None
    uses: int | None = None
    ttl: timedelta | None = None

    def scope(self) -> dict[str, Any]:
        """The grant as JSON data (``ttl`` in seconds)."""
        return {
            "tool": self.tool,
            "bounds": None if self.bounds is None else {k: dict(v) for k, v in self.bounds.items()},
            "uses": self.uses,
            "ttl_seconds": None if self.ttl is None else self.ttl.total_seconds(),
        }

    @classmethod
    def from_scope(cls, scope: Mapping[str, Any]) -> Grant:
        ttl = scope.get("ttl_seconds")
        return cls(
            scope.get("tool"), scope.get("bounds"), scope.get("uses"), None if ttl is None else timedelta(seconds=ttl)
        )


@dataclass(frozen=True, slots=True)
class GrantInfo:
    """A grant of a session, as ``Chat.grants()`` lists it.

    ``used`` calls were approved by it so far; ``status`` is ``active``, ``revoked``,
    ``expired`` or ``used`` (its ``uses`` are spent). ``ref`` is the call whose pause's answer
    gave it.
    """

    id: str
    tool: str
    principal: str | None
    via: str
    at: datetime
    bounds: dict[str, dict[str, Any]] | None
    uses: int | None
    used: int
    expires_at: datetime | None
    status: GrantStatus
    ref: str = ""
    revoked_at: datetime | None = None
    revoked_by: str | None = None
    reason: str = ""
