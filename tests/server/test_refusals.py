"""Refusals over HTTP: each a 4xx with a JSON error body, and the session unchanged."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from pausepoint.errors import DefinitionError
from pausepoint.server import Limits
from tests.server.conftest import ALICE, BOB
from tests.server.harness import build_app, serve_in_thread


async def paused_session(served, http) -> tuple[str, str, str]:
    reply = await http.post(served.bank + "/v1/agents/bankingAgent/sessions", json={"message": "Transfer $5 to z."},
                            headers=ALICE)  # fmt: skip
    body = reply.json()
    return body["session_id"], body["interrupts"][0]["ref"], body["interrupts"][0]["name"]


async def state_of(served, http, session_id: str) -> Any:
    reply = await http.get(f"{served.bank}/v1/agents/bankingAgent/sessions/{session_id}", headers=ALICE)
    assert reply.status_code == 200
    return reply.json()


def assert_error(reply, status: int, code: str) -> None:
    assert reply.status_code == status, reply.text
    assert reply.headers["content-type"].startswith("application/json")
    error = reply.json()["error"]
    assert error["code"] == code and error["message"] and isinstance(error["details"], dict)


async def test_refusals_leave_the_session_unchanged(served, http):
    session_id, ref, name = await paused_session(served, http)
    before = await state_of(served, http, session_id)
    base = f"{served.bank}/v1/agents/bankingAgent/sessions/{session_id}"
    genkit = served.bank + "/agents/bankingAgent"
    cases: list[tuple[str, str, dict[str, Any], Any, int, str]] = [
        ("malformed JSON", base + "/resume", ALICE, b"{not json", 400, "invalid_request"),
        ("not an object", base + "/resume", ALICE, b"[1, 2]", 400, "invalid_request"),
        ("wrong types", base + "/resume", ALICE, {"respond": [{"ref": 7, "name": name}]}, 400, "invalid_request"),
        ("unknown field", base + "/resume", ALICE, {"answers": []}, 400, "invalid_request"),
        ("unknown ref", base + "/interrupts/nope/respond", ALICE, {"output": {"approved": True}}, 404,
         "unknown_interrupt"),
        ("wrong name", base + "/resume", ALICE, {"respond": [{"ref": ref, "name": "other", "output": {}}]}, 422,
         "interrupt_name_mismatch"),
        ("invalid answer", base + f"/interrupts/{ref}/respond", ALICE, {"output": {"approved": "maybe"}}, 422,
         "invalid_answer"),
        ("a denial with an output", base + "/resume", ALICE,
         {"respond": [{"ref": ref, "name": name, "decision": "deny", "reason": "r", "output": "x"}]}, 422,
         "invalid_answer"),
        ("an answer with a reason", base + "/resume", ALICE,
         {"respond": [{"ref": ref, "name": name, "output": {"approved": True}, "reason": "r"}]}, 422,
         "invalid_answer"),
        ("unknown action", base + f"/interrupts/{ref}/accept", ALICE, {}, 404, "not_found"),
        ("a grant's uses that is no count", base + f"/interrupts/{ref}/respond", ALICE,
         {"output": {"approved": True}, "grant": {"uses": True}}, 400, "invalid_request"),
        ("a grant's uses as text", base + f"/interrupts/{ref}/respond", ALICE,
         {"output": {"approved": True}, "grant": {"uses": "2"}}, 400, "invalid_request"),
        ("a grant's time as text", base + f"/interrupts/{ref}/respond", ALICE,
         {"output": {"approved": True}, "grant": {"ttl_seconds": "60"}}, 400, "invalid_request"),
        ("a grant's time that is no number", base + f"/interrupts/{ref}/respond", ALICE,
         {"output": {"approved": True}, "grant": {"ttl_seconds": True}}, 400, "invalid_request"),
        # a value out of range is a grant refused, as a local chat's is (found by a probe: 400 and
        # pydantic's report, where the client raised InvalidRequest and a local chat InvalidGrant)
        ("a grant's time below a microsecond", base + f"/interrupts/{ref}/respond", ALICE,
         {"output": {"approved": True}, "grant": {"ttl_seconds": 1e-7}}, 422, "invalid_grant"),
        ("a grant's time past any float", base + f"/interrupts/{ref}/respond", ALICE,  # was a 500 (a probe)
         {"output": {"approved": True}, "grant": {"ttl_seconds": 10**309}}, 422, "invalid_grant"),
        ("a grant's uses past any session's", base + f"/interrupts/{ref}/respond", ALICE,
         {"output": {"approved": True}, "grant": {"uses": 10**10}}, 422, "invalid_grant"),
        # "" is no pause's id: not "the live pause" (found by a probe: it answered the live one)
        ("an empty pause id", base + f"/interrupts/{ref}/respond", ALICE,
         {"output": {"approved": True}, "pause_id": ""}, 404, "unknown_interrupt"),
        ("unknown agent", served.bank + "/v1/agents/nobody/sessions/x/resume", ALICE, {}, 404, "not_found"),
        ("other principal", base + f"/interrupts/{ref}/respond", BOB, {"output": {"approved": True}}, 404,
         "session_not_found"),
        ("missing token", base + f"/interrupts/{ref}/respond", {}, {"output": {"approved": True}}, 401,
         "unauthenticated"),
        ("bad token", base + f"/interrupts/{ref}/respond", {"Authorization": "Bearer forged"},
         {"output": {"approved": True}}, 401, "unauthenticated"),
        ("body over the limit", base + "/resume", ALICE, {"metadata": {"x": "y" * 70_000}}, 413, "request_too_large"),
        ("message over the limit", base + "/messages", ALICE, {"message": "m" * 9_000}, 413, "request_too_large"),
        ("send while paused", base + "/messages", ALICE, {"message": "hi"}, 409, "pending_interrupts"),
        ("malformed", base + f"/interrupts/{ref}/respond", ALICE, b'{"output": ', 400, "invalid_request"),
        ("bytes that are no text", base + f"/interrupts/{ref}/respond", ALICE, b"\xff\xfe\x00", 400,
         "invalid_request"),
        ("JSON that is no object", base + f"/interrupts/{ref}/respond", ALICE, b"[1]", 400, "invalid_request"),
        ("a name given twice", base + f"/interrupts/{ref}/respond", ALICE,
         b'{"output": {"approved": false, "feedback": "NO", "approved": true}}', 400, "invalid_request"),
        ("genkit name given twice", genkit, ALICE,
         b'{"data": {"resume": {"respond": []}}, "init": {"sessionId": "a", "sessionId": "' + session_id.encode()
         + b'"}}', 400, "invalid_request"),
        ("genkit malformed", genkit, ALICE, b"{", 400, "invalid_request"),
        ("genkit wrong types", genkit, ALICE, {"data": {"message": {"role": "user", "content": "hi"}}}, 400,
         "invalid_request"),
        ("genkit other principal", genkit, BOB,
         {"data": {"resume": {"respond": []}}, "init": {"sessionId": session_id}}, 404, "session_not_found"),
        ("genkit detach that is no boolean", genkit, ALICE,
         {"data": {"message": {"role": "user", "content": [{"text": "x"}]}, "detach": "yes"},
          "init": {"sessionId": session_id}}, 400, "invalid_request"),
        ("genkit message beside a resume", genkit, ALICE,
         {"data": {"message": {"role": "user", "content": [{"text": "x"}]}, "resume": {"respond": []}},
          "init": {"sessionId": session_id}}, 400, "invalid_request"),
        ("genkit toolResponse content, kept nowhere", genkit, ALICE,
         {"data": {"resume": {"respond": [{"toolResponse": {"ref": ref, "name": name, "output": {"approved": True},
                                                            "content": [{"text": "extra"}]}}]}},
          "init": {"sessionId": session_id}}, 400, "invalid_request"),
        ("genkit interruptResponse that is no object", genkit, ALICE,  # was taken and dropped (a probe)
         {"data": {"resume": {"respond": [{"toolResponse": {"ref": ref, "name": name, "output": {"approved": True}},
                                           "metadata": {"interruptResponse": "yes"}}]}},
          "init": {"sessionId": session_id}}, 400, "invalid_request"),
        ("genkit user message with a tool request", genkit, ALICE,
         {"data": {"message": {"role": "user", "content": [{"toolRequest": {"name": name, "ref": ref}}]}},
          "init": {"sessionId": session_id}}, 422, "invalid_message"),
        ("genkit unknown snapshot", genkit, ALICE, {"data": {"message": {"role": "user", "content": [{"text": "x"}]}},
         "init": {"snapshotId": session_id + ".999"}}, 404, "not_found"),
    ]  # fmt: skip
    for label, url, headers, body, status, code in cases:
        if isinstance(body, bytes):
            reply = await http.post(url, content=body, headers={**headers, "Content-Type": "application/json"})
        else:
            reply = await http.post(url, json=body, headers=headers)
        try:
            assert_error(reply, status, code)
        except AssertionError as exc:
            raise AssertionError(f"{label}: {exc}") from exc
        assert await state_of(served, http, session_id) == before, label
    assert served.ledger == []

    # the next valid answer still works
    reply = await http.post(base + f"/interrupts/{ref}/respond", json={"output": {"approved": True}}, headers=ALICE)
    assert reply.status_code == 200 and reply.json()["finish_reason"] == "stop"
    after = await state_of(served, http, session_id)
    # a replayed answer, and a stale ref: refused, nothing more runs
    reply = await http.post(base + f"/interrupts/{ref}/respond", json={"output": {"approved": True}}, headers=ALICE)
    assert_error(reply, 409, "already_resolved")
    assert await state_of(served, http, session_id) == after
    assert served.ledger == ["5->z"]


async def test_a_message_of_no_parts_is_refused_on_rest_and_the_wire(served, http):
    rest = await http.post(served.bank + "/v1/agents/bankingAgent/sessions", json={"message": []}, headers=ALICE)
    assert_error(rest, 422, "invalid_message")
    wire = {"data": {"message": {"role": "user", "content": []}}}
    reply = await http.post(served.bank + "/agents/bankingAgent", json=wire, headers=ALICE)
    assert_error(reply, 422, "invalid_message")
    listed = await http.get(served.bank + "/v1/agents/bankingAgent/sessions", headers=ALICE)
    assert listed.json()["sessions"] == []  # nothing was made


async def test_a_message_to_a_paused_session_says_how_to_answer_on_the_surface_it_came_by(served, http):
    """The same refusal on every surface, in that surface's words: REST's routes, the Genkit
    wire's resume (it has no cancel), not the Python methods (found by probes)."""
    session_id, _, _ = await paused_session(served, http)
    rest = await http.post(
        f"{served.bank}/v1/agents/bankingAgent/sessions/{session_id}/messages", json={"message": "hi"}, headers=ALICE
    )
    assert_error(rest, 409, "pending_interrupts")
    assert "POST .../cancel" in rest.json()["error"]["message"] and "cancel_pending()" not in rest.text
    body = {"data": {"message": {"role": "user", "content": [{"text": "hi"}]}}, "init": {"sessionId": session_id}}
    wire = await http.post(served.bank + "/agents/bankingAgent", json=body, headers=ALICE)
    assert_error(wire, 409, "pending_interrupts")
    message = wire.json()["error"]["message"]
    assert "a resume with a toolResponse or a restart" in message and "cancel" not in message


async def test_a_detached_resume_that_answers_nothing_is_refused_as_a_resume_that_waits_is(served, http):
    """The wire's ``detach: true`` with an empty resume: the same 409 as without it, with the
    refs still paused, and nothing written (it was a 500: found by a probe)."""
    session_id, ref, _ = await paused_session(served, http)
    before = await state_of(served, http, session_id)
    init = {"sessionId": session_id}
    for resume in ({}, {"respond": [], "restart": []}):
        waited = await http.post(served.bank + "/agents/bankingAgent", json={"data": {"resume": resume}, "init": init},
                                 headers=ALICE)  # fmt: skip
        detached = await http.post(
            served.bank + "/agents/bankingAgent", json={"data": {"resume": resume, "detach": True}, "init": init},
            headers=ALICE,
        )  # fmt: skip
        assert_error(detached, 409, "nothing_to_resume")
        assert detached.json() == waited.json()
        assert detached.json()["error"]["details"]["refs"] == [ref]
    assert await state_of(served, http, session_id) == before


async def test_a_message_part_is_known_by_its_kind_or_by_what_it_holds_as_the_schema_says(served, http):
    """OpenAPI gives a part's ``kind`` a default, so a part without one is read by what it holds
    (found by a probe: ``[{"text": "hi"}]`` was refused, naming pydantic's internal union); a
    part that is neither says what a part is."""
    url = served.bank + "/v1/agents/bankingAgent/sessions"
    sent = await http.post(url, json={"message": [{"text": "Hello"}]}, headers=ALICE)
    assert sent.status_code == 200 and sent.json()["message"]["parts"][0]["text"], sent.text
    for part in ({"kind": "video", "url": "x"}, {"foo": 1}):
        reply = await http.post(url, json={"message": [part]}, headers=ALICE)
        assert_error(reply, 400, "invalid_request")
        message = reply.json()["error"]["message"]
        assert 'a part is {"kind": "text", "text"}' in message and "tagged-union" not in message, message


async def test_a_request_with_two_authorization_headers_is_refused_whichever_comes_first(served, http):
    session_id, ref, _ = await paused_session(served, http)
    base = f"{served.bank}/v1/agents/bankingAgent/sessions/{session_id}"
    for first, second in (("alice-token", "bob-token"), ("bob-token", "alice-token")):
        both = [("Authorization", f"Bearer {first}"), ("Authorization", f"Bearer {second}")]
        assert_error(await http.get(base, headers=both), 401, "unauthenticated")
        reply = await http.post(base + f"/interrupts/{ref}/respond", json={"output": {"approved": True}}, headers=both)
        assert_error(reply, 401, "unauthenticated")
    assert served.ledger == [] and len((await state_of(served, http, session_id))["interrupts"]) == 1


async def test_a_request_with_two_idempotency_keys_is_refused(served, http):
    """Which key a retry would repeat cannot be known (found by a probe: the first was used)."""
    session_id, ref, _ = await paused_session(served, http)
    base = f"{served.bank}/v1/agents/bankingAgent/sessions/{session_id}"
    keys = [*ALICE.items(), ("Idempotency-Key", "a"), ("Idempotency-Key", "b")]
    reply = await http.post(base + f"/interrupts/{ref}/respond", json={"output": {"approved": True}}, headers=keys)
    assert_error(reply, 400, "invalid_request")
    assert "one Idempotency-Key" in reply.json()["error"]["message"]
    assert served.ledger == [] and len((await state_of(served, http, session_id))["interrupts"]) == 1


async def test_an_abort_says_it_needs_a_snapshot_whatever_body_it_got(served, http):
    """Both refusals name what an abort takes (found by a probe: one offered sessionId, which the
    other then refused)."""
    url = served.bank + "/agents/bankingAgent/abort"
    for body in ({"data": 5}, {"data": {"sessionId": "w1"}}):
        reply = await http.post(url, json=body, headers=ALICE)
        assert_error(reply, 400, "invalid_request")
        message = reply.json()["error"]["message"]
        assert "snapshotId" in message and "sessionId" not in message, message


async def test_another_principals_session_is_invisible(served, http):
    session_id, _, _ = await paused_session(served, http)
    base = f"{served.bank}/v1/agents/bankingAgent/sessions/{session_id}"
    for path in ("", "/interrupts", "/audit", "/history"):
        assert_error(await http.get(base + path, headers=BOB), 404, "session_not_found")
    reply = await http.post(served.bank + "/agents/bankingAgent/getSnapshot", json={"data": {"sessionId": session_id}},
                            headers=BOB)  # fmt: skip
    assert_error(reply, 404, "session_not_found")
    missing = await http.get(f"{served.bank}/v1/agents/bankingAgent/sessions/does-not-exist", headers=BOB)
    assert missing.json()["error"]["code"] == "session_not_found"  # the same answer as for a hidden one


async def test_a_messages_size_is_its_bytes_in_utf8_on_every_route(served, http):
    """The limit (8 KiB here) counts what the client sends: 3,000 "é" are 6,000 bytes, not the
    18,000 of their escapes; 4,500 are 9,000 bytes, over it, and the refusal says so."""
    sessions = served.bank + "/v1/agents/bankingAgent/sessions"
    genkit = served.bank + "/agents/bankingAgent"
    for text, status in (("é" * 3_000, 200), ("é" * 4_500, 413)):
        rest = await http.post(sessions, json={"message": text}, headers=ALICE)
        wire = await http.post(genkit, json={"data": {"message": {"role": "user", "content": [{"text": text}]}}},
                               headers=ALICE)  # fmt: skip
        assert (rest.status_code, wire.status_code) == (status, status), (rest.text[:200], wire.text[:200])
    for refused in (rest, wire):
        assert 9_000 < refused.json()["error"]["details"]["size"] < 9_100


async def test_history_limit_is_enforced(served, http):
    reply = await http.post(served.bank + "/v1/agents/bankingAgent/sessions", json={"message": "hi"}, headers=ALICE)
    base = f"{served.bank}/v1/agents/bankingAgent/sessions/{reply.json()['session_id']}"
    for _ in range(40):
        reply = await http.post(base + "/messages", json={"message": "hi"}, headers=ALICE)
        if reply.status_code != 200:
            break
    assert_error(reply, 422, "history_too_long")


@pytest.mark.parametrize("path", ["/nowhere", "/v1/agents/bankingAgent/nowhere"])
async def test_unknown_routes_are_json_404s(served, http, path):
    assert_error(await http.get(served.bank + path, headers=ALICE), 404, "not_found")


async def test_a_listing_without_a_limit_is_a_page_of_at_most_max_page(tmp_path, http):
    """``limits.max_page`` bounds every listing, the one that names no ``limit`` too."""
    spec = {"backend": "sqlite", "path": str(tmp_path / "sessions.db")}
    with serve_in_thread(lambda: build_app(spec, limits=Limits(max_page=3))) as url:
        sessions = url + "/bank/v1/agents/bankingAgent/sessions"
        for n in range(5):
            reply = await http.post(sessions, json={"message": f"Transfer ${n + 1} to z."}, headers=ALICE)
            assert reply.status_code == 200
        listed = await http.get(sessions, headers=ALICE)
        assert len(listed.json()["sessions"]) == 3
        assert_error(await http.get(sessions + "?limit=4", headers=ALICE), 400, "invalid_request")
        later = await http.get(sessions + "?offset=3", headers=ALICE)
        assert len(later.json()["sessions"]) == 2


async def test_the_openapi_document_states_the_page_size_the_server_enforces(tmp_path, http):
    """Every listing's ``limit`` is described as at most ``limits.max_page``, the bound its route
    enforces (found by a probe: with max_page=10 the document said 500, and ?limit=50 was a 400)."""
    spec = {"backend": "sqlite", "path": str(tmp_path / "sessions.db")}
    with serve_in_thread(lambda: build_app(spec, limits=Limits(max_page=10))) as url:
        doc = (await http.get(url + "/bank/openapi.json")).json()
        bounds = {
            (method, path): param["schema"]["maximum"]
            for path, item in doc["paths"].items()
            for method, operation in item.items()
            for param in operation.get("parameters", [])
            if param["in"] == "query" and param["name"] == "limit"
        }
        assert bounds == {("get", "/v1/agents/{agent}/sessions"): 10, ("get", "/v1/ops/deliveries"): 10}
        sessions = url + "/bank/v1/agents/bankingAgent/sessions"
        assert (await http.get(sessions + "?limit=10", headers=ALICE)).status_code == 200
        assert_error(await http.get(sessions + "?limit=11", headers=ALICE), 400, "invalid_request")
    with serve_in_thread(lambda: build_app(spec)) as url:  # the default, as before
        doc = (await http.get(url + "/bank/openapi.json")).json()
        limit = [p for p in doc["paths"]["/v1/agents/{agent}/sessions"]["get"]["parameters"] if p["name"] == "limit"]
        assert limit[0]["schema"] == {"type": "integer", "minimum": 1, "maximum": 500}


@pytest.mark.parametrize(
    ("body", "kind"),
    [(b"null", "null"), (b"[]", "an array"), (b'"x"', "a string"), (b"1", "a number"), (b"1.5", "a number"),
     (b"true", "true"), (b"false", "false")],
)  # fmt: skip
async def test_a_body_that_is_no_object_is_refused_in_jsons_words(served, http, body: bytes, kind: str):
    """Not Python's (found by a probe: "not NoneType", "not list")."""
    session_id, ref, _ = await paused_session(served, http)
    path = f"{served.bank}/v1/agents/bankingAgent/sessions/{session_id}/interrupts/{ref}/approve"
    for url in (path, served.bank + "/agents/bankingAgent"):
        reply = await http.post(url, content=body, headers={**ALICE, "content-type": "application/json"})
        assert_error(reply, 400, "invalid_request")
        assert reply.json()["error"]["message"] == f"the request body must be a JSON object, not {kind}"


async def test_a_body_in_another_encoding_than_utf_8_is_refused_on_every_surface(served, http):
    """Found by a probe: REST and the Genkit wire read UTF-16, UTF-32 and a byte-order mark (and
    acted on them) while MCP refused them with an untyped parse error; a Latin-1 body got Python's
    codec message. JSON is UTF-8 (RFC 8259): anything else is one refusal, nothing recorded."""
    session_id, ref, _ = await paused_session(served, http)
    path = f"{served.bank}/v1/agents/bankingAgent/sessions/{session_id}/interrupts/{ref}/approve"
    answer = '{"reason": "caf\u00e9"}'
    bodies = {
        "UTF-16": (answer.encode("utf-16"), "not UTF-16"),
        "UTF-16-LE": (answer.encode("utf-16-le"), "not UTF-16-LE"),
        "UTF-32": (answer.encode("utf-32"), "not UTF-32"),
        "a BOM": (b"\xef\xbb\xbf" + answer.encode(), "not UTF-8 with a byte-order mark"),
        "Latin-1": ('{"reason": "caf\u00e9"}'.encode("latin-1"), "is not UTF-8: byte 0xe9 at offset 15"),
    }
    for name, (body, said) in bodies.items():
        for url in (path, served.bank + "/agents/bankingAgent"):
            reply = await http.post(url, content=body, headers={**ALICE, "content-type": "application/json"})
            assert_error(reply, 400, "invalid_request")
            assert said in reply.json()["error"]["message"], (name, url, reply.text)
    pending = await http.get(f"{served.bank}/v1/agents/bankingAgent/sessions/{session_id}/interrupts", headers=ALICE)
    assert [p["ref"] for p in pending.json()["interrupts"]] == [ref]  # nothing was answered


async def test_a_field_of_the_wrong_kind_is_named_by_its_path_in_jsons_words(served, http):
    """For every model a surface parses, not pydantic's "a valid dictionary or instance of
    _Message", which names a private class (found by a probe)."""
    session_id, ref, _ = await paused_session(served, http)
    base = f"{served.bank}/v1/agents/bankingAgent/sessions/{session_id}"
    cases = [
        (served.bank + "/agents/bankingAgent", {"data": {"message": "hi"}},
         "body.data.message: Input should be a JSON object, not a string"),
        (served.bank + "/agents/bankingAgent", {"data": {"message": {"role": "user", "content": {"text": "x"}}}},
         "body.data.message.content: Input should be a JSON array, not an object"),
        (served.bank + "/agents/bankingAgent", {"data": [], "init": 1},
         "body.data: Input should be a JSON object, not an array; "
         "body.init: Input should be a JSON object, not a number"),
        # found by a second probe: a string, a boolean given as something else, said as pydantic says it
        (served.bank + "/agents/bankingAgent", {"data": {"message": {"role": "user", "content": [{"text": 5}]}}},
         "body.data.message.content.0.text: Input should be a string, not a number"),
        (served.bank + "/agents/bankingAgent", {"data": {"message": {"role": "user", "content": []}, "detach": "yes"}},
         "body.data.detach: Input should be true or false, not a string"),
        (base + "/resume", {"respond": [None]}, "body.respond.0: Input should be a JSON object, not null"),
        (base + f"/interrupts/{ref}/respond", {"output": {}, "grant": True},
         "body.grant: Input should be a JSON object, not true"),
    ]  # fmt: skip
    for url, body, said in cases:
        reply = await http.post(url, json=body, headers=ALICE)
        assert_error(reply, 400, "invalid_request")
        error = reply.json()["error"]
        assert error["message"] == f"invalid request: {said}"
        problems = error["details"]["problems"]
        assert all("instance of" not in p["message"] and "dictionary" not in p["message"] for p in problems)


@pytest.mark.parametrize("field", ["max_body_bytes", "max_message_bytes", "max_history", "max_page"])
@pytest.mark.parametrize("value", [0, -1, 1.5, True, "100"])
def test_limits_that_cannot_work_are_refused_when_made(field, value):
    """As the config file's [limits] refuses them (found by a probe: max_page=0 was taken, and
    every listing was then empty)."""
    with pytest.raises(DefinitionError, match=f"Limits.{field} must be a whole number of at least 1"):
        Limits(**{field: value})


@pytest.mark.parametrize(
    ("error", "status", "header"),
    [
        ("rate limited, never", 429, None),
        ("unavailable, 2.2 s", 503, "3"),  # whole seconds, never sooner than asked
        ("rate limited, 0.2 s", 429, "1"),
    ],
)
def test_a_model_error_says_its_retry_after_as_a_header_it_can_write(error: str, status: int, header: str | None):
    """A model's ``retry_after`` that is no finite number is no header (found by a probe: ``inf``
    made the reply a 500); a 503's is said as a 429's is."""
    import math

    from pausepoint import Pausepoint
    from pausepoint.errors import ModelRateLimited, ModelUnavailable
    from pausepoint.server import BearerTokens, create_app
    from pausepoint.stores import InMemorySessionStore
    from pausepoint.testing import ScriptedModel

    raised = {
        "rate limited, never": ModelRateLimited("slow down", retry_after=math.inf),
        "unavailable, 2.2 s": ModelUnavailable("busy", retry_after=2.2),
        "rate limited, 0.2 s": ModelRateLimited("slow down", retry_after=0.2),
    }[error]

    def app() -> Any:
        ai = Pausepoint()
        ai.define_agent(name="a", model=ScriptedModel([raised]), store=InMemorySessionStore())
        return create_app(ai, auth=BearerTokens({"alice-token": "alice"}))

    with serve_in_thread(app) as url:
        reply = httpx.post(f"{url}/v1/agents/a/sessions", json={"message": "hi"}, headers=ALICE)
    assert_error(reply, status, raised.code)
    assert reply.headers.get("retry-after") == header


@pytest.mark.parametrize("interval", [float("inf"), float("nan"), 1e12, 1e-9, 0, True])
def test_an_expiry_interval_or_a_senders_times_no_loop_can_keep_are_definition_errors(interval: float):
    """They crashed the sweep for good, or held the server past SIGTERM (found by a probe,
    through a config file that fed them in)."""
    from pausepoint import Pausepoint
    from pausepoint.server import BearerTokens, WebhookSender, create_app

    ai = Pausepoint()
    with pytest.raises(DefinitionError, match=r"expiry_interval must be seconds from 0\.01 to 86400"):
        create_app(ai, auth=BearerTokens({"t0ken": "alice"}), expiry_interval=interval)
    with pytest.raises(DefinitionError, match="WebhookSender: lease must be seconds"):
        WebhookSender(ai, lease=interval)
    with pytest.raises(DefinitionError, match="WebhookSender: interval must be seconds"):
        WebhookSender(ai, interval=interval)


def test_an_app_without_an_authenticator_is_refused_when_it_is_built():
    """``create_app(ai, auth=None)`` was taken, then answered every request 500 (found by a probe)."""
    from pausepoint import Pausepoint
    from pausepoint.server import create_app

    for auth in (None, "alice-token", {"t": "alice"}):
        with pytest.raises(DefinitionError, match="auth must be a callable from a request to its principal"):
            create_app(Pausepoint(), auth=auth)  # type: ignore[arg-type]


async def test_a_message_part_takes_no_other_keys_and_the_document_says_so(served, http):
    """Found by a probe: the document let a part carry any key while the server refused one,
    naming the key by a path with pydantic's tags in it (``body.message.parts.0.text.extra``)."""
    schemas = (await http.get(served.bank + "/openapi.json")).json()["components"]["schemas"]
    assert schemas["TextPart"]["additionalProperties"] is False
    assert schemas["MediaPart"]["additionalProperties"] is False
    url = served.bank + "/v1/agents/bankingAgent/sessions"
    before = (await http.get(url, headers=ALICE)).json()
    cases = [
        ([{"text": "hi", "extra": 1}], "body.message.0.extra: Extra inputs are not permitted"),
        ([{"text": "a"}, {"url": "https://x", "content_type": 3}],
         "body.message.1.content_type: Input should be a string, not a number"),
        ([{"text": 3}], "body.message.0.text: Input should be a string, not a number"),
    ]  # fmt: skip
    for message, said in cases:
        reply = await http.post(url, json={"message": message}, headers=ALICE)
        assert_error(reply, 400, "invalid_request")
        assert reply.json()["error"]["message"] == f"invalid request: {said}"
    assert (await http.get(url, headers=ALICE)).json() == before  # no session started


async def test_the_documents_session_id_pattern_is_the_ids_the_server_takes(served, http):
    """Found by a probe: the document took any string as a session id."""
    doc = (await http.get(served.bank + "/openapi.json")).json()
    patterns = {
        param["schema"].get("pattern")
        for item in doc["paths"].values()
        for operation in item.values()
        for param in operation.get("parameters", [])
        if param["name"] == "session_id"
    }
    [pattern] = patterns
    sessions = served.bank + "/v1/agents/bankingAgent/sessions"
    for session_id in ("a", "chat-1", "x" * 128, "x" * 129, "-a", ".a", "a b", "é", "a+b", "a@b.c:d_e"):
        reply = await http.post(f"{sessions}/{session_id}/messages", json={"message": "Hello!"}, headers=ALICE)
        taken = reply.status_code != 400 or reply.json()["error"]["code"] != "invalid_session_id"
        assert taken == bool(re.search(pattern, session_id)), (session_id, reply.text)
