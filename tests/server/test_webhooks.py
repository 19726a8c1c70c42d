"""Webhooks over real HTTP on loopback: signed, retried, delivered at least once through the outbox."""

from __future__ import annotations

import asyncio
import json
import signal

import httpx
import pytest
from starlette.applications import Starlette

from examples import banking
from pausepoint import TextPart
from pausepoint.errors import DefinitionError, InvalidMessage, WebhookSignatureError
from pausepoint.server import BearerTokens, WebhookSender, create_app
from pausepoint.stores import SqliteSessionStore
from pausepoint.webhooks import Webhook, sign, verify_signature
from tests.server.conftest import ALICE
from tests.server.harness import TOKENS, make_store, serve_in_thread
from tests.server.ops_harness import OPERATOR, SECRET, Receiver, build_ops_app, serve_ops_process, until_up

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


async def pause(http: httpx.AsyncClient, base: str, amount: int = 5) -> dict:
    reply = await http.post(
        base + "/v1/agents/bankingAgent/sessions", json={"message": f"Transfer ${amount} to q."}, headers=ALICE
    )
    assert reply.status_code == 200, reply.text
    return reply.json()


async def test_events_are_signed_and_verify(tmp_path):
    receiver = Receiver()
    with serve_in_thread(receiver.app) as hook_url:
        config = {
            "store": {"backend": "sqlite", "path": str(tmp_path / "s.db")},
            "hooks": [{"name": "ops", "url": hook_url + "/hook"}],
        }
        with serve_in_thread(lambda: build_ops_app(config)) as base:
            async with httpx.AsyncClient(timeout=30) as http:
                body = await pause(http, base)
                ref = body["interrupts"][0]["ref"]
                received = await receiver.wait_for(2)
    # The two events of the append are sent side by side: they may come in either order.
    first, second = sorted(received, key=lambda r: r.headers["pausepoint-event-type"] != "pause")
    events = [verify_signature(SECRET, r.body, r.headers) for r in (first, second)]
    assert [e["type"] for e in events] == ["pause", "turn_end"]
    assert events[0]["interrupt"]["ref"] == ref and events[0]["interrupt"]["name"] == "userApproval"
    assert events[0]["interrupt"]["view"]["title"] == "Transfer $5 to q" and events[1]["open_refs"] == [ref]
    assert events[0]["session_id"] == body["session_id"] and events[0]["owner"] == "alice"
    assert events[0]["agent"] == "bankingAgent" and events[1]["finish_reason"] == "interrupted"
    assert first.event_id == events[0]["id"] and first.headers["pausepoint-event-type"] == "pause"
    assert first.headers["pausepoint-attempt"] == "1"
    with pytest.raises(WebhookSignatureError):
        verify_signature(SECRET, first.body.replace(b"alice", b"mallory"), first.headers)
    with pytest.raises(WebhookSignatureError):
        verify_signature("another secret", first.body, first.headers)
    with pytest.raises(WebhookSignatureError):  # a replay, later than the tolerance
        verify_signature(SECRET, first.body, first.headers, now=int(first.headers["pausepoint-timestamp"]) + 301)
    assert verify_signature(["old", SECRET], first.body, first.headers)["id"] == first.event_id  # rotation
    for odd in ("²", "١٧٦٧٢٢٥٦٠٠", " 1767225600"):  # digits, but not a timestamp's ASCII ones
        with pytest.raises(WebhookSignatureError, match="malformed"):
            verify_signature(SECRET, first.body, {**first.headers, "pausepoint-timestamp": odd})


@pytest.mark.parametrize("stamp", ["9" * 16, "1" * 400, "7" * 5_000])
def test_a_timestamp_of_too_many_digits_is_malformed_not_a_crash(stamp):
    """Anyone may send the headers, without the secret (found by a probe: 400 digits were an
    OverflowError, 5,000 a ValueError, and a receiver built as the docs say answered 500)."""
    body = b'{"type": "pause"}'
    headers = {"Pausepoint-Timestamp": stamp, "Pausepoint-Signature": "v1=" + "0" * 64}
    with pytest.raises(WebhookSignatureError, match="malformed"):
        verify_signature(SECRET, body, headers, now=1767225600)


@pytest.mark.parametrize("tolerance", [float("nan"), -1, float("inf"), "300", True])
def test_a_tolerance_that_is_no_number_of_seconds_is_refused(tolerance):
    """Found by a probe: NaN let a request signed in 1970 through (the replay check off); a
    negative one refused every request, silently."""
    stamp = 0
    body = b'{"type": "pause"}'
    signed = {"Pausepoint-Timestamp": str(stamp), "Pausepoint-Signature": sign(SECRET, body, stamp)}
    with pytest.raises(ValueError, match="tolerance is a number of seconds from 0"):
        verify_signature(SECRET, body, signed, tolerance=tolerance, now=1767225600)


@pytest.mark.parametrize("secret", ["", [], [""], ["a real secret of the webhook", ""]])
def test_verifying_with_no_secret_or_an_empty_one_is_refused_not_let_through(secret):
    # An unset setting read as "" must not verify what anyone can sign with an empty key.
    stamp = 1767225600
    body = b'{"type": "pause"}'
    forged = {"Pausepoint-Timestamp": str(stamp), "Pausepoint-Signature": sign("", body, stamp)}
    with pytest.raises(ValueError, match="non-empty"):
        verify_signature(secret, body, forged, now=stamp)


@pytest.mark.parametrize("body", [b"not json", b"[1, 2]", b"\xff\xfe", b'"text"'])
def test_a_body_signed_right_that_is_no_event_is_a_value_error(body):
    """Only the documented errors, whatever the body (found by a probe: a JSONDecodeError, or a
    TypeError from the caller's first key)."""
    stamp = 1767225600
    signed = {"Pausepoint-Timestamp": str(stamp), "Pausepoint-Signature": sign("s3cret-of-the-hook", body, stamp)}
    with pytest.raises(ValueError, match="not a JSON object"):
        verify_signature("s3cret-of-the-hook", body, signed, now=stamp)


async def test_a_failing_receiver_gets_the_same_event_again_until_it_takes_it(tmp_path):
    receiver = Receiver(fail_first=3)
    with serve_in_thread(receiver.app) as hook_url:
        hook = {"name": "ops", "url": hook_url + "/hook", "events": ["pause"], "backoff": 0.01}
        config = {"store": {"backend": "sqlite", "path": str(tmp_path / "s.db")}, "hooks": [hook]}
        with serve_in_thread(lambda: build_ops_app(config)) as base:
            async with httpx.AsyncClient(timeout=30) as http:
                await pause(http, base)
                tries = await receiver.wait_for(4)
                reply = await http.get(base + "/v1/ops/deliveries?state=delivered", headers=OPERATOR)
                while not reply.json()["deliveries"]:  # the fourth attempt is settled just after its reply
                    await receiver.wait_for(4)
                    reply = await http.get(base + "/v1/ops/deliveries?state=delivered", headers=OPERATOR)
    assert len({t.event_id for t in tries}) == 1
    assert [t.headers["pausepoint-attempt"] for t in tries] == ["1", "2", "3", "4"]
    assert len({t.body for t in tries}) == 1 and tries[0].json["type"] == "pause"
    [delivery] = reply.json()["deliveries"]
    assert (delivery["webhook"], delivery["attempts"], delivery["state"]) == ("ops", 4, "delivered")
    assert delivery["event"]["id"] == tries[0].event_id
    # the event's time as its body writes it, every time as REST writes times (a probe: "+00:00")
    assert delivery["event"]["at"] == tries[0].json["at"]
    assert delivery["due_at"].endswith("Z") and delivery["updated_at"].endswith("Z")
    assert len(receiver.received) == 4  # nothing more once it was taken


async def test_failed_deliveries_are_shown_to_operators_and_sent_again_on_request(tmp_path):
    receiver = Receiver(fail_first=2)
    with serve_in_thread(receiver.app) as hook_url:
        hook = {"name": "ops", "url": hook_url + "/hook", "events": ["pause"], "backoff": 0.01, "max_attempts": 2}
        config = {"store": {"backend": "sqlite", "path": str(tmp_path / "s.db")}, "hooks": [hook]}
        with serve_in_thread(lambda: build_ops_app(config)) as base:
            async with httpx.AsyncClient(timeout=30) as http:
                await pause(http, base)
                await receiver.wait_for(2)
                failed: list = []
                while not failed:
                    reply = await http.get(base + "/v1/ops/deliveries?state=failed", headers=OPERATOR)
                    failed = reply.json()["deliveries"]
                [delivery] = failed
                assert (delivery["attempts"], delivery["last_error"]) == (2, "HTTP 500")
                assert (await http.get(base + "/v1/ops/deliveries", headers=ALICE)).status_code == 403
                retry = f"{base}/v1/ops/deliveries/{delivery['id']}/retry"
                assert (await http.post(retry, headers=ALICE)).status_code == 403
                assert (await http.post(retry, headers=OPERATOR)).json() == {"id": delivery["id"], "state": "pending"}
                assert (await http.post(retry, headers=OPERATOR)).status_code == 404  # pending now, not failed
                third = (await receiver.wait_for(3))[2]
                bad = await http.get(base + "/v1/ops/deliveries?state=lost", headers=OPERATOR)
    assert third.event_id == delivery["event"]["id"] and third.headers["pausepoint-attempt"] == "1"
    assert bad.status_code == 400


async def test_nothing_is_announced_for_an_append_that_failed(tmp_path):
    store = SqliteSessionStore(tmp_path / "s.db", max_record_bytes=600)
    receiver = Receiver()
    with serve_in_thread(receiver.app) as hook_url:
        hook = Webhook("ops", hook_url + "/hook", secret=SECRET, events=["pause", "turn_end"])
        ai, agent = banking.build(store, webhooks=[hook])
        sender = WebhookSender(ai)
        try:
            with pytest.raises(InvalidMessage, match="exceeds the store's limit"):  # its record is over it
                # (a message whose strings are each within the record limit, in a record that is not:
                # refused before the model is asked, nothing appended)
                await agent.chat(principal="alice").send([TextPart("Transfer $5 to q."), TextPart("x" * 560)])
            assert await store.list_deliveries() == [] and await store.read_events() == []
            assert await sender.send_due() == 0
            res = await agent.chat(principal="alice").send("Transfer $5 to q.")  # the next turn is announced
            assert await sender.send_due() == 2
            received = await receiver.wait_for(2)
        finally:
            await sender.close()
            await store.close()
    bodies = {r.json["type"]: r.json for r in received}  # sent side by side: in either order
    assert sorted(bodies) == ["pause", "turn_end"]
    assert bodies["pause"]["interrupt"]["ref"] == res.interrupts[0].ref
    assert len(receiver.received) == 2


async def test_a_server_killed_between_the_pause_and_the_delivery_delivers_after_restart(tmp_path):
    receiver = Receiver(hang_first=1)  # the first attempt never gets its answer: the server dies first
    with serve_in_thread(receiver.app) as hook_url:
        hook = {"name": "ops", "url": hook_url + "/hook", "events": ["pause"]}
        config = {"store": {"backend": "sqlite", "path": str(tmp_path / "s.db")}, "hooks": [hook], "lease": 1.0}
        with serve_ops_process(config) as (base, first):
            await until_up(base)
            async with httpx.AsyncClient(timeout=30) as http:
                body = await pause(http, base)
            [attempt] = await receiver.wait_for(1)
            first.send_signal(signal.SIGKILL)
            first.wait()
        with serve_ops_process(config):  # a new process on the same file; the lease runs out
            again = (await receiver.wait_for(2))[1]
    assert attempt.event_id == again.event_id
    assert again.json["interrupt"]["ref"] == body["interrupts"][0]["ref"]
    assert again.headers["pausepoint-attempt"] == "1"  # the killed attempt was never settled


async def test_a_receiver_that_hangs_holds_up_no_other_webhooks_deliveries(tmp_path):
    """Each webhook is sent on its own: a receiver that never answers (within its minute) delays
    only its own deliveries (found by a probe: one hung receiver held every other webhook's pause
    notices behind its backlog, for hours)."""
    stuck, good = Receiver(hang_first=10**6), Receiver()
    with serve_in_thread(stuck.app) as stuck_url, serve_in_thread(good.app) as good_url:
        hooks = [
            {"name": "stuck", "url": stuck_url + "/hook", "timeout": 60.0},
            {"name": "good", "url": good_url + "/hook", "events": ["pause"]},
        ]
        config = {"store": {"backend": "sqlite", "path": str(tmp_path / "s.db")}, "hooks": hooks}
        with serve_in_thread(lambda: build_ops_app(config)) as base:
            async with httpx.AsyncClient(timeout=30) as http:
                for amount in range(1, 16):  # 30 deliveries to the stuck one: more than a claim takes
                    await pause(http, base, amount)
                told = await good.wait_for(15, max_wait=20)  # well inside the stuck one's minute
    assert sorted(int(r.json["interrupt"]["input"]["details"].split("$")[1].split()[0]) for r in told) == list(
        range(1, 16)
    )


async def test_a_slack_channels_line_marks_a_denial_as_the_cards_update_does(tmp_path):
    """A ``format="slack"`` webhook's line for an answer: a denial is marked ``:no_entry:``, as the
    Slack card's own update says it, not the approval's green tick (found by a probe)."""
    receiver = Receiver()
    with serve_in_thread(receiver.app) as hook_url:
        desk = Webhook("desk", hook_url + "/hook", format="slack", events={"answer"}, backoff=0.01)
        ai, _ = banking.build(make_store({"backend": "sqlite", "path": str(tmp_path / "s.db")}), webhooks=[desk])

        def app() -> Starlette:
            return create_app(ai, auth=BearerTokens(TOKENS), webhooks=WebhookSender(ai, interval=0.05))

        with serve_in_thread(app) as base:
            async with httpx.AsyncClient(timeout=30) as http:
                for amount, answer in ((5, "deny"), (6, "respond")):
                    body = await pause(http, base, amount)
                    ref, session = body["interrupts"][0]["ref"], body["session_id"]
                    route = f"{base}/v1/agents/bankingAgent/sessions/{session}/interrupts/{ref}/{answer}"
                    sent = {"reason": "not today"} if answer == "deny" else {"output": {"approved": True}}
                    assert (await http.post(route, json=sent, headers=ALICE)).status_code == 200
                    await receiver.wait_for(1 if answer == "deny" else 2)
    denied, approved = (json.loads(r.body)["text"] for r in receiver.received)
    assert denied.startswith(":no_entry: `userApproval`") and "deny by alice" in denied
    assert approved.startswith(":white_check_mark: `userApproval`") and "respond by alice" in approved


@pytest.mark.parametrize(
    "url", ["http://[::1/hook", "https://ops.example.com:99999/hook", "https://ops example.com/hook",
            "https://ops.example.com/a hook", "https://ops.example.com:port/", "ftp://ops.example.com/", "https:///x"],
)  # fmt: skip
def test_a_webhook_url_no_request_could_go_to_is_refused_when_it_is_defined(url):
    """Found by two probes: such a URL was taken (by ``config check`` too), and every attempt then
    failed, the first time an event came."""
    with pytest.raises(DefinitionError, match="url must be an http"):
        Webhook("ops", url, secret=SECRET)
    assert Webhook("ops", "https://[::1]:8443/hook?x=1", secret=SECRET).url


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({"timeout": float("inf")}, "timeout must be seconds above 0 to 86400 (a day), not inf"),
        ({"timeout": True}, "timeout must be seconds above 0 to 86400 (a day), not True"),
        ({"backoff": float("nan")}, "backoff must be seconds from 0 to 86400 (a day), not nan"),
        ({"max_backoff": 1e9}, "max_backoff must be seconds from 0 to 86400 (a day), not 1000000000.0"),
        ({"backoff": 5, "max_backoff": 1}, "max_backoff (1) must not be shorter than backoff (5)"),
        ({"max_attempts": 2.5}, "max_attempts must be a whole number, at least 1"),
    ],
)
def test_a_webhooks_seconds_are_checked_in_python_as_config_check_does(settings, said):
    """Python took what ``config check`` refuses (a timeout of inf: an attempt that never ends)."""
    with pytest.raises(DefinitionError) as refused:
        Webhook("ops", "https://ops.example.com/hook", secret=SECRET, **settings)
    assert str(refused.value) == f"webhook 'ops': {said}"


@pytest.mark.parametrize("batch", [0, -1, 2.5, True, 1001])
def test_a_sender_claims_a_whole_number_of_deliveries(batch, tmp_path):
    """Found by a probe: ``batch=0`` spun the sender at full CPU and froze the server's store calls;
    2.5 failed every claim. Refused when made, as ``config check`` refuses ``[delivery] batch``."""
    ai, _ = banking.build(SqliteSessionStore(tmp_path / "s.db"))
    with pytest.raises(DefinitionError, match="batch must be a whole number of deliveries from 1 to 1000"):
        WebhookSender(ai, batch=batch)


LEAK = "sk-live-TOPSECRET"


@pytest.mark.parametrize(
    ("headers", "said"),
    [
        ({"X-Team": "équipe"}, "the value of the X-Team header holds a character beyond ASCII"),
        ({"Authorization": f"Bearer {LEAK}\n"}, "the value of the Authorization header starts or ends with white"),
        ({"X-Key": f"{LEAK}\r\nX-Injected: 1"}, "the value of the X-Key header holds a control character"),
        ({"Content-Length": "5"}, "the Content-Length header is one the sender writes itself"),
        ({"host": "elsewhere.example"}, "the host header is one the sender writes itself"),
        ({"content-type": "text/plain"}, "the content-type header is one the sender writes itself"),
        ({"Pausepoint-Attempt": "9"}, "the Pausepoint-Attempt header is one the sender writes itself"),
        ({"Bad Name": "x"}, "'Bad Name' is not a header's name"),
        ({"X-Key": "a", "x-key": "b"}, "the x-key header is given twice"),
    ],
)
def test_a_header_no_request_could_carry_is_refused_when_the_webhook_is_defined(headers, said):
    """Found by a probe: such a header left its deliveries pending for good (no attempt counted,
    a traceback after every lease), sent a truncated body (Content-Length), or failed every
    attempt with the header's value — a secret — in the log and in ``last_error``. Refused by
    ``Webhook`` itself (so for Python, ``config check`` and ``serve`` alike), never showing it."""
    with pytest.raises(DefinitionError, match=r"^webhook 'ops': ") as refused:
        Webhook("ops", "https://ops.example.com/hook", secret=SECRET, headers=headers)
    assert said in str(refused.value) and LEAK not in str(refused.value)
    assert Webhook("ops", "https://o.example", secret=SECRET, headers={"X-Team": "a b", "X-Empty": ""}).headers


async def test_a_request_that_cannot_be_made_is_a_failed_attempt_naming_no_header(tmp_path, caplog):
    """A request httpx cannot make (a URL it cannot read, a header changed after its webhook
    checked it) or write fails its attempt as a receiver's 500 does: counted, failed after
    max_attempts, where it left the delivery pending with 0 attempts and a traceback after every
    lease; and its error, logged and in ``last_error``, never quotes the header's value."""
    receiver = Receiver()
    with serve_in_thread(receiver.app) as hook_url:
        hooks = [
            Webhook(name, hook_url + "/hook", secret=SECRET, events=["pause"], max_attempts=2, backoff=0.01,
                    headers={"X-Key": "k"})
            for name in ("unreadable", "broken", "accented")
        ]  # fmt: skip
        object.__setattr__(hooks[0], "url", "http://[::1/hook")  # changed after its webhook checked it
        hooks[1].headers["X-Key"] = f"Bearer {LEAK}\n"  # type: ignore[index]
        hooks[2].headers["X-Key"] = f"Bearer {LEAK}é"  # type: ignore[index]
        ai, _ = banking.build(make_store({"backend": "sqlite", "path": str(tmp_path / "s.db")}), webhooks=hooks)

        def app() -> Starlette:
            sender = WebhookSender(ai, interval=0.05)
            return create_app(ai, auth=BearerTokens(TOKENS), operators={"desk"}, webhooks=sender)

        with serve_in_thread(app) as base:
            async with httpx.AsyncClient(timeout=30) as http:
                await pause(http, base)
                failed: list[dict] = []
                for _ in range(600):  # a guard against a hang (30 s), not a timing
                    reply = await http.get(base + "/v1/ops/deliveries?state=failed", headers=OPERATOR)
                    failed = reply.json()["deliveries"]
                    if len(failed) == 3:
                        break
                    await asyncio.sleep(0.05)
    errors = {d["webhook"]: (d["attempts"], d["last_error"]) for d in failed}
    assert sorted(errors) == ["accented", "broken", "unreadable"], failed
    assert errors["unreadable"][1].startswith("InvalidURL: the request could not be made")
    assert errors["accented"][1].startswith("UnicodeEncodeError: the request could not be made")
    assert errors["broken"][1].startswith("LocalProtocolError: the request could not be written")
    assert {attempts for attempts, _ in errors.values()} == {2}
    assert LEAK not in json.dumps(failed) and LEAK not in caplog.text
    assert "Traceback" not in caplog.text and receiver.received == []
