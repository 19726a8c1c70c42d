"""A process forked from one that used a SQLite store (``multiprocessing``'s default on Linux)
writes through it: the group fsync starts again in the child, and the child opens a connection
of its own (found by a probe: a child's first durable write waited for ever on the parent's
fsync worker, which a child does not have)."""

from __future__ import annotations

import asyncio
import os
import warnings
from pathlib import Path

import pytest

from pausepoint import AgentFinishReason
from pausepoint.demo import build
from pausepoint.stores import SqliteSessionStore
from pausepoint.stores._groupsync import GroupSync

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() is POSIX's")


def in_child(work) -> int:
    """Run ``work()`` in a forked child (at most 10 s); its exit status (0: it returned)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # forking a process with threads
        pid = os.fork()
    if pid == 0:  # the child: never back into pytest
        status = 1
        try:
            work()
            status = 0
        finally:
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_a_forked_child_syncs_through_a_group_whose_worker_ran_in_the_parent(tmp_path: Path) -> None:
    fd = os.open(tmp_path / "wal", os.O_WRONLY | os.O_CREAT)
    group = GroupSync(lambda: os.fsync(fd), inline_below=0)  # every round in the worker thread: a slow disk
    try:
        asyncio.run(group.wait())  # the parent's worker runs, and stays for the next round

        def child() -> None:
            asyncio.run(asyncio.wait_for(group.wait(), 5))

        assert in_child(child) == 0
        asyncio.run(group.wait())  # the parent's group goes on as it was
    finally:
        group.close()
        os.close(fd)


def test_a_forked_child_answers_a_pause_through_the_parents_store_and_the_parent_goes_on(tmp_path: Path) -> None:
    ledger: list[str] = []
    store = SqliteSessionStore(tmp_path / "s.db", synchronous="FULL")
    _, agent = build(store, ledger)
    paused = agent.chat().sync.send("Transfer $5 to savings.")
    pause = paused.interrupts[0]

    def child() -> None:
        done = agent.chat(paused.session_id).sync.resume(respond=[pause.respond({"approved": True})])
        assert done.text and ledger == ["5->savings"]

    assert in_child(child) == 0
    chat = agent.chat(paused.session_id).sync
    assert chat.interrupts() == [] and ledger == []  # the transfer ran in the child, once
    assert chat.last_response().finish_reason == AgentFinishReason.STOP  # the child's turn, as the parent reads it
    assert chat.send("Transfer $6 to savings.").interrupts  # the parent's store goes on
