"""The agent endpoint speaks the reference's wire protocol: raw HTTP built from its documented
JSON shapes, SSE parsed by hand, exact shapes asserted; and genkit's own ``remote_agent``."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from pausepoint import Pausepoint, ToolCallDelta
from pausepoint.errors import ModelUnavailable
from pausepoint.server import BearerTokens, create_app
from pausepoint.stores import SqliteSessionStore
from pausepoint.testing import ScriptedModel, tool_call
from tests.server.conftest import ALICE, BOB
from tests.server.harness import serve_in_thread

GENKIT_PYTHON = os.environ.get("PAUSEPOINT_GENKIT_PYTHON", "/tmp/anchor-genkit-venv/bin/python")
SSE = {**ALICE, "Accept": "text/event-stream"}


def user(text: str) -> dict[str, Any]:
    return {"message": {"role": "user", "content": [{"text": text}]}}


async def events(http, url: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every ``data:`` payload of an SSE reply, in order."""
    found = []
    async with http.stream("POST", url, json=body, headers=SSE) as reply:
        assert reply.status_code == 200
        assert reply.headers["content-type"].startswith("text/event-stream")
        buffer = (await reply.aread()).decode()
    for block in buffer.split("\n\n"):
        if block.strip():
            assert block.startswith("data: ")
            found.append(json.loads(block[len("data: ") :]))
    return found


async def test_turn_interrupt_resume_and_snapshot_shapes(served, http):
    url = served.bank + "/agents/bankingAgent"
    reply = await http.post(url, json={"data": user("Transfer $500 to savings.")}, headers=ALICE)
    assert reply.status_code == 200
    out = reply.json()["result"]
    session_id, snap = out["sessionId"], out["snapshotId"]
    assert snap.startswith(session_id + ".")
    [part] = out["message"]["content"]
    ref = part["toolRequest"]["ref"]
    assert out == {
        "sessionId": session_id,
        "snapshotId": snap,
        "message": {
            "role": "model",
            "content": [
                {
                    "toolRequest": {
                        "ref": ref,
                        "name": "userApproval",
                        "input": {"action": "transfer_money", "details": "Transfer $500 to savings"},
                    },
                    "metadata": {"interrupt": True},
                }
            ],
        },
        "artifacts": [],
        "finishReason": "interrupted",
    }

    answer = {"toolResponse": {"ref": ref, "name": "userApproval", "output": {"approved": True}}}
    found = await events(http, url, {"data": {"resume": {"respond": [answer]}}, "init": {"snapshotId": snap}})
    chunks = [e["message"] for e in found[:-1]]
    assert all(set(e) == {"message"} for e in found[:-1]) and set(found[-1]) == {"result"}
    assert chunks[0] == {
        "modelChunk": {
            "role": "tool",
            "index": 0,
            "content": [
                {
                    "toolResponse": {
                        "ref": chunks[0]["modelChunk"]["content"][0]["toolResponse"]["ref"],
                        "name": "userApproval",
                        "output": {"approved": True, "feedback": ""},
                    }
                }
            ],
        }
    }
    text = "".join(p["text"] for c in chunks if "modelChunk" in c for p in c["modelChunk"]["content"] if "text" in p)
    assert text == "Transferred $500 to savings."
    result = found[-1]["result"]
    assert chunks[-1] == {"turnEnd": {"snapshotId": result["snapshotId"], "finishReason": "stop"}}
    assert result == {
        "sessionId": session_id,
        "snapshotId": result["snapshotId"],
        "message": {"role": "model", "content": [{"text": "Transferred $500 to savings."}]},
        "artifacts": [],
        "finishReason": "stop",
    }
    assert served.ledger == ["500->savings"]

    for lookup in ({"sessionId": session_id}, {"snapshotId": result["snapshotId"]}):
        reply = await http.post(url + "/getSnapshot", json={"data": lookup}, headers=ALICE)
        snapshot = reply.json()["result"]
        assert set(snapshot) == {
            "snapshotId", "sessionId", "parentId", "createdAt", "updatedAt", "status", "finishReason", "state",
        }  # fmt: skip
        assert (snapshot["snapshotId"], snapshot["parentId"], snapshot["status"], snapshot["finishReason"]) == (
            result["snapshotId"],
            snap,  # the turn before: the pause
            "completed",
            "stop",
        )
        assert snapshot["createdAt"] < snapshot["updatedAt"]  # the resume began, then ended
        assert [m["role"] for m in snapshot["state"]["messages"]] == ["user", "model", "tool", "model", "tool", "model"]
    first = (await http.post(url + "/getSnapshot", json={"data": {"snapshotId": snap}}, headers=ALICE)).json()
    assert first["error"]["details"]["latest_snapshot_id"] == result["snapshotId"]  # sessions do not branch

    reply = await http.post(url + "/abort", json={"data": {"snapshotId": result["snapshotId"]}}, headers=ALICE)
    assert reply.json() == {"result": {"snapshotId": result["snapshotId"], "status": "completed"}}

    # the older snapshot is refused, and nothing ran
    reply = await http.post(url, json={"data": user("again"), "init": {"snapshotId": snap}}, headers=ALICE)
    assert reply.status_code == 409
    error = reply.json()["error"]
    assert error["code"] == "stale_snapshot" and error["status"] == "INVALID_ARGUMENT"  # as the reference says
    assert error["details"]["code"] == "stale_snapshot" and error["details"]["reason"] == "SNAPSHOT_NOT_RESUMABLE"
    assert error["details"]["latest_snapshot_id"] == result["snapshotId"]
    reply = await http.post(url + "/getSnapshot", json={"data": {"snapshotId": snap}}, headers=ALICE)
    assert reply.status_code == 409

    # Genkit's reasons, which its client reads as err.reason (found by a probe: they were missing)
    for init in ({"snapshotId": session_id + ".999"}, {"snapshotId": "nope"}):
        reply = await http.post(url, json={"data": user("again"), "init": init}, headers=ALICE)
        assert (reply.status_code, reply.json()["error"]["details"]["reason"]) == (404, "SNAPSHOT_NOT_FOUND")
    reply = await http.post(url + "/getSnapshot", json={"data": {"snapshotId": session_id + ".999"}}, headers=ALICE)
    assert reply.json()["error"]["details"]["reason"] == "SNAPSHOT_NOT_FOUND"
    paired = {"snapshotId": result["snapshotId"], "sessionId": "another-session"}
    reply = await http.post(url, json={"data": user("again"), "init": paired}, headers=ALICE)
    assert (reply.status_code, reply.json()["error"]["details"]["reason"]) == (400, "INVALID_SESSION_ID")


async def test_a_paused_call_streams_once_and_the_output_marks_it(served, http):
    url = served.shell + "/agents/shellAgent"
    found = await events(http, url, {"data": user("Run: rm -rf ./build")})
    streamed = [p for e in found[:-1] for p in e["message"].get("modelChunk", {}).get("content", [])]
    [request] = streamed  # the call, once, with its ref; a pause is not a chunk of its own
    ref = request["toolRequest"]["ref"]
    assert request == {"toolRequest": {"ref": ref, "name": "run_shell", "input": {"command": "rm -rf ./build"}}}
    metadata = {"command": "rm -rf ./build", "reason": "The command can modify files."}
    result = found[-1]["result"]
    interrupt_parts = result["message"]["content"]
    assert interrupt_parts == [{**request, "metadata": {"interrupt": metadata}}]  # the same call, the same ref

    restart = {
        "toolRequest": {"ref": interrupt_parts[0]["toolRequest"]["ref"], "name": "run_shell",
                        "input": {"command": "rm -rf ./tmp"}},
        "metadata": {"resumed": {"tool_approved": True}, "replacedInput": {"command": "rm -rf ./build"}},
    }  # fmt: skip
    odd = {**restart, "metadata": {**restart["metadata"], "resumed": 5}}
    body = {"data": {"resume": {"restart": [odd]}}, "init": {"snapshotId": result["snapshotId"]}}
    refused = await http.post(url, json=body, headers=ALICE)  # in words that say what it takes
    assert refused.status_code == 400 and "an object or a boolean" in refused.json()["error"]["message"]
    body = {"data": {"resume": {"restart": [restart]}}, "init": {"snapshotId": result["snapshotId"]}}
    reply = await http.post(url, json=body, headers=ALICE)
    assert reply.json()["result"]["finishReason"] == "stop"
    assert served.executed == [
        {"command": "rm -rf ./tmp", "resumed_metadata": {"tool_approved": True},
         "original_input": {"command": "rm -rf ./build"}}
    ]  # fmt: skip


async def test_client_held_state_is_refused(served, http):
    url = served.bank + "/agents/bankingAgent"
    state = {"messages": [{"role": "user", "content": [{"text": "hi"}]}]}
    reply = await http.post(url, json={"data": user("hi"), "init": {"state": state}}, headers=ALICE)
    assert reply.status_code == 400
    assert reply.json()["error"]["code"] == "client_state_refused"


async def test_genkit_fastapis_other_spellings_name_the_session(served, http):
    """What genkit-fastapi takes besides the camelCase ids: ``?session_id=`` (or ``?thread_id=``)
    on a turn, ``init.session_id``, and snake_case ids for ``getSnapshot`` / ``abort``. A
    session named so is continued, never silently replaced by a new one (found by a probe)."""
    url = served.lab + "/agents/labAgent"
    first = (await http.post(url, json={"data": user("hello")}, headers=ALICE)).json()["result"]
    session = first["sessionId"]
    for query, init in (
        (f"?session_id={session}", None),
        (f"?thread_id={session}", None),
        ("", {"session_id": session}),
    ):
        body = {"data": user("again")} | ({"init": init} if init else {})
        reply = await http.post(url + query, json=body, headers=ALICE)
        assert reply.status_code == 200, reply.text
        assert reply.json()["result"]["sessionId"] == session
    by_session = await http.post(url + "/getSnapshot", json={"data": {"session_id": session}}, headers=ALICE)
    latest = by_session.json()["result"]
    assert (latest["sessionId"], len(latest["state"]["messages"])) == (session, 8)
    by_snapshot = await http.post(
        url + "/getSnapshot", json={"data": {"snapshot_id": latest["snapshotId"]}}, headers=ALICE
    )
    assert by_snapshot.json()["result"] == latest
    # init's own id comes first, as genkit-fastapi's does: the query names the session only when it names none
    other = (await http.post(url, json={"data": user("another")}, headers=ALICE)).json()["result"]["sessionId"]
    body = {"data": user("which?"), "init": {"sessionId": other}}
    reply = await http.post(url + f"?session_id={session}", json=body, headers=ALICE)
    assert reply.json()["result"]["sessionId"] == other
    # An empty id is refused, not taken for "a new session" (found by a probe).
    sessions = served.lab + "/v1/agents/labAgent/sessions?limit=500"
    before = (await http.get(sessions, headers=ALICE)).json()["sessions"]
    for init, code in (({"sessionId": ""}, "invalid_session_id"), ({"snapshotId": ""}, "invalid_request")):
        reply = await http.post(url, json={"data": user("hi"), "init": init}, headers=ALICE)
        assert (reply.status_code, reply.json()["error"]["code"]) == (400, code), init
    for query in ("?session_id=", "?thread_id="):
        reply = await http.post(url + query, json={"data": user("hi")}, headers=ALICE)
        assert (reply.status_code, reply.json()["error"]["code"]) == (400, "invalid_session_id"), query
    assert (await http.get(sessions, headers=ALICE)).json()["sessions"] == before


async def test_a_session_or_snapshot_named_twice_is_refused_wherever_it_is_named(served, http):
    """Found by a probe: ``getSnapshot`` and ``abort`` took ``sessionId`` beside ``session_id``
    (naming another session) and read the camelCase one; a query giving ``session_id`` twice, or
    ``session_id`` and ``thread_id``, ran the turn in the last one; ``init`` naming the session in
    both spellings was refused as "Extra inputs are not permitted". Each is one name given twice:
    400, nothing read, run or written."""
    url = served.lab + "/agents/labAgent"
    one = (await http.post(url, json={"data": user("hello")}, headers=ALICE)).json()["result"]
    two = (await http.post(url, json={"data": user("hello")}, headers=ALICE)).json()["result"]
    sessions = served.lab + "/v1/agents/labAgent/sessions?limit=500"
    before = (await http.get(sessions, headers=ALICE)).json()["sessions"]
    both = {
        "getSnapshot": {"sessionId": one["sessionId"], "session_id": two["sessionId"]},
        "abort": {"snapshotId": one["snapshotId"], "snapshot_id": two["snapshotId"]},
    }
    for route, data in both.items():
        reply = await http.post(f"{url}/{route}", json={"data": data}, headers=ALICE)
        assert (reply.status_code, reply.json()["error"]["code"]) == (400, "invalid_request"), route
        assert "twice" in reply.json()["error"]["message"], route
    for init in ({"sessionId": one["sessionId"], "session_id": one["sessionId"]},
                 {"snapshotId": one["snapshotId"], "snapshot_id": one["snapshotId"]}):  # fmt: skip
        reply = await http.post(url, json={"data": user("again"), "init": init}, headers=ALICE)
        assert reply.status_code == 400, init
        assert "twice" in reply.json()["error"]["message"] and "Extra inputs" not in reply.text, init
    for query in (
        f"?session_id={one['sessionId']}&session_id={two['sessionId']}",
        f"?session_id={two['sessionId']}&thread_id={one['sessionId']}",
        f"?session_id=&session_id={one['sessionId']}",
    ):
        reply = await http.post(url + query, json={"data": user("again")}, headers=ALICE)
        assert (reply.status_code, reply.json()["error"]["code"]) == (400, "invalid_request"), query
    assert (await http.get(sessions, headers=ALICE)).json()["sessions"] == before  # nothing ran
    # the shape a refusal shows is JSON a curl user can copy (found by a probe: Python's quotes)
    shapeless = await http.post(f"{url}/getSnapshot", json={"data": 5}, headers=ALICE)
    assert '{"data": {"snapshotId": ...}}' in shapeless.json()["error"]["message"], shapeless.text
    # REST's query parameters too: a filter or a bound given twice is not read as its last value
    for query in ("?pending=true&pending=false", "?limit=1&limit=100000"):
        reply = await http.get(served.lab + "/v1/agents/labAgent/sessions" + query, headers=ALICE)
        assert (reply.status_code, reply.json()["error"]["code"]) == (400, "invalid_request"), query
        assert "given more than once" in reply.json()["error"]["message"]


async def test_a_refused_streamed_resume_is_a_4xx_not_a_broken_stream(served, http):
    url = served.bank + "/agents/bankingAgent"
    out = (await http.post(url, json={"data": user("Transfer $1 to a.")}, headers=ALICE)).json()["result"]
    answer = {"toolResponse": {"ref": "nope", "name": "userApproval", "output": {"approved": True}}}
    body = {"data": {"resume": {"respond": [answer]}}, "init": {"snapshotId": out["snapshotId"]}}
    reply = await http.post(url, json=body, headers=SSE)
    assert reply.status_code == 404
    assert reply.json()["error"]["code"] == "unknown_interrupt"
    assert reply.json()["error"]["status"] == "INVALID_ARGUMENT"  # the reference: an unresolved tool request
    assert reply.json()["error"]["details"]["reason"] == "UNRESOLVED_TOOL_REQUEST"


async def test_a_model_raising_an_exception_of_its_own_is_a_typed_model_error_on_every_surface(served, http):
    crash = "Crash: now"
    replies = {
        "wire": await http.post(served.lab + "/agents/labAgent", json={"data": user(crash)}, headers=ALICE),
        "wire stream": await http.post(served.lab + "/agents/labAgent", json={"data": user(crash)}, headers=SSE),
        "rest": await http.post(served.lab + "/v1/agents/labAgent/sessions", json={"message": crash}, headers=ALICE),
    }
    for surface, reply in replies.items():
        assert reply.status_code == 502, (surface, reply.text)  # a failed model, not an internal error (500)
        error = reply.json()["error"]
        assert (error["code"], error["status"]) == ("model_error", "UNAVAILABLE"), surface
        assert "RuntimeError" in error["message"] and "internal detail" not in error["message"], surface


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_model_failure_after_a_tool_ran_is_a_failed_turn_with_a_snapshot_of_its_own(served, http, streamed):
    """As the reference answers a failed turn: 200, finish reason ``failed``, its snapshot. The
    tool's result is kept (it ran once), so the turn has an end of its own: the snapshot before
    it is never rewritten, and a Genkit client continues from that last finished turn."""
    url = served.lab + "/agents/labAgent"
    first = (await http.post(url, json={"data": user("hello")}, headers=ALICE)).json()["result"]
    body = {"data": user("Crash after: check balance of A"), "init": {"snapshotId": first["snapshotId"]}}
    if streamed:
        found = await events(http, url, body)
        assert found[-2] == {"message": {"turnEnd": {"snapshotId": found[-1]["result"]["snapshotId"],
                                                     "finishReason": "failed"}}}  # fmt: skip
        out = found[-1]["result"]
    else:
        reply = await http.post(url, json=body, headers=ALICE)
        assert reply.status_code == 200, reply.text
        out = reply.json()["result"]
    assert out["finishReason"] == "failed" and out["snapshotId"] != first["snapshotId"]
    assert "ModelError" in out["error"]["message"] and "internal detail" not in out["error"]["message"]
    # The status and code of the model's failure, as when it fails a call before anything was recorded.
    assert (out["error"]["status"], out["error"]["details"]) == ("UNAVAILABLE", {"code": "model_error"})
    stale = await http.post(url + "/getSnapshot", json={"data": {"snapshotId": first["snapshotId"]}}, headers=ALICE)
    assert stale.status_code == 409 and stale.json()["error"]["code"] == "stale_snapshot"
    latest = await http.post(url + "/getSnapshot", json={"data": {"sessionId": first["sessionId"]}}, headers=ALICE)
    snap = latest.json()["result"]
    assert (snap["snapshotId"], snap["status"]) == (out["snapshotId"], "failed")
    assert snap["error"] == out["error"]
    assert [m["role"] for m in snap["state"]["messages"]] == ["user", "model", "user", "model", "tool"]
    body = {"data": user("hello again"), "init": {"snapshotId": first["snapshotId"]}}
    again = (await http.post(url, json=body, headers=ALICE)).json()["result"]
    assert again["finishReason"] == "stop"
    latest = await http.post(url + "/getSnapshot", json={"data": {"snapshotId": again["snapshotId"]}}, headers=ALICE)
    assert [m["role"] for m in latest.json()["result"]["state"]["messages"]][5:] == ["user", "model"]
    assert latest.json()["result"]["parentId"] == out["snapshotId"]
    assert served.events.lines.count("get_balance:A") == 1  # the tool ran once


async def test_a_model_failure_after_a_tool_ran_is_a_failed_response_on_rest_too(served, http):
    """The same turn over REST: 200 with ``finish_reason: failed`` (as a tool's failure that
    fails a turn), not an error inviting the same send again — which would run the tool again."""
    url = served.lab + "/v1/agents/labAgent/sessions"
    reply = await http.post(url, json={"message": "Crash after: check balance of B"}, headers=ALICE)
    assert reply.status_code == 200, reply.text
    out = reply.json()
    assert out["finish_reason"] == "failed" and out["error"].startswith("ModelError: ")
    history = await http.get(f"{url}/{out['session_id']}/history", headers=ALICE)
    assert [m["role"] for m in history.json()["messages"]] == ["user", "model", "tool"]
    async with http.stream("POST", url, json={"message": "Crash after: check balance of C"},
                           headers={**ALICE, "Accept": "text/event-stream"}) as streamed:  # fmt: skip
        body = (await streamed.aread()).decode()
    assert streamed.status_code == 200 and "event: error" not in body
    assert body.rstrip().splitlines()[-1].startswith("data: ") and '"finish_reason":"failed"' in body
    assert served.events.lines.count("get_balance:B") == served.events.lines.count("get_balance:C") == 1


async def test_a_message_to_a_running_detached_turns_snapshot_says_genkits_reason(served, http):
    """Genkit's server refuses to continue a snapshot whose turn still runs with the reason
    ``SNAPSHOT_NOT_RESUMABLE``, which its client reads as ``err.reason`` (found by a probe)."""
    url = served.lab + "/agents/labAgent"
    detached = (await http.post(url, json={"data": {**user("Slow: think"), "detach": True}}, headers=ALICE)).json()
    snapshot = detached["result"]["snapshotId"]
    assert await asyncio.to_thread(served.events.slow_started.wait, 60)
    body = {"data": user("and now?"), "init": {"snapshotId": snapshot}}
    refused = await http.post(url, json=body, headers=ALICE)
    error = refused.json()["error"]
    assert (refused.status_code, error["code"], error["details"]["reason"]) == (
        409,
        "turn_in_progress",
        "SNAPSHOT_NOT_RESUMABLE",
    )
    aborted = await http.post(url + "/abort", json={"data": {"snapshotId": snapshot}}, headers=ALICE)
    assert aborted.json()["result"]["status"] == "pending"  # it ran until now


async def test_the_turn_after_a_detached_one_names_it_as_parent_by_the_id_it_was_issued(served, http):
    url = served.lab + "/agents/labAgent"
    detached = (await http.post(url, json={"data": {**user("hello"), "detach": True}}, headers=ALICE)).json()["result"]
    for _ in range(200):  # poll until it ends, as a client does
        polled = await http.post(url + "/getSnapshot", json={"data": {"snapshotId": detached["snapshotId"]}},
                                 headers=ALICE)  # fmt: skip
        if polled.json()["result"]["status"] != "pending":
            break
        await asyncio.sleep(0.02)
    assert polled.json()["result"]["status"] == "completed"
    body = {"data": user("again"), "init": {"snapshotId": detached["snapshotId"]}}
    after = (await http.post(url, json=body, headers=ALICE)).json()["result"]
    snapshot = await http.post(url + "/getSnapshot", json={"data": {"snapshotId": after["snapshotId"]}}, headers=ALICE)
    assert snapshot.json()["result"]["parentId"] == detached["snapshotId"]


@pytest.mark.skipif(
    not Path(GENKIT_PYTHON).exists(), reason="genkit 0.12.0 is not installed (PAUSEPOINT_GENKIT_PYTHON)"
)
def test_genkit_remote_agent_drives_the_server_unchanged(served):
    script = Path(__file__).with_name("genkit_remote.py")
    done = subprocess.run(
        [GENKIT_PYTHON, str(script), served.bank + "/agents/bankingAgent", "alice-token"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["paused"] == {
        "finish": "interrupted",
        "name": "userApproval",
        "input": {"action": "transfer_money", "details": "Transfer $500 to savings"},
    }
    assert "".join(seen["texts"]) == seen["text"] == "Transferred $500 to savings."
    assert seen["finish"] == "stop" and seen["snapshot_id"].startswith(seen["session_id"] + ".")
    assert seen["snapshot_messages"] == 6 and seen["abort"] == "completed"
    assert served.ledger == ["500->savings"]


async def test_abort_and_get_snapshot_of_ids_never_issued_are_404(served, http):
    url = served.bank + "/agents/bankingAgent"
    out = (await http.post(url, json={"data": user("hello")}, headers=ALICE)).json()["result"]
    session, version = out["sessionId"], out["snapshotId"].rpartition(".")[2]
    padded = f"{session}.0{version}"  # the issued one spelt another way: one spelling per snapshot (a probe)
    never = (f"{session}.999", f"{session}.\uff11\uff12", f"{session}.1", "nosuch.3", session, f"{session}.", padded)
    for snap in never:
        for route in ("/abort", "/getSnapshot"):
            reply = await http.post(url + route, json={"data": {"snapshotId": snap}}, headers=ALICE)
            assert reply.status_code == 404, (route, snap, reply.text)  # Genkit's client reads a 404 as None
    bobs = (await http.post(url, json={"data": user("hello")}, headers=BOB)).json()["result"]["snapshotId"]
    for snap in (f"{session}.999", "nosuch.3", bobs):  # whatever the session part names: Genkit's words
        turn = {"data": user("again"), "init": {"snapshotId": snap}}
        for route, body in (("/getSnapshot", {"data": {"snapshotId": snap}}), ("", turn)):
            error = (await http.post(url + route, json=body, headers=ALICE)).json()["error"]
            assert (error["code"], error["details"]["reason"]) == ("not_found", "SNAPSHOT_NOT_FOUND"), (route, snap)
            assert error["message"] == f"no snapshot {snap!r}"  # bob's reads as one never issued
    # an id holding a lone surrogate is echoed as text strict parsers read (a probe: its escape)
    lone = ('{"data": {"snapshotId": "' + session + '.8\\udc80"}}').encode()
    reply = await http.post(url + "/getSnapshot", content=lone, headers={**ALICE, "Content-Type": "application/json"})
    assert reply.status_code == 404
    json.dumps(reply.json(), ensure_ascii=False).encode()  # no lone surrogate read back: UnicodeEncodeError
    assert reply.json()["error"]["details"]["snapshot_id"] == f"{session}.8\ufffd"
    reply = await http.post(url + "/abort", json={"data": {"snapshotId": out["snapshotId"]}}, headers=ALICE)
    assert reply.json() == {"result": {"snapshotId": out["snapshotId"], "status": "completed"}}


async def test_a_message_sent_again_with_its_idempotency_key_is_sent_once_on_the_wire(served, http):
    url = served.bank + "/agents/bankingAgent"
    keyed = {**ALICE, "Idempotency-Key": "wire-m1"}
    body = {"data": user("Transfer $7 to ann."), "init": {"sessionId": "wire-keyed-1"}}
    first = await http.post(url, json=body, headers=keyed)
    assert first.status_code == 200 and first.json()["result"]["finishReason"] == "interrupted"
    again = await http.post(url, json=body, headers=keyed)
    assert again.json() == first.json()  # the same snapshot and the same pause: no second turn
    other = {"data": user("Hello!"), "init": {"sessionId": "wire-keyed-1"}}
    reused = await http.post(url, json=other, headers=keyed)
    assert (reused.status_code, reused.json()["error"]["details"]["code"]) == (409, "idempotency_key_reused")
    too_long = await http.post(url, json=body, headers={**ALICE, "Idempotency-Key": "k" * 201})
    assert too_long.status_code == 400
    # with no session named, a retry would start another session: refused, as on REST and MCP (found
    # by a probe: the key was dropped, and a retry ran the turn twice in two sessions)
    listed = served.bank + "/v1/agents/bankingAgent/sessions"
    before = (await http.get(listed, headers=ALICE)).json()["sessions"]
    for _ in range(2):
        unnamed = await http.post(
            url, json={"data": user("Transfer $8 to bo.")}, headers={**ALICE, "Idempotency-Key": "w2"}
        )
        assert unnamed.status_code == 400 and "'init.sessionId' with an id of yours" in unnamed.text, unnamed.text
    assert (await http.get(listed, headers=ALICE)).json()["sessions"] == before and served.ledger == []


async def test_a_keyed_retry_from_the_snapshot_it_answered_gets_the_first_outcome(served, http):
    """Genkit's ``remote_agent`` sends ``init.snapshotId`` on every turn after its first: a retry
    of a lost reply names the snapshot the first request answered, no longer the newest. With the
    same idempotency key it gets the first outcome (found by a probe: ``stale_snapshot``); without
    one, or with another request, the snapshot is stale as ever."""
    url = served.bank + "/agents/bankingAgent"
    paused = (await http.post(url, json={"data": user("Transfer $9 to bob.")}, headers=ALICE)).json()["result"]
    ref, snap = paused["message"]["content"][0]["toolRequest"]["ref"], paused["snapshotId"]
    answer = {"toolResponse": {"ref": ref, "name": "userApproval", "output": {"approved": True}}}
    body = {"data": {"resume": {"respond": [answer]}}, "init": {"snapshotId": snap}}
    keyed = {**ALICE, "Idempotency-Key": "wire-r1"}
    first = await http.post(url, json=body, headers=keyed)
    assert first.status_code == 200 and first.json()["result"]["finishReason"] == "stop"
    again = await http.post(url, json=body, headers=keyed)
    assert (again.status_code, again.json()) == (200, first.json())  # replayed: the transfer ran once
    assert served.ledger.count("9->bob") == 1
    message = {"data": user("Hello there."), "init": {"snapshotId": first.json()["result"]["snapshotId"]}}
    said = await http.post(url, json=message, headers={**ALICE, "Idempotency-Key": "wire-m2"})
    assert (await http.post(url, json=message, headers={**ALICE, "Idempotency-Key": "wire-m2"})).json() == said.json()
    # Without the key, the answer is refused for what happened to its pause — answered already,
    # as by sessionId — not for the snapshot it names (found by a probe: "stale_snapshot" told a
    # second approver nothing); a message from that snapshot is stale as ever.
    unkeyed = await http.post(url, json=body, headers=ALICE)
    assert (unkeyed.status_code, unkeyed.json()["error"]["code"]) == (409, "already_resolved")
    assert unkeyed.json()["error"]["status"] == "FAILED_PRECONDITION" and "already resolved" in unkeyed.text
    stale = await http.post(url, json={"data": user("And?"), "init": {"snapshotId": snap}}, headers=ALICE)
    assert (stale.status_code, stale.json()["error"]["code"]) == (409, "stale_snapshot")
    assert served.ledger.count("9->bob") == 1
    other = {"data": user("Something else."), "init": {"snapshotId": snap}}
    reused = await http.post(url, json=other, headers=keyed)
    assert (reused.status_code, reused.json()["error"]["code"]) == (409, "idempotency_key_reused")


async def test_a_call_paused_for_approval_is_denied_on_the_wire_as_on_rest(tmp_path, http):
    """A ``requires_approval`` pause takes a denial on the Genkit wire too: a respond part with
    ``metadata.decision: "deny"`` (found by a probe: every wire answer was a respond, refused
    with "takes approve, edit, deny", and the wire had no way to say deny)."""
    ai = Pausepoint()

    @ai.tool(requires_approval=True)
    async def deploy(env: str) -> str:
        """Deploy."""
        return f"deployed {env}"

    steps = [[tool_call("deploy", {"env": "prod"})], "Not deployed."] * 2
    ai.define_agent(name="ops", model=ScriptedModel(steps), tools=[deploy], store=SqliteSessionStore(tmp_path / "d.db"))
    with serve_in_thread(lambda: create_app(ai, auth=BearerTokens({"alice-token": "alice"}))) as url:
        agent = url + "/agents/ops"
        out = (await http.post(agent, json={"data": user("deploy")}, headers=ALICE)).json()["result"]
        ref = out["message"]["content"][0]["toolRequest"]["ref"]

        def answer(**fields: Any) -> dict[str, Any]:
            part = {"toolResponse": {"ref": ref, "name": "deploy", **fields.pop("response", {})}, **fields}
            return {"data": {"resume": {"respond": [part]}}, "init": {"snapshotId": out["snapshotId"]}}

        refused = [
            answer(response={"output": "ok"}),  # a respond: not what an approval takes
            answer(metadata={"decision": "approve"}),
            answer(metadata={"decision": "deny", "reason": 3}),
            answer(metadata={"decision": "deny", "reason": "no"}, response={"output": {"denied": True}}),
        ]
        for body in refused:
            reply = await http.post(agent, json=body, headers=ALICE)
            assert reply.status_code in (400, 422), reply.text
        deny = answer(metadata={"decision": "deny", "reason": "Not today."})
        denied = await http.post(agent, json=deny, headers=ALICE)
        assert denied.status_code == 200, denied.text
        assert denied.json()["result"]["finishReason"] == "stop"
        session = denied.json()["result"]["sessionId"]
        rest = f"{url}/v1/agents/ops/sessions/{session}"
        [entry] = [e for e in (await http.get(rest + "/audit", headers=ALICE)).json()["entries"] if e["ref"] == ref]
        assert (entry["decision"], entry["reason"], entry["via"]) == ("deny", "Not today.", "genkit")
        history = (await http.get(rest + "/history", headers=ALICE)).json()["messages"]
        outputs = [p["output"] for m in history for p in m["parts"] if p.get("kind") == "tool_response"]
        assert outputs == [{"denied": True, "reason": "Not today."}]

        # As Genkit's client sends it: respond_to_interrupt(None, interrupt=..., metadata={...})
        # puts the metadata under interruptResponse.
        body = {"data": user("deploy again"), "init": {"snapshotId": denied.json()["result"]["snapshotId"]}}
        out = (await http.post(agent, json=body, headers=ALICE)).json()["result"]
        ref = out["message"]["content"][0]["toolRequest"]["ref"]
        said = {"interruptResponse": {"decision": "deny", "reason": "Later."}}
        part = {"toolResponse": {"ref": ref, "name": "deploy", "output": None}, "metadata": said}
        body = {"data": {"resume": {"respond": [part]}}, "init": {"snapshotId": out["snapshotId"]}}
        assert (await http.post(agent, json=body, headers=ALICE)).json()["result"]["finishReason"] == "stop"
        trail = (await http.get(rest + "/audit", headers=ALICE)).json()["entries"]
        assert [(e["decision"], e["reason"]) for e in trail if e["ref"] == ref] == [("deny", "Later.")]


async def test_what_a_session_would_not_keep_of_a_wire_message_is_refused_not_dropped(served, http):
    """Metadata on a Genkit message or its parts (and a part's custom, data, reasoning) was taken
    and dropped (found by a probe): it is refused, and nothing is written."""
    url = served.bank + "/agents/bankingAgent"
    text = {"text": "Transfer $5 to x."}
    for message in (
        {"role": "user", "content": [text], "metadata": {"msgmeta": 2}},
        {"role": "user", "content": [{**text, "metadata": {"m": 1}}]},
        {"role": "user", "content": [{**text, "custom": {"c": 1}}]},
        {"role": "user", "content": [{**text, "data": 0}]},
    ):
        reply = await http.post(url, json={"data": {"message": message}}, headers=ALICE)
        assert reply.status_code in (400, 422), reply.text
        assert reply.json()["error"]["details"]["code"] == "invalid_message", reply.text
    listed = await http.get(served.bank + "/v1/agents/bankingAgent/sessions", headers=ALICE)
    assert listed.json()["sessions"] == []
    empty = {"role": "user", "content": [text], "metadata": {}}  # nothing to keep: taken
    ok = await http.post(url, json={"data": {"message": empty}}, headers=ALICE)
    assert ok.status_code == 200, ok.text


async def test_an_answers_interrupt_response_metadata_is_recorded_as_its_own_as_in_python(served, http):
    """Genkit's ``respond_to_interrupt(..., metadata=m)`` sends ``interruptResponse: m`` (``true``
    without one): it reached the audit trail wrapped (found by a probe), where Python's
    ``pause.respond(..., metadata=m)`` records ``m``."""
    url = served.bank + "/agents/bankingAgent"
    recorded = []
    for said in ({"interruptResponse": {"note": "ok"}, "ticket": "T-1"}, {"interruptResponse": True}):
        out = (await http.post(url, json={"data": user("Transfer $5 to x.")}, headers=ALICE)).json()["result"]
        [part] = [p for p in out["message"]["content"] if "toolRequest" in p]
        ref, name = part["toolRequest"]["ref"], part["toolRequest"]["name"]
        answer = {"toolResponse": {"ref": ref, "name": name, "output": {"approved": False}}, "metadata": said}
        body = {"data": {"resume": {"respond": [answer]}}, "init": {"snapshotId": out["snapshotId"]}}
        assert (await http.post(url, json=body, headers=ALICE)).status_code == 200
        audit = f"{served.bank}/v1/agents/bankingAgent/sessions/{out['sessionId']}/audit"
        [entry] = [e for e in (await http.get(audit, headers=ALICE)).json()["entries"] if e["ref"] == ref]
        recorded.append(entry["metadata"])
    assert recorded == [{"ticket": "T-1", "note": "ok"}, None]


async def test_answers_sent_with_a_snapshot_answer_the_pauses_it_showed_after_another_surface_answered_one(
    tmp_path, http
):
    """README: answers sent with ``init.snapshotId`` answer the pauses that snapshot showed. A
    REST approval of one of its two pauses made a newer snapshot, and the wire's approval of the
    other, sent with the id the client held, was refused ``stale_snapshot`` (found by a probe);
    it answers that pause now, and one since answered is refused for that."""
    ai = Pausepoint()
    ran: list[str] = []

    @ai.tool(requires_approval=True)
    async def deploy(env: str) -> str:
        """Deploy."""
        ran.append(env)
        return f"deployed {env}"

    both = [tool_call("deploy", {"env": "staging"}), tool_call("deploy", {"env": "prod"})]
    steps = [both, "Both deployed."]
    ai.define_agent(name="ops", model=ScriptedModel(steps), tools=[deploy], store=SqliteSessionStore(tmp_path / "d.db"))
    with serve_in_thread(lambda: create_app(ai, auth=BearerTokens({"alice-token": "alice"}))) as url:
        agent = url + "/agents/ops"
        out = (await http.post(agent, json={"data": user("deploy both")}, headers=ALICE)).json()["result"]
        staging, prod = (part["toolRequest"] for part in out["message"]["content"])
        held = out["snapshotId"]
        rest = f"{url}/v1/agents/ops/sessions/{out['sessionId']}"
        assert (await http.post(f"{rest}/interrupts/{staging['ref']}/approve", headers=ALICE)).status_code == 200

        def restart(call: dict[str, Any]) -> dict[str, Any]:
            return {"data": {"resume": {"restart": [{"toolRequest": call}]}}, "init": {"snapshotId": held}}

        again = await http.post(agent, json=restart(staging), headers=ALICE)
        assert (again.status_code, again.json()["error"]["code"]) == (409, "already_resolved")
        done = await http.post(agent, json=restart(prod), headers=ALICE)
        assert done.status_code == 200, done.text
        assert done.json()["result"]["finishReason"] == "stop" and ran == ["staging", "prod"]
        message = await http.post(agent, json={"data": user("And?"), "init": {"snapshotId": held}}, headers=ALICE)
        assert (message.status_code, message.json()["error"]["code"]) == (409, "stale_snapshot")  # as ever


async def test_a_tool_that_fails_the_turn_says_genkits_reason(tmp_path, http):
    """``result.error`` of a turn a tool failed (``tool_errors="fail"``) carries Genkit's reason,
    ``TOOL_FAILED``, beside pausepoint's code (found by a probe: it had the code only)."""
    ai = Pausepoint()

    @ai.tool()
    def explode(what: str) -> str:
        """Explodes."""
        raise RuntimeError(f"{what} exploded")

    steps = [[tool_call("explode", {"what": "it"})], "unreached"]
    store = SqliteSessionStore(tmp_path / "f.db")
    ai.define_agent(name="boom", model=ScriptedModel(steps), tools=[explode], store=store, tool_errors="fail")
    with serve_in_thread(lambda: create_app(ai, auth=BearerTokens({"alice-token": "alice"}))) as url:
        reply = await http.post(url + "/agents/boom", json={"data": user("go")}, headers=ALICE)
    out = reply.json()["result"]
    assert (reply.status_code, out["finishReason"], out["error"]["status"]) == (200, "failed", "INTERNAL")
    assert out["error"]["details"] == {"code": "tool_failed", "reason": "TOOL_FAILED"}


class CutModel:
    """A model whose connection is cut after a piece of a tool call's arguments streamed."""

    name = "cut"

    async def generate(self, request: Any, on_chunk: Any = None) -> Any:
        if on_chunk is not None:
            on_chunk(ToolCallDelta(index=0, name="lookup", arguments_delta='{"q": "'))
        raise ModelUnavailable("the connection to the model was cut")


async def test_a_stream_whose_model_fails_before_saying_anything_the_wire_carries_is_refused_with_its_status():
    """Found by a probe: the wire carries no tool-call deltas, so a model that failed after
    streaming only those was answered 200 with the error as the stream's only event, where the
    JSON request is a 503; a stream is refused before its first chunk the wire carries (REST,
    which carries the delta, answers 200 and ends with the error, as documented)."""
    ai = Pausepoint()

    @ai.tool()
    async def lookup(q: str) -> str:
        """Look something up."""
        return q

    ai.define_agent(name="cut", model=CutModel(), tools=[lookup])
    app = create_app(ai, auth=BearerTokens({"alice-token": "alice"}), console=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
        wire = await http.post("/agents/cut", json={"data": user("hi")}, headers=SSE)
        rest = await http.post("/v1/agents/cut/sessions", json={"message": "hi"}, headers=SSE)
    assert wire.status_code == 503 and wire.headers["content-type"].startswith("application/json"), wire.text
    assert wire.json()["error"]["code"] == "model_unavailable"
    assert rest.status_code == 200 and "event: error" in rest.text and "tool_call_delta" in rest.text
