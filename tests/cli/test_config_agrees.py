"""What ``config check`` passes, ``serve`` runs; what ``serve`` refuses, ``config check`` refuses
first, at its key; and a secret is never shown. Found by an operator's probe: the documented
longest retention, a secret read from a file's last line (its line break), a webhook header no
request can carry, and a store URL with white space around it each passed the check, then broke
serving (a traceback, a secret in the log and in ``last_error``, deliveries stuck for good, another
SQLite file)."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.cli.config_files import pausepoint, serving, write

HEAD = 'app = "tests.cli.apps:pay_ai"\n[principals.alice]\ntoken_env = "ALICE_TOKEN"\n'
ENV = {"ALICE_TOKEN": "a1ice-token", "HOOK_SECRET": "hook-secret-value", "LINK_SECRET": "0123456789abcdef0123"}
SECRET = "sk-live-TOPSECRET"

WEBHOOK = """
[[webhooks]]
name = "ops"
url = "https://ops.example.com/hook"
secret_env = "HOOK_SECRET"
"""


def refused_by_both(config, env: dict[str, str], said: str) -> None:
    """``config check`` and ``serve`` both exit 2 naming ``said``, and neither shows SECRET."""
    for command in ("config", "check"), ("serve", "--config"):
        refused(pausepoint(*command, str(config), env={**ENV, **env}), said)


def refused(done, said: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    assert said in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert "TOPSECRET" not in done.stderr + done.stdout


def test_the_longest_documented_retention_serves(tmp_path):
    """``[retention] events_days`` up to 36500, as docs/config.md says: 11575 and more passed the
    check, then serve died on a traceback (create_app took at most 10**9 seconds)."""
    config = write(tmp_path / "pp.toml", HEAD + "[retention]\nevents_days = 36500\n")
    done = pausepoint("config", "check", str(config), env=ENV)
    assert done.returncode == 0, done.stderr
    assert "events     pruned once delivered and 36500 days old" in done.stdout
    with serving("--config", str(config), "--port", "0", env=ENV) as served:
        assert httpx.get(served.url + "/healthz").status_code == 200
    over = write(tmp_path / "over.toml", HEAD + "[retention]\nevents_days = 36500.5\n")
    refused_by_both(over, {}, f"{over}:5: retention.events_days: a number of days from a second's worth")


def test_a_retention_reaching_before_the_calendars_first_day_prunes_nothing_yet(tmp_path):
    """An app whose clock reads an hour into the first day of the calendar, keeping a day: the
    cutoff is before any date; the pruning waits, where it ended on an OverflowError (a
    traceback when the server stopped)."""
    text = 'app = "tests.cli.config_apps:first_day_ai"\n[principals.alice]\ntoken_env = "ALICE_TOKEN"\n'
    config = write(tmp_path / "pp.toml", text + "[retention]\nevents_days = 1\n")
    with serving("--config", str(config), "--port", "0", env=ENV) as served:
        reply = httpx.post(served.url + "/v1/agents/greeter/sessions", json={"message": "hi"},
                           headers={"Authorization": "Bearer a1ice-token"}, timeout=30)  # fmt: skip
        assert reply.status_code == 200 and reply.json()["message"]["parts"][0]["text"] == "hello", reply.text
    assert "background task" not in served.stderr and "Overflow" not in served.stderr, served.stderr


@pytest.mark.parametrize(
    ("section", "line", "key"),
    [
        (WEBHOOK + "headers_env = { Authorization = \"LEAKY\" }\n", 9, "webhooks[0].headers_env.Authorization"),
        ("[tracing]\nendpoint = \"http://127.0.0.1:4318\"\nheaders_env = { x-api-key = \"LEAKY\" }\n", 6,
         "tracing.headers_env.x-api-key"),
        (WEBHOOK.replace("HOOK_SECRET", "LEAKY"), 8, "webhooks[0].secret_env"),
        ("[notifiers.links]\nsecret_env = \"LINK_SECRET\"\nconsole_url = \"https://pp.example.com/c\"\n"
         "[notifiers.slack]\nsigning_secret_env = \"LEAKY\"\nusers = { U1 = \"alice\" }\n", 8,
         "notifiers.slack.signing_secret_env"),
        ("[notifiers.links]\nsecret_env = [\"LINK_SECRET\", \"LEAKY\"]\nconsole_url = \"https://pp.example.com/c\"\n",
         5, "notifiers.links.secret_env[1]"),
        ("[[notifiers.email]]\nname = \"m\"\nhost = \"smtp.example.com\"\nsender = \"pp@example.com\"\n"
         "to = [\"desk@example.com\"]\nusername = \"pp\"\npassword_env = \"LEAKY\"\n", 10,
         "notifiers.email[0].password_env"),
    ],
)  # fmt: skip
def test_a_secret_ending_in_a_line_break_is_refused_at_its_key_never_shown(tmp_path, section, line, key):
    """A secret file's last line break (``echo > file``, a Kubernetes secret) made every request
    fail — and its error put the secret in the log and in ``last_error`` — or every signature
    mismatch, or every login fail: refused as a token is, naming the variable, never the value."""
    config = write(tmp_path / "pp.toml", HEAD + section)
    said = f"{config}:{line}: {key}: $LEAKY starts or ends with white space (a space, a line break)"
    refused_by_both(config, {"LEAKY": SECRET + "\n"}, said)


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (f"Bearer {SECRET}\tx", "holds a control character (a line break, a tab)"),
        (f"Bearer {SECRET}é", "holds a character beyond ASCII"),
    ],
)
def test_a_header_secret_no_request_could_carry_is_refused(tmp_path, value, why):
    config = write(tmp_path / "pp.toml", HEAD + WEBHOOK + 'headers_env = { Authorization = "LEAKY" }\n')
    said = f"{config}:9: webhooks[0].headers_env.Authorization: $LEAKY {why}: no request could carry it"
    refused_by_both(config, {"LEAKY": value}, said)


def test_a_key_that_only_signs_may_hold_any_printable_character(tmp_path):
    """A signing key is never sent: a character beyond ASCII signs as it is."""
    config = write(tmp_path / "pp.toml", HEAD + WEBHOOK)
    done = pausepoint("config", "check", str(config), env={**ENV, "HOOK_SECRET": "clé-de-signature"})
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("headers", "said"),
    [
        ('{ X-Team = "équipe" }', "the value of the X-Team header holds a character beyond ASCII"),
        ('{ X-Note = "a\\nb" }', "the value of the X-Note header holds a control character"),
        ('{ Content-Length = "5" }', "the Content-Length header is one the sender writes itself"),
        ('{ Pausepoint-Signature = "v1=0" }', "the Pausepoint-Signature header is one the sender writes itself"),
        ('{ "Bad Name" = "x" }', "'Bad Name' is not a header's name"),
    ],
)
def test_a_webhook_header_no_request_could_carry_is_refused_at_its_key(tmp_path, headers, said):
    """Such a header left its deliveries pending for good (no attempt counted, a traceback after
    every lease), or sent a truncated body (Content-Length): refused where it is written."""
    config = write(tmp_path / "pp.toml", HEAD + WEBHOOK + f"headers = {headers}\n")
    refused_by_both(config, {}, f"{config}:9: webhooks[0].headers: {said}")


@pytest.mark.parametrize("padded", ["sqlite:///{dir}/sessions.db\n", " sqlite:///{dir}/sessions.db"])
def test_a_store_url_with_white_space_at_an_end_is_refused_not_another_file(tmp_path, padded):
    """``sessions.db\\n`` was opened as another SQLite file than the other processes'
    ``sessions.db``, silently: refused from ``url_env``, ``url`` and ``--store`` alike."""
    url = padded.format(dir=tmp_path)
    why = "the store's URL starts or ends with white space (a space, a line break)"
    from_env = write(tmp_path / "env.toml", HEAD + '[store]\nurl_env = "STORE_URL"\n')
    refused_by_both(from_env, {"STORE_URL": url}, f"{from_env}:5: store.url_env: {why}")
    in_file = write(tmp_path / "file.toml", HEAD + f"[store]\nurl = {json.dumps(url)}\n")
    refused_by_both(in_file, {}, f"{in_file}:5: store.url: {why}")
    flag = pausepoint("serve", "tests.cli.apps:pay_ai", "--port", "0", "--store", url, env=ENV)
    refused(flag, f"--store: {why}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["env.toml", "file.toml"]
