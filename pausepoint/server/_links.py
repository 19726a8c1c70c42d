"""Approval links: signed, expiring tokens that name one pause, and the refusals they can meet.

A token is two base64url parts (no padding) joined by a dot::

    <payload>.<mac>
    payload = base64url(JSON ["v1", agent, session_id, call ref, pause_id, expires (Unix seconds)])
    mac     = base64url(HMAC-SHA256(secret, "pausepoint-link." + <payload>))

It names a pause and when the link stops working, nothing more (no principal, no decision): a
link is a pointer a person opens, signed so that nobody can make one point elsewhere. The
expiry is the pause's start plus ``ApprovalLinks.ttl``, never past the pause's own expiry; it
is computed from the pause alone, so every attempt of a notification carries the same token.

What a link's pause is now is derived from the session, so a link needs no storage of its own:
the pause open and neither it nor the token expired — ``open``; answered (approved, denied,
answered, cancelled) — ``used``; the call paused again after it — ``superseded``; past the
token's or the pause's expiry, or answered by the expiry policy — ``expired``.

Refusals (each a 4xx; nothing is decided, nothing written)::

    InvalidLink (400, invalid_link)       not a token this server signed, or another pause's
    LinkExpired (409, link_expired)       past its expiry or its pause's
    LinkUsed (409, link_used)             its pause was answered
    LinkSuperseded (409, link_superseded) its call paused again: the new pause needs a new look
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, TypeAlias

from ..errors import InvalidLink, LinkExpired, LinkSuperseded, LinkUsed
from ..webhooks import ApprovalLinks

__all__ = [
    "Link",
    "LinkState",
    "link_expiry",
    "make_token",
    "read_token",
    "refusal",
]

LinkState: TypeAlias = Literal["open", "used", "expired", "superseded"]

_VERSION = "v1"
_DOMAIN = b"pausepoint-link."
_MAX_TOKEN = 2048  # far above any token made here (a few hundred characters)
_TOKEN = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")


_FIRST = int(datetime(1, 1, 2, tzinfo=UTC).timestamp())
_LAST = int(datetime(9999, 12, 30, tzinfo=UTC).timestamp())


@dataclass(frozen=True, slots=True)
class Link:
    """What a verified token names."""

    agent: str
    session_id: str
    ref: str
    pause_id: str
    expires: int  # Unix seconds

    @property
    def expires_at(self) -> datetime:
        return datetime.fromtimestamp(self.expires, UTC)

    def expired(self, now: datetime) -> bool:
        return now.timestamp() >= self.expires


def link_expiry(links: ApprovalLinks, paused_at: datetime, expires_at: datetime | None) -> int:
    """When a link to a pause that began at ``paused_at`` (and expires at ``expires_at``)
    stops working, in Unix seconds: ``ttl`` after the pause began, never after it expires."""
    until = paused_at + links.ttl
    if expires_at is not None:
        until = min(until, expires_at)
    return math.floor(until.timestamp())


def make_token(links: ApprovalLinks, link: Link) -> str:
    """The token for ``link``, signed with the first secret."""
    fields = [_VERSION, link.agent, link.session_id, link.ref, link.pause_id, link.expires]
    payload = _encode(json.dumps(fields, separators=(",", ":"), ensure_ascii=True).encode())
    return payload + "." + _encode(_mac(links.secrets[0], payload))


def read_token(links: ApprovalLinks | None, token: Any) -> Link:
    """What ``token`` names, once its signature is checked (in constant time, against every
    secret). Raises ``InvalidLink`` for anything else; its expiry is not checked here."""
    if links is None:
        raise InvalidLink("approval links are not configured on this server")
    if not isinstance(token, str) or len(token) > _MAX_TOKEN or not _TOKEN.fullmatch(token):
        raise InvalidLink("this is not an approval link")
    payload, mac = token.split(".")
    # The MAC's text is compared, not its decoded bytes: base64 has several spellings of the same
    # last bytes, and a link altered in any character is not the link this server signed.
    if not any(hmac.compare_digest(_encode(_mac(secret, payload)), mac) for secret in links.secrets):
        raise InvalidLink("this link was not signed by this server (altered, or made with a retired secret)")
    try:
        raw = _decode(payload)
    except (binascii.Error, ValueError):
        raise InvalidLink("this is not an approval link") from None
    unreadable = "this link holds what this version of pausepoint does not write (another version's, or damaged)"
    try:
        version, agent, session_id, ref, pause_id, expires = json.loads(raw)
    except (ValueError, TypeError):  # signed with our secret, yet not what we write
        raise InvalidLink(unreadable) from None
    strings = all(isinstance(v, str) and v for v in (agent, session_id, ref, pause_id))
    # an expiry a date can hold (Unix seconds of years 1 to 9999): no date past it can be made
    if version != _VERSION or not strings or type(expires) is not int or not _FIRST <= expires <= _LAST:
        raise InvalidLink(unreadable)
    return Link(agent, session_id, ref, pause_id, expires)


def refusal(state: LinkState, message: str) -> InvalidLink | LinkExpired | LinkUsed | LinkSuperseded:
    """The error that refuses a decision through a link in ``state`` (anything but ``open``)."""
    match state:
        case "expired":
            return LinkExpired(message)
        case "used":
            return LinkUsed(message)
        case "superseded":
            return LinkSuperseded(message)
        case _:
            return InvalidLink(message)


def _mac(secret: str, payload: str) -> bytes:
    return hmac.new(secret.encode(), _DOMAIN + payload.encode("ascii"), hashlib.sha256).digest()


def _encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
