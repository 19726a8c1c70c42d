"""The checkpoints of ``PostgresSessionStore``: the statements that write, extend and read a
session's checkpoint (see ``stores._base``).

``pausepoint_checkpoints`` holds a session's head (its latest extension's version, or its
base's) and the version of its base; bases are rows of ``pausepoint_checkpoint_bases``, by
version, so a process reading one in part (``_partial``) still finds it after a newer one
replaced it, for ``PARTIAL_BASE_KEPT`` seconds; extensions are rows of
``pausepoint_checkpoint_extensions``. A checkpoint is never the source of truth: every write
commits without waiting for the WAL's flush.
"""

from __future__ import annotations

__all__ = ["WHOLE", "checkpoint_statements"]

# A prefix length that reads a base whole (bytea values are at most 1 GB).
WHOLE = 2**31 - 1

# An extension, in one statement (one transaction): the head moves from $2 to $3 only if it is at
# $2, has at least $5 extensions and the log holds $3; only if it moved are its last $5
# extensions deleted and the new one inserted. Every writer of a session's extensions (this, a
# base write, a deletion) updates or deletes the head's row first, and a head's version only
# grows: so once this holds the row's lock with the head still at $2, nothing changed the
# extensions since the statement's snapshot, which its count and its delete read. Committed
# without waiting for the WAL's flush, like a checkpoint (the setting is read at commit, as for
# an append with durable=False).
_EXTEND_CHECKPOINT = """
WITH moved AS (
    UPDATE {s}.pausepoint_checkpoints SET version = $3
    WHERE session_id = $1 AND version = $2 AND $2 < $3
        AND EXISTS (SELECT 1 FROM {s}.pausepoint_sessions WHERE id = $1 AND version >= $3)
        AND (SELECT count(*) FROM {s}.pausepoint_checkpoint_extensions WHERE session_id = $1) >= $5
    RETURNING session_id
), replaced AS (
    DELETE FROM {s}.pausepoint_checkpoint_extensions
    WHERE session_id = (SELECT session_id FROM moved) AND version IN (
        SELECT version FROM {s}.pausepoint_checkpoint_extensions WHERE session_id = $1
        ORDER BY version DESC LIMIT $5
    )
)
INSERT INTO {s}.pausepoint_checkpoint_extensions (session_id, version, data)
SELECT moved.session_id, $3, $4 FROM moved
WHERE set_config('synchronous_commit', 'off', true) IS NOT NULL
"""

# One statement, one snapshot: the head, the base's version, length and first $2 bytes, then the
# extensions in order.
_READ_CHECKPOINT = """
SELECT c.version, c.base, length(b.data) AS length, substring(b.data FROM 1 FOR $2) AS prefix, ARRAY(
    SELECT e.data FROM {s}.pausepoint_checkpoint_extensions AS e WHERE e.session_id = $1 ORDER BY e.version
) AS extensions
FROM {s}.pausepoint_checkpoints AS c
JOIN {s}.pausepoint_checkpoint_bases AS b ON b.session_id = c.session_id AND b.version = c.base
WHERE c.session_id = $1
"""


def checkpoint_statements(s: str) -> dict[str, str]:
    """The statements of checkpoints, for the quoted schema name ``s``."""
    return {
        "delete_checkpoint": f"DELETE FROM {s}.pausepoint_checkpoints WHERE session_id = $1",
        "delete_extensions": f"DELETE FROM {s}.pausepoint_checkpoint_extensions WHERE session_id = $1",
        "delete_bases": f"DELETE FROM {s}.pausepoint_checkpoint_bases WHERE session_id = $1",
        # The bases a new one replaced are kept a while for the processes reading them in
        # part, then deleted by a later base write.
        "retire_bases": f"WITH gone AS (DELETE FROM {s}.pausepoint_checkpoint_bases "
        "WHERE session_id = $1 AND replaced_at IS NOT NULL AND (replaced_at < now() - make_interval(secs => $2) "
        f"OR version NOT IN (SELECT version FROM {s}.pausepoint_checkpoint_bases "
        "WHERE session_id = $1 AND replaced_at IS NOT NULL ORDER BY version DESC LIMIT $3 - 1))) "
        f"UPDATE {s}.pausepoint_checkpoint_bases SET replaced_at = now() "
        "WHERE session_id = $1 AND replaced_at IS NULL",
        "add_base": f"INSERT INTO {s}.pausepoint_checkpoint_bases (session_id, version, data) VALUES ($1, $2, $3)",
        "read_base_range": f"SELECT substring(data FROM $3 FOR $4) FROM {s}.pausepoint_checkpoint_bases "
        "WHERE session_id = $1 AND version = $2",
        "read_checkpoint": _READ_CHECKPOINT.format(s=s),
        "extend_checkpoint": _EXTEND_CHECKPOINT.format(s=s),
        # A new base, kept only for a version the log holds, and only over an older checkpoint
        # (its head); committed without waiting for the WAL's flush (never the source of truth).
        "write_checkpoint": f"INSERT INTO {s}.pausepoint_checkpoints AS c (session_id, version, base) "
        f"SELECT id, $2, $2 FROM {s}.pausepoint_sessions WHERE id = $1 AND version >= $2 "
        "ON CONFLICT (session_id) DO UPDATE SET version = excluded.version, base = excluded.base "
        "WHERE excluded.version > c.version",
    }
