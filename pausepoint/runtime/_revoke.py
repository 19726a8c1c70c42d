"""Revoking a grant (``Chat.revoke_grant``): written at once, from any process, never waiting
for a turn running here (it may be the one the revocation is meant to stop)."""

from __future__ import annotations

from ..errors import ConcurrentUpdate, GrantNotFound, VersionConflict
from ..session._grants import GrantInfo
from ..session._records import GrantRevoked, encode_record
from ..session._views import grant_info
from ..stores import LogEntry
from ._arguments import checked_revocation
from ._calls import CLAIM_ATTEMPTS, SessionCalls

__all__ = ["no_grant", "revoke_grant"]


async def revoke_grant(calls: SessionCalls, grant_id: str, reason: str, principal: str | None, via: str) -> GrantInfo:
    """Revoke the grant ``grant_id`` of ``calls``' session; returns it as it now stands."""
    agent, actor = calls.agent, principal or calls.principal
    checked_revocation(reason, agent.json_limits, via=via, principal=actor)
    for _ in range(CLAIM_ATTEMPTS):
        state = await calls.peek_state()  # never waits for a turn running here: it may be the one to stop
        grant = state.grants.get(grant_id) if isinstance(grant_id, str) else None
        if grant is None:
            raise no_grant(grant_id, calls.session_id)
        now = agent.clock()
        if grant.status(now) == "active":  # one that ended (revoked, expired, used up) keeps its end
            record = GrantRevoked(grant_id, now, actor, via, reason)
            entry = LogEntry(state.version + 1, record.kind, encode_record(record))
            state.apply(record)
            try:
                with agent.telemetry.store_call(agent.store, "append"):
                    await agent.sessions.appender.append(state, state.version - 1, [record], [entry], now)
            except VersionConflict:
                continue
        return grant_info(grant, now)
    raise ConcurrentUpdate(f"session {calls.session_id!r} kept changing; the grant was not revoked")


def no_grant(grant_id: object, session_id: str) -> GrantNotFound:
    """The refusal of ``grant_id``, a grant session ``session_id`` does not have — also
    ``pausepoint.client``'s for an id no request path can carry, in the same words."""
    return GrantNotFound(f"no grant {grant_id!r} in session {session_id!r}", grant_id=str(grant_id))
