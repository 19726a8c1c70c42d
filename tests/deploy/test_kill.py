"""kill -9 one server while traffic flows through nginx: nothing is lost.

Eight clients run approval cycles through nginx in front of three servers (``cycles.Client``:
one approval in ten sent twice). Once a fifth of the cycles are done, a ninth client asks for a
transfer to a ``slow`` account, whose transfer holds its server (``app.SlowLedger``): the
moment its ledger line is written, the server that wrote it is killed with SIGKILL — the
transfer made, its result not recorded, other sessions' requests waiting there. Once half of
the cycles are done it is started again on its port, as systemd's ``Restart=always`` would.

Then every session must have completed, and every transfer is counted in the ledger the
processes share: exactly one per session whose turn says it was made, and for the slow one,
made before the kill, none again (the model is told its outcome is unknown). Every duplicate
approval was refused.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from pathlib import Path

import pytest

from .cycles import Client, Tally, final_texts
from .proxy import Deployment, transfers_by_account

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

CLIENTS = 8
CYCLES = 160
KILL_AT, RESTART_AT = CYCLES // 5, CYCLES // 2
UNKNOWN = "'outcome': 'unknown'"  # how the model is told of a call that died with its process


async def killed_in_a_transfer(deployed: Deployment, client: Client, account: str) -> int:
    """Start the slow transfer to ``account``; kill -9 the server that makes it, the moment it
    made it. Which server that was."""
    cycle = asyncio.create_task(client.cycle(account))
    while not (line := [x for x in lines(deployed.ledger) if x.endswith(f"->{account}")]):  # a file the server writes
        assert not cycle.done(), cycle  # a guard: the cycle cannot end before its transfer is made
        await asyncio.sleep(0.005)
    pid = int(line[0].split()[0])
    [victim] = [i for i, proc in enumerate(deployed.servers) if proc is not None and proc.pid == pid]
    deployed.kill(victim)
    client.pending.append(cycle)
    return victim


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def test_a_server_killed_mid_run_loses_nothing(backend, tmp_path, http):
    tally = Tally()
    run = uuid.uuid4().hex[:6]
    numbers = itertools.count()
    slow = f"slow{run}"
    with Deployment(backend, tmp_path, processes=3) as deployed:
        client = Client(http, deployed.url, tally)

        async def worker() -> None:
            while (n := next(numbers)) < CYCLES:
                await client.cycle(f"k{run}x{n}")

        async def killer() -> int:
            await tally.reached(KILL_AT)
            victim = await killed_in_a_transfer(deployed, client, slow)
            await tally.reached(RESTART_AT)
            await asyncio.to_thread(deployed.restart, victim)
            await asyncio.gather(*client.pending)
            return victim

        victim, *_ = await asyncio.gather(killer(), *(worker() for _ in range(CLIENTS)))
        texts = await final_texts(http, deployed.url, tally.accounts)
        served = deployed.served()
    transfers = transfers_by_account(deployed.ledger)

    made = {a for a, t in texts.items() if t[-1] == f"Transferred $5 to {a}."}
    unknown = {a for a, t in texts.items() if UNKNOWN in t[-1]}
    assert made | unknown == set(tally.accounts), {a: t for a, t in texts.items() if a not in made | unknown}
    assert slow in unknown and transfers[slow] == 1  # made once, before the kill; never again
    assert all(transfers.get(a) == 1 for a in made), {a: transfers.get(a) for a in made if transfers.get(a) != 1}
    assert all(transfers.get(a, 0) <= 1 for a in unknown), {a: transfers.get(a) for a in unknown}
    assert set(transfers) <= set(tally.accounts)
    assert tally.cycles == CYCLES + 1
    assert tally.duplicates_refused == tally.duplicates_sent == (CYCLES + 1) // 10
    # Every server answered, the victim before its kill and again after its restart.
    assert {s.upstream for s in served} == {f"127.0.0.1:{p}" for p in deployed.ports}
    print(
        f"\n{backend.name}: {len(texts)} sessions, {len(made)} transfers made, {len(unknown)} of unknown outcome "
        f"({sum(transfers.get(a, 0) for a in unknown)} of them made, before the kill), duplicates refused "
        f"{tally.duplicates_refused}/{tally.duplicates_sent}; server {victim} killed; the clients met "
        f"{dict(tally.met)}"
    )
