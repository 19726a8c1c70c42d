"""Over HTTP, an answer binds to what its approver saw (see tests/test_pause_binding.py): REST's
``POST .../interrupts/{ref}/approve`` with ``{}`` after an edit that paused again is refused
with 409 ``pause_changed`` naming the live pause, as is the client's ``approve``; the Genkit
wire binds an answer sent from a snapshot to the pauses that snapshot showed."""

from __future__ import annotations

from typing import Any

import pytest

from pausepoint.client import Client
from pausepoint.errors import PauseChanged
from tests.server.conftest import ALICE


async def edited_then_paused(http, served) -> tuple[str, dict[str, Any], dict[str, Any]]:
    sessions = served.shell + "/v1/agents/shellAgent/sessions"
    started = (await http.post(sessions, json={"message": "Run: rm -rf ./build"}, headers=ALICE)).json()
    session = f"{sessions}/{started['session_id']}"
    [first] = started["interrupts"]
    edit = await http.post(
        f"{session}/interrupts/{first['ref']}/restart",
        json={"replace_input": {"command": "rm -rf /"}, "pause_id": first["pause_id"]},
        headers=ALICE,
    )
    assert edit.status_code == 200, edit.text
    [live] = edit.json()["interrupts"]
    assert (live["ref"], live["input"]) == (first["ref"], {"command": "rm -rf /"})
    return session, first, live


async def test_rest_refuses_a_bare_approval_of_a_call_that_paused_again_with_another_input(served, http):
    session, first, live = await edited_then_paused(http, served)
    for action, body in (("approve", {}), ("respond", {"output": {"ran": "x"}}), ("restart", {})):
        reply = await http.post(f"{session}/interrupts/{first['ref']}/{action}", json=body, headers=ALICE)
        assert reply.status_code == 409, reply.text
        error = reply.json()["error"]
        assert (error["code"], error["details"]["pause_id"], error["details"]["ref"]) == (
            "pause_changed",
            live["pause_id"],
            first["ref"],
        )
        # how to name it on this surface (found by a probe: every surface was told all of them)
        assert "pause_id in the request body" in error["message"] and "Genkit" not in error["message"]
    assert served.executed == []
    assert [p["pause_id"] for p in (await http.get(session, headers=ALICE)).json()["interrupts"]] == [live["pause_id"]]

    approved = await http.post(
        f"{session}/interrupts/{first['ref']}/approve", json={"pause_id": live["pause_id"]}, headers=ALICE
    )
    assert approved.status_code == 200, approved.text
    assert [e["command"] for e in served.executed] == ["rm -rf /"]


async def test_the_client_gets_the_typed_refusal(served, http):
    session, first, live = await edited_then_paused(http, served)
    async with Client(served.shell, token="alice-token") as client:
        chat = client.agent("shellAgent").chat(session_id=session.rsplit("/", 1)[1])
        with pytest.raises(PauseChanged) as refused:
            await chat.approve(first["ref"])
        assert refused.value.details["pause_id"] == live["pause_id"]
        # worded as a local Chat words it, not for REST (found by a probe: "pause_id in the request body")
        assert "(PendingInterrupt.respond/restart carry it)" in str(refused.value), str(refused.value)
        assert served.executed == []
        await chat.approve(first["ref"], pause_id=live["pause_id"])
    assert [e["command"] for e in served.executed] == ["rm -rf /"]


async def genkit_edited_then_paused(http, url: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Over the Genkit wire: a command pauses, is edited (not approved), and pauses again."""
    message = {"role": "user", "content": [{"text": "Run: rm -rf ./build"}]}
    out = (await http.post(url, json={"data": {"message": message}}, headers=ALICE)).json()["result"]
    [part] = out["message"]["content"]
    request = part["toolRequest"]
    edited = {"toolRequest": {**request, "input": {"command": "rm -rf /"}}, "metadata": {"replacedInput": True}}
    body = {"data": {"resume": {"restart": [edited]}}, "init": {"snapshotId": out["snapshotId"]}}
    paused = (await http.post(url, json=body, headers=ALICE)).json()["result"]
    assert paused["finishReason"] == "interrupted"
    return out, request, paused


async def test_the_genkit_wire_binds_answers_to_what_its_snapshot_or_its_input_shows(served, http):
    url = served.shell + "/agents/shellAgent"
    out, request, paused = await genkit_edited_then_paused(http, url)
    assert served.executed == []

    # a response by session id carries only the ref: refused, naming the live pause
    answer = {"toolResponse": {"ref": request["ref"], "name": "run_shell", "output": {"ran": "nothing"}}}
    by_session = {"data": {"resume": {"respond": [answer]}}, "init": {"sessionId": out["sessionId"]}}
    refused = await http.post(url, json=by_session, headers=ALICE)
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "pause_changed"
    assert "answer from the snapshot that shows it" in refused.json()["error"]["message"]
    # an approval carrying the input it was shown (as Genkit's clients send it) runs that input
    approval = {
        "toolRequest": {**request, "input": {"command": "rm -rf /"}},
        "metadata": {"resumed": {"tool_approved": True}},
    }
    done = await http.post(
        url,
        json={"data": {"resume": {"restart": [approval]}}, "init": {"snapshotId": paused["snapshotId"]}},
        headers=ALICE,
    )
    assert done.status_code == 200, done.text
    assert [e["command"] for e in served.executed] == ["rm -rf /"]


async def test_a_genkit_answer_from_the_newest_snapshot_answers_the_pause_it_showed(served, http):
    url = served.shell + "/agents/shellAgent"
    _, request, paused = await genkit_edited_then_paused(http, url)
    answer = {"toolResponse": {"ref": request["ref"], "name": "run_shell", "output": {"ran": "by hand"}}}
    reply = await http.post(
        url,
        json={"data": {"resume": {"respond": [answer]}}, "init": {"snapshotId": paused["snapshotId"]}},
        headers=ALICE,
    )
    assert reply.status_code == 200, reply.text
    assert reply.json()["result"]["finishReason"] == "stop" and served.executed == []
