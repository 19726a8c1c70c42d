"""Integers in headers, query strings and paths are ASCII digits, over real HTTP on loopback.

Python's ``int`` and ``str.isdigit`` also take other scripts' digits: ``int("٣")`` is 3 and
``"²".isdigit()`` is true (while ``int("²")`` fails). Every one of them is refused with a 400
naming what was wrong, never read as a number, never a 500.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from tests.server.conftest import ALICE
from tests.server.harness import serve_in_thread
from tests.server.ops_harness import OPERATOR, build_ops_app

# Superscript two, Arabic-Indic one, full-width one: digits to str.isdigit, not ASCII.
NOT_ASCII = ["\u00b2", "\u0661", "\uff11"]
# A header's bytes are read as Latin-1: superscripts one to three are digits there; the others
# come as their UTF-8 bytes.
HEADERS = [b"\xb2", b"\xb9", b"1\xb3", *(digit.encode() for digit in NOT_ASCII)]


@pytest.fixture
def base(tmp_path) -> Iterator[str]:
    # Nothing listens on port 9 of loopback: with one attempt, every delivery fails at once.
    hook = {"name": "ops", "url": "http://127.0.0.1:9/hook", "events": ["pause"], "max_attempts": 1}
    config = {"store": {"backend": "sqlite", "path": str(tmp_path / "s.db")}, "hooks": [hook]}
    with serve_in_thread(lambda: build_ops_app(config)) as url:
        yield url


def assert_refused(reply: httpx.Response, names: str) -> None:
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["code"] == "invalid_request" and names in error["message"], error


async def failed_delivery(http: httpx.AsyncClient, base: str) -> str:
    reply = await http.post(
        base + "/v1/agents/bankingAgent/sessions", json={"message": "Transfer $5 to q."}, headers=ALICE
    )
    assert reply.status_code == 200, reply.text
    for _ in range(600):  # a guard against a hang: the sender runs every half second
        found = (await http.get(base + "/v1/ops/deliveries?state=failed", headers=OPERATOR)).json()["deliveries"]
        if found:
            return str(found[0]["id"])
        await asyncio.sleep(0.1)
    raise AssertionError("the delivery never failed")


@pytest.mark.parametrize("digits", [*HEADERS, b"9" * 20, b"9" * 5000])
async def test_a_last_event_id_in_other_digits_is_refused(base, digits):
    headers = {**ALICE, "Last-Event-ID": digits}
    async with httpx.AsyncClient(timeout=30) as http, http.stream("GET", base + "/v1/feed", headers=headers) as reply:
        if reply.status_code != 200:  # a feed that took it would stream until closed
            await reply.aread()
    assert_refused(reply, "Last-Event-ID")


async def test_a_last_event_id_given_twice_is_refused_and_one_in_utf_8_is_named_as_sent(base):
    """Found by a probe: two ``Last-Event-ID`` headers were taken (the first, even where the second
    alone is refused), and a UTF-8 one was named back as its Latin-1 reading ("Ã©" for "é")."""
    twice = [*ALICE.items(), ("Last-Event-ID", "0"), ("Last-Event-ID", "not-an-id")]
    async with httpx.AsyncClient(timeout=30) as http:
        async with http.stream("GET", base + "/v1/feed", headers=twice) as reply:
            if reply.status_code != 200:
                await reply.aread()
        assert_refused(reply, "one Last-Event-ID header")
        accented = {**ALICE, "Last-Event-ID": "é.0".encode()}
        async with http.stream("GET", base + "/v1/feed", headers=accented) as reply:
            if reply.status_code != 200:
                await reply.aread()
        assert_refused(reply, "Last-Event-ID 'é.0'")


@pytest.mark.parametrize("value", [*NOT_ASCII, "1" * 5000, "-1", "+5", " 5", "5_0"])
async def test_a_limit_in_other_digits_or_out_of_range_is_refused(base, value):
    async with httpx.AsyncClient(timeout=30) as http:
        reply = await http.get(base + "/v1/ops/deliveries", params={"limit": value}, headers=OPERATOR)
        sessions = await http.get(base + "/v1/agents/bankingAgent/sessions", params={"offset": value}, headers=ALICE)
    assert_refused(reply, "'limit'")
    assert_refused(sessions, "'offset'")


async def test_a_delivery_id_in_other_digits_is_refused_and_nothing_is_requeued(base):
    async with httpx.AsyncClient(timeout=30) as http:
        key = await failed_delivery(http, base)
        index, _, number = key.partition("-")
        for digit in NOT_ASCII:
            for forged in (f"{digit}-{number}", f"{index}-{digit}", f"{index}-{number}{digit}"):
                reply = await http.post(f"{base}/v1/ops/deliveries/{forged}/retry", headers=OPERATOR)
                assert_refused(reply, "delivery id")
        arabic = "".join(chr(0x0660 + int(c)) for c in index)  # the same number in Arabic-Indic digits
        assert_refused(await http.post(f"{base}/v1/ops/deliveries/{arabic}-{number}/retry", headers=OPERATOR),
                       "delivery id")  # fmt: skip
        huge = [
            await http.post(f"{base}/v1/ops/deliveries/{index}-{'9' * length}/retry", headers=OPERATOR)
            for length in (20, 5000)  # past a 64-bit integer; past what int() reads at all
        ]
        # one spelling, as listed (found by a probe: "0-0003161" requeued it, and was echoed so)
        padded = [
            await http.post(f"{base}/v1/ops/deliveries/{spelt}/retry", headers=OPERATOR)
            for spelt in (f"0{index}-{number}", f"{index}-00{number}")
        ]
        still = (await http.get(base + "/v1/ops/deliveries?state=failed", headers=OPERATOR)).json()["deliveries"]
        retried = await http.post(f"{base}/v1/ops/deliveries/{key}/retry", headers=OPERATOR)
    for reply in (*huge, *padded):
        assert_refused(reply, "delivery id")
    assert [d["id"] for d in still] == [key]  # none of them requeued it
    assert retried.json() == {"id": key, "state": "pending"}  # the ASCII id names it
