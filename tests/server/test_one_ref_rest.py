"""One ref per call over the REST API and its feed; sessions named by the caller."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tests.server.conftest import ALICE, BOB


async def follow(http, url: str, connected: asyncio.Event, into: list[tuple[str, Any]], count: int) -> None:
    """Read the SSE feed into ``into`` until it holds ``count`` events; ``connected`` once subscribed."""
    async with http.stream("GET", url, headers=ALICE) as reply:
        assert reply.status_code == 200
        name = None
        async for line in reply.aiter_lines():
            if line.startswith(": connected"):
                connected.set()
            elif line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                into.append((name, json.loads(line[5:])))
                if len(into) >= count:
                    return


async def test_a_call_that_pauses_again_keeps_its_ref_and_the_old_pause_cannot_be_answered(served, http):
    connected, events = asyncio.Event(), []
    feed = asyncio.create_task(follow(http, served.lab + "/v1/feed", connected, events, 7))
    await asyncio.wait_for(connected.wait(), 10)
    sessions = served.lab + "/v1/agents/labAgent/sessions"
    body = (await http.post(sessions, json={"message": "Run: rm x"}, headers=ALICE)).json()
    [first] = body["interrupts"]
    assert first["ref"] == body["message"]["parts"][0]["ref"] == first["call_ref"]  # the tool request's ref
    base = f"{sessions}/{body['session_id']}/interrupts/{first['ref']}"
    again = (await http.post(base + "/restart", json={}, headers=ALICE)).json()
    [second] = again["interrupts"]
    assert second["ref"] == first["ref"] and second["pause_id"] != first["pause_id"]

    # bound to the first pause: refused, nothing runs
    reply = await http.post(
        base + "/restart", json={"resumed_metadata": {"tool_approved": True}, "pause_id": first["pause_id"]},
        headers=ALICE,
    )  # fmt: skip
    assert reply.status_code == 409 and reply.json()["error"]["code"] == "already_resolved"
    assert served.events.lines == []
    # by the ref alone: the live pause
    reply = await http.post(base + "/restart", json={"resumed_metadata": {"tool_approved": True}}, headers=ALICE)
    assert reply.json()["finish_reason"] == "stop" and served.events.lines == ["run_shell:rm x"]
    trail = (await http.get(f"{sessions}/{body['session_id']}/audit", headers=ALICE)).json()["entries"]
    answers = [e for e in trail if e["decision"] != "message"]
    assert [(e["ref"], e["pause_id"]) for e in answers] == [(first["ref"], first["pause_id"]),
                                                         (first["ref"], second["pause_id"])]  # fmt: skip

    await asyncio.wait_for(feed, 10)
    assert [name for name, _ in events if name != "turn_end"] == ["pause", "answer", "pause", "answer"]  # news
    assert [e[1]["interrupt"]["pause_id"] for e in events if e[0] == "pause"] == [first["pause_id"], second["pause_id"]]


async def test_a_session_id_chosen_through_rest(served, http):
    url = served.lab + "/v1/agents/labAgent/sessions/ops-2026-03.review/messages"
    created = await http.post(url, json={"message": "hello"}, headers=ALICE)
    assert created.status_code == 200 and created.json()["session_id"] == "ops-2026-03.review"
    again = (await http.post(url, json={"message": "again"}, headers=ALICE)).json()
    assert again["message"]["parts"][0]["text"] == "You said: again"
    taken = await http.post(url, json={"message": "mine now"}, headers=BOB)
    assert taken.status_code == 404 and taken.json()["error"]["code"] == "session_not_found"
    unknown = await http.post(url.replace("ops-2026-03.review", "nobody-here"), json={"message": "x"}, headers=BOB)
    assert unknown.status_code == 200  # the same request on a free id creates it: the 404 said nothing more
    bad = await http.post(url.replace("ops-2026-03.review", "-rf"), json={"message": "x"}, headers=ALICE)
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_session_id"
    for control in ("x%00", "x%01", "x%7F"):  # NUL too: an id no store can keep is refused the same way
        bad = await http.post(url.replace("ops-2026-03.review", control), json={"message": "x"}, headers=ALICE)
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_session_id", control
    # an id of one's own session of another agent (one store): the 404 says whose it is (found by a
    # probe: "no session", of a session the caller reads every day); to anyone else, nothing more
    bank = served.bank + "/v1/agents/bankingAgent/sessions/ops-2026-04/messages"
    assert (await http.post(bank, json={"message": "hello"}, headers=ALICE)).status_code == 200
    lab = url.replace("ops-2026-03.review", "ops-2026-04")
    for reply in (
        await http.post(lab, json={"message": "x"}, headers=ALICE),
        await http.get(lab[: -len("/messages")], headers=ALICE),
    ):
        assert reply.status_code == 404 and reply.json()["error"]["code"] == "session_not_found"
        assert "the id names a session of agent 'bankingAgent'" in reply.json()["error"]["message"]
    hidden = (await http.post(lab, json={"message": "x"}, headers=BOB)).json()["error"]
    assert hidden["code"] == "session_not_found" and hidden["message"] == "no session 'ops-2026-04'"
    wire = {"data": {"message": {"role": "user", "content": [{"text": "x"}]}}, "init": {"sessionId": "gk\u0000"}}
    bad = await http.post(served.lab + "/agents/labAgent", json=wire, headers=ALICE)
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_session_id"
