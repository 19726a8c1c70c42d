"""Who is calling, and what they may do.

Authentication is a callable from the request to a principal (a string naming the caller), or
None when the request carries no credentials it accepts; it may be async. ``BearerTokens`` is
built in. Authorisation is an ``AccessPolicy`` with three separate rights over a session: to
see it (everyone else gets a 404, as if it did not exist), to answer its pauses, and to
converse in it — send messages, cancel its pauses. The default, ``OwnerPolicy``, gives all three
to the session's owner (the principal that created it) and only the first two to approvers: an
approver decides on what the owner's conversation asked, and never speaks in it.
"""

from __future__ import annotations

import hmac
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

from starlette.requests import Request

from ..errors import Unauthenticated
from ..stores import SessionSummary

__all__ = ["AccessPolicy", "Authenticator", "BearerTokens", "OwnerPolicy", "authenticate"]

Authenticator = Callable[[Request], "str | Awaitable[str | None] | None"]


class BearerTokens:
    """``Authorization: Bearer <token>`` against a fixed map of tokens to principals.

    Tokens are compared in constant time. Rotate by building a new app (or pass your own
    ``Authenticator`` for tokens kept elsewhere).
    """

    def __init__(self, tokens: Mapping[str, str]) -> None:
        self._tokens = [(token.encode(), principal) for token, principal in tokens.items()]

    def __call__(self, request: Request) -> str | None:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            return None
        given = token.strip().encode()
        found = None
        for known, principal in self._tokens:
            if hmac.compare_digest(known, given):
                found = principal
        return found


async def authenticate(authenticator: Authenticator, request: Request) -> str:
    """The request's principal. Raises ``Unauthenticated`` when the authenticator accepts none."""
    principal = authenticator(request)
    if inspect.isawaitable(principal):
        principal = await principal
    if not principal:
        raise Unauthenticated("missing or invalid credentials (send 'Authorization: Bearer <token>')")
    return principal


class AccessPolicy(Protocol):
    """Decides what a principal may do with a session. Answering or conversing is asked only
    of a principal who may view the session (one who may not gets a 404 first)."""

    def can_view(self, principal: str, session: SessionSummary) -> bool:
        """Whether ``principal`` may see the session at all (if not, it is 404 to them)."""
        ...

    def can_answer(self, principal: str, session: SessionSummary) -> bool:
        """Whether ``principal`` may answer the session's pauses (respond, deny, restart, approve)."""
        ...

    def can_converse(self, principal: str, session: SessionSummary) -> bool:
        """Whether ``principal`` may speak in the session: send messages, cancel its pauses."""
        ...

    def inbox_owner(self, principal: str) -> str | None:
        """An owner to filter listings by in the store (None: list all, then filter by ``can_view``)."""
        ...


class OwnerPolicy:
    """Only a session's owner sees it, answers it and converses in it. ``approvers`` may also
    see every session and answer its pauses (an approvals desk), but not send into it: a
    message in a session is always its owner's."""

    def __init__(self, approvers: frozenset[str] | set[str] = frozenset()) -> None:
        self.approvers = frozenset(approvers)

    def can_view(self, principal: str, session: SessionSummary) -> bool:
        return session.owner == principal or principal in self.approvers

    def can_answer(self, principal: str, session: SessionSummary) -> bool:
        return self.can_view(principal, session)

    def can_converse(self, principal: str, session: SessionSummary) -> bool:
        return session.owner == principal

    def inbox_owner(self, principal: str) -> str | None:
        return None if principal in self.approvers else principal
