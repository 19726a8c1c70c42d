"""What the proxied run found (now fixed): an answer's retry with its ``Idempotency-Key`` must
complete once the server that took the answer died.

The answer reaches server A through nginx; A records it, starts the transfer (the ledger line
is written) and is killed with SIGKILL; nginx answers the client 502. The client retries with
the same key, as the README and docs/deploy.md tell it to (``pausepoint.client`` retries
``resume_in_progress`` four times, then raises ``ResumeInProgress``), and nginx sends it to B.
B answers 409 ``resume_in_progress`` while A may still be running it, and once the session has
been still for ``abandon_after`` the keyed retry goes on as an empty resume would (the call
recorded as of unknown outcome, never run twice) and returns that outcome.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from .cycles import APPROVAL, SESSIONS, code
from .proxy import ALICE, text, transfers_by_account

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

GIVE_UP = 15.0  # seven times the app's abandon_after: a guard, not a performance bound


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
async def test_an_answers_retry_with_its_key_completes_after_its_server_died(deployed, http):
    account = f"slow{uuid.uuid4().hex[:6]}"
    reply = await http.post(deployed.url + SESSIONS, json={"message": f"Transfer $5 to {account}."}, headers=ALICE)
    session, ref = reply.json()["session_id"], reply.json()["interrupts"][0]["ref"]
    path = deployed.url + f"{SESSIONS}/{session}/interrupts/{ref}/respond"
    key = {**ALICE, "Idempotency-Key": uuid.uuid4().hex}

    first = asyncio.create_task(http.post(path, json=APPROVAL, headers=key))
    while account not in transfers_by_account(deployed.ledger):  # noqa: ASYNC110 - a file the server writes
        await asyncio.sleep(0.005)
    # The transfer is made: kill the server that made it.
    pid = int(deployed.ledger.read_text().split()[0])
    deployed.kill(next(i for i, p in enumerate(deployed.servers) if p is not None and p.pid == pid))
    assert (await first).status_code == 502

    deadline = time.monotonic() + GIVE_UP
    while (retry := await http.post(path, json=APPROVAL, headers=key)).status_code != 200:
        assert (retry.status_code, code(retry)) == (409, "resume_in_progress"), retry.text
        assert time.monotonic() < deadline, f"still {code(retry)} after {GIVE_UP} s"
        await asyncio.sleep(0.2)
    assert "'outcome': 'unknown'" in text(retry.json())
    assert transfers_by_account(deployed.ledger) == {account: 1}
