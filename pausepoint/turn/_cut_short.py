"""Tool calls a call left running in the log when it stopped short, in a process that knows it.

The log says a call is running from the record that starts it (the model's message asking for
it, or the answer restarting it) until its outcome is recorded. A process that dies meanwhile
leaves it running: another process settles it only once the session has been still for
``abandon_after`` (it may be running there still). A call cut short in a process that lives on
need not wait, and need not lose what it knows:

- **cancelled** (Ctrl+C in a chat, a server shutting down, a caller's timeout): the turn
  records, before the cancellation goes on, each call it leaves running as of unknown outcome
  (``CANCELLED``: the tool was stopped mid-way) and ends ``aborted`` — any process may go on at
  once, and a keyed retry gets that end (``Turn.run_calls``);
- **failed to record** (the store failed as the results were written): the process keeps the
  outcomes it could not write (``unwritten_outcomes``) and the version it left the session at
  (``runtime._stopped.Stopped``); its next call on the session, a keyed retry included, settles
  those calls at once, with their real outcomes (``Turn.recover``).

May import: ``session``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..session._records import CallAnswered, CallCompleted, CallPaused, MessageAdded, Record

__all__ = ["CANCELLED", "UNKNOWN_OUTCOME", "started_by", "unwritten_outcomes", "written_running"]

UNKNOWN_OUTCOME = {
    "error": "interrupted: the process running this call stopped before recording its result; "
    "it may or may not have taken effect",
    "outcome": "unknown",
}
CANCELLED = {
    "error": "cancelled: the call running this tool was cancelled before the tool ended (a process "
    "interrupted or shutting down, a caller's timeout); it may or may not have taken effect",
    "outcome": "unknown",
}


def started_by(records: Iterable[Record]) -> set[str]:
    """The refs of the calls ``records`` start: a model message's tool requests, a restart."""
    refs: set[str] = set()
    for record in records:
        if isinstance(record, MessageAdded) and record.message.role == "model":
            refs.update(part.ref for part in record.message.tool_requests)
        elif isinstance(record, CallAnswered) and record.decision == "restart":
            refs.add(record.call_ref)
    return refs


def written_running(pending: Sequence[Record], refs: Iterable[str]) -> list[str]:
    """Those of ``refs`` the log has as running: started by a record already written, not by
    one of the ``pending`` ones."""
    unwritten = started_by(pending)
    return [ref for ref in refs if ref not in unwritten]


def unwritten_outcomes(pending: Sequence[Record]) -> dict[str, Record]:
    """The outcomes among ``pending`` of calls the log has as running, by call ref."""
    unwritten = started_by(pending)
    return {
        record.call_ref: record
        for record in pending
        if isinstance(record, CallCompleted | CallPaused) and record.call_ref not in unwritten
    }
