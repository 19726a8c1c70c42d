"""``pausepoint config check FILE``: the team's example file (the very one docs/config.md shows)
checks, with every secret masked; a file with problems exits 2 naming each key and its line."""

from __future__ import annotations

import re
import textwrap

import pytest

from tests.cli.config_files import EXAMPLE, EXAMPLE_ENV, pausepoint, write
from tests.cli.conftest import ROOT


def test_the_example_file_checks_and_no_secret_is_printed():
    done = pausepoint("config", "check", str(EXAMPLE.relative_to(ROOT)), env=EXAMPLE_ENV)
    assert done.returncode == 0, done.stderr
    shown = done.stdout
    for expected in (
        "app        examples.team:ai (agents: paymentsAgent)",
        "listen     0.0.0.0:8000",
        "store      postgresql://pausepoint:****@db.internal/pausepoint (schema 'payments')",
        "principal  ci-bot: token $PAUSEPOINT_CI_TOKEN ********",
        "principal  oncall: token $PAUSEPOINT_ONCALL_TOKEN ********; operator",
        "principal  dana@example.com: signs in through the provider; approver of treasury",
        "sign-in    OpenID Connect: issuer https://login.example.com/realms/acme, audience pausepoint, RS256",
        "approvers: whoever holds treasury",
        "console: signs in as client pausepoint-console (authorization code + PKCE; scopes openid profile email; "
        "back to its own address)",
        "webhook    ops -> https://ops.example.com/hooks/pausepoint (json; answer, expiry, pause, signed (********))",
        "webhook    desk -> $SLACK_INCOMING_WEBHOOK_URL ******** (slack; pause)",
        "delivery   lease 60 s, 20 a claim, every 5 s",
        "tracing    OTLP http/protobuf -> http://otel-collector.internal:4318/v1/traces (service pausepoint-payments",
        "metrics    /metrics",
        "log        info, json, request log on",
        "expiry     every 30 s",
        "events     pruned once delivered and 30 days old",
    ):
        assert expected in shown, f"{expected!r} not in:\n{shown}"
    for secret in EXAMPLE_ENV.values():
        assert secret not in shown + done.stderr
    assert "pg-Passw0rd-xyz" not in shown and "slacksecretXYZ" not in shown


def test_the_docs_show_the_example_file_as_it_is():
    """docs/config.md shows examples/pausepoint.toml whole, and the test above loads that file."""
    page = (ROOT / "docs" / "config.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```toml\n(.*?)```", page, flags=re.DOTALL)
    assert EXAMPLE.read_text(encoding="utf-8") in blocks


def test_the_readme_team_setup_is_a_valid_file(tmp_path):
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    [block] = [b for b in re.findall(r"```toml\n(.*?)```", readme, flags=re.DOTALL) if "[auth.oidc]" in b]
    env = {**EXAMPLE_ENV, "PAUSEPOINT_DATABASE_URL": "postgresql://db.internal/pausepoint"}
    done = pausepoint("config", "check", str(write(tmp_path / "team.toml", block)), env=env)
    assert done.returncode == 0, done.stderr


GOOD_HEAD = 'app = "tests.cli.apps:pay_ai"\n'


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("[listen]\nprot = 80\n", 3, "listen.prot: unknown key (did you mean port?)"),
        ("[listen]\nport = \"80\"\n", 3, "listen.port: Input should be a valid integer"),
        ("[listen]\nport = 70000\n", 3, "listen.port: Input should be less than or equal to 65535"),
        ("[principals.alice]\ntoken = \"s3cret\"\n", 3,
         "principals.alice.token: a secret is never written in the file"),
        ("[principals.alice]\ntoken_env = \"NOT_SET_HERE\"\n", 3,
         "principals.alice.token_env: the environment variable NOT_SET_HERE is not set"),
        ("[principals.alice]\ntoken_env = \"TOKEN\"\nroles = [\"tresury\"]\n", 4,
         "principals.alice.roles: no agent's approval policy defines the role(s) tresury (roles: treasury)"),
        ("[principals.alice]\n\n", 2, "principals.alice: no token_env, and no [auth.oidc] to sign in through"),
        ("[store]\nurl = \"postgresql://pp:hunter2@db/pp\"\n", 3, "store.url: this URL holds a password"),
        ("[store]\nurl = \"redis://127.0.0.1:6379/0\"\nschema = \"x\"\n", 4,
         "store.schema: a redis store takes no 'schema' option (it is postgresql's)"),
        ("[store]\nurl = \"sqlite:///x.db\"\nurl_env = \"TOKEN\"\n", 2,
         "store: give the store's URL as url or url_env"),
        ("[[webhooks]]\nname = \"ops\"\nurl = \"https://ops.example.com\"\n", 2,
         "webhooks[0]: a json webhook signs its requests: name the secret's variable with secret_env"),
        ("[[webhooks]]\nname = \"ops\"\nurl = \"https://ops.example.com\"\nsecret = \"x\"\n", 5,
         "webhooks[0].secret: a secret is never written in the file"),
        ("[[webhooks]]\nname = \"s\"\nformat = \"slack\"\nurl = \"https://hooks.slack.com/services/T/B/X\"\n", 5,
         "webhooks[0].url: a Slack incoming-webhook URL is a secret"),
        ("[[webhooks]]\nname = \"o\"\nurl = \"https://o.example\"\nsecret_env = \"TOKEN\"\n"
         "headers = { Authorization = \"Bearer x\" }\n", 6, "webhooks[0].headers: the Authorization header"),
        ("[[webhooks]]\nname = \"o\"\nurl = \"https://o.example\"\nsecret_env = \"TOKEN\"\nevents = [\"paused\"]\n",
         6, "webhooks[0].events[0]: Input should be 'pause', 'answer'"),
        ("[[webhooks]]\nname = \"o\"\nurl = \"https://o.example\"\nsecret_env = \"TOKEN\"\nagents = [\"nobody\"]\n",
         2, "webhooks[0]: no agent named 'nobody' (agents: payAgent)"),
        ("[[webhooks]]\nname = \"o\"\nurl = \"https://o.example\"\nsecret_env = \"TOKEN\"\n"
         "[[webhooks]]\nname = \"o\"\nurl = \"https://p.example\"\nsecret_env = \"TOKEN\"\n",
         6, "webhooks[1]: webhooks[0] has the name 'o' already"),
        ("[[webhooks]]\nname = \"o\"\nurl = \"https://o.example\"\nsecret_env = \"TOKEN\"\ntimeout_seconds = 90\n"
         "[delivery]\nlease_seconds = 60\n", 8, "delivery.lease_seconds: the lease must outlast"),
        ("[auth.oidc]\nissuer = \"https://login.example.com\"\naudience = \"pp\"\nalgorithms = [\"none\"]\n", 5,
         "auth.oidc.algorithms: 'none' is no signature"),
        ("[auth.oidc]\nissuer = \"https://login.example.com\"\naudience = \"pp\"\nalgorithms = [\"HS256\"]\n", 5,
         "auth.oidc.algorithms: 'HS256' is keyed with a shared secret"),
        ("[auth.oidc]\nissuer = \"http://login.example.com\"\naudience = \"pp\"\n", 3,
         "auth.oidc.issuer: issuer must use https"),
        ("[auth.oidc]\nissuer = \"https://login.example.com\"\n", 2, "auth.oidc.audience: required, and missing"),
        ("[auth.oidc]\nissuer = \"https://login.example.com\"\naudience = \"pp\"\n"
         "console_redirect_uri = \"https://pp.example.com/console/\"\n", 2,
         "auth.oidc: console_redirect_uri needs console_client_id"),
        ("[auth.oidc]\nissuer = \"https://login.example.com\"\naudience = \"pp\"\nconsole_client_id = \"pp\"\n"
         "console_redirect_uri = \"http://pp.example.com/console/\"\n", 6,
         "auth.oidc.console_redirect_uri: console_redirect_uri must use https"),
        ("[auth.oidc]\nissuer = \"https://login.example.com\"\naudience = \"pp\"\nconsole_client_id = \"pp\"\n"
         "console_scopes = [\"openid profile\"]\n", 6, "auth.oidc.console_scopes: 'openid profile' is not a scope"),
        ("[tracing]\nendpoint = \"collector:4317\"\n", 3, "tracing.endpoint: the collector's URL"),
        ("[log]\nlevel = \"loud\"\n", 3, "log.level: Input should be 'debug', 'info', 'warning' or 'error'"),
        ("[limits]\nmax_body_bytes = 0\n", 3, "limits.max_body_bytes: Input should be greater than or equal to 1"),
        ("[retention]\nevents_days = 0\n", 3, "retention.events_days: a number of days from a second's worth"),
        ("[retention]\nevents_days = 1e-12\n", 3, "retention.events_days: a number of days from a second's worth"),
        ("[retention]\nevents_days = nan\n", 3, "retention.events_days: Input should be a finite number"),
        ("[notifiers.slack]\nsigning_secret_env = \"TOKEN\"\nusers = { U1 = \"alice\" }\n", 2,
         "notifiers.slack: Slack's buttons carry approval links: add [notifiers.links]"),
        ("[notifiers.links]\nsecret_env = \"LINK_SECRET\"\nconsole_url = \"https://pp.example.com/console\"\n"
         "[notifiers.slack]\nsigning_secret_env = \"TOKEN\"\nusers = { U1 = \"acme/alice\" }\n", 7,
         "notifiers.slack.users.U1: 'acme/alice' names a principal of tenant 'acme', which is not declared"),
        ("[principals.alice]\ntoken_env = \"TOKEN\"\n[notifiers.links]\nsecret_env = \"LINK_SECRET\"\n"
         "console_url = \"https://pp.example.com/console\"\n[notifiers.slack]\nsigning_secret_env = \"TOKEN\"\n"
         "users = { U1 = \"alice\", U2 = \"ghost\" }\n", 9,
         "notifiers.slack.users.U2: 'ghost' is no principal of this file (principals: alice): that user could"),
        ("[notifiers.links]\nsecret = \"0123456789abcdef0123\"\nsecret_env = \"TOKEN\"\n"
         "console_url = \"https://pp.example.com/console\"\n", 3, "notifiers.links.secret: a secret is never written"),
        ("[notifiers.links]\nsecret_env = \"TOKEN\"\nconsole_url = \"https://pp.example.com/console\"\n", 2,
         "notifiers.links: ApprovalLinks: each secret must be a string of 16 characters at least"),
        ("[[notifiers.email]]\nname = \"m\"\nhost = \"smtp.example.com\"\nsecurity = \"none\"\n"
         "sender = \"pp@example.com\"\nto = [\"desk@example.com\"]\nusername = \"pp\"\npassword_env = \"TOKEN\"\n",
         2, "notifiers.email[0]: email notifier 'm': a password is sent only over TLS"),
        ("[tenants.acme]\nprincipals = [\"alice\"]\n", 3,
         "tenants.acme.principals: Input should be a valid dictionary"),
        ("[tenants.\"a/b\"]\n", 2, "tenants.\"a/b\": 'a/b' is not a tenant's name"),
        ("[tenants.acme.principals.alice]\ntoken_env = \"TOKEN\"\noperator = true\n", 4,
         "tenants.acme.principals.alice.operator: an operator spans tenants: declare it in [principals]"),
        ("[listen]\nport = 80\nport = 81\n", 4, "not valid TOML: Cannot overwrite a value (at line 4, column 10)"),
    ],
)  # fmt: skip
def test_each_problem_is_named_at_its_key_and_line(tmp_path, text, line, message):
    config = write(tmp_path / "team.toml", GOOD_HEAD + text)
    done = pausepoint("config", "check", str(config), env={"TOKEN": "t0ken", "LINK_SECRET": "0123456789abcdef0123"})
    assert done.returncode == 2, done.stdout
    if "not valid TOML" in message:
        assert f"{config}: {message}" in done.stderr, done.stderr
    else:
        assert f"{config}:{line}: {message}" in done.stderr, done.stderr
    assert done.stdout == ""


def test_every_problem_of_a_file_is_listed_at_once(tmp_path):
    config = write(
        tmp_path / "team.toml",
        textwrap.dedent(
            """\
            app = "tests.cli.apps:pay_ai"
            [listen]
            host = 8

            [principals.alice]
            token = "written-here"

            [auth.oidc]
            issuer = "https://login.example.com"
            audience = "pp"
            leeway_seconds = 3600
            """
        ),
    )
    done = pausepoint("config", "check", str(config))
    assert done.returncode == 2
    assert f"{config}: 3 problems" in done.stderr
    for problem in (
        f"{config}:3: listen.host: Input should be a valid string",
        f"{config}:6: principals.alice.token: a secret is never written in the file",
        f"{config}:11: auth.oidc.leeway_seconds: Input should be less than or equal to 300",
    ):
        assert problem in done.stderr, done.stderr
    assert "written-here" not in done.stderr  # a value is never echoed: it may be a secret


def test_every_problem_the_app_and_the_environment_show_is_listed_at_once(tmp_path):
    """The checks after the schema's (a webhook's secret and URL, the app's agents and roles)
    go on after a problem too: one run names them all, at their keys and lines."""
    config = write(
        tmp_path / "team.toml",
        textwrap.dedent(
            """\
            app = "tests.cli.apps:pay_ai"

            [principals.alice]
            token_env = "TOKEN"
            roles = ["tresury"]

            [[webhooks]]
            name = "a"
            url = "ftp://x"

            [[webhooks]]
            name = "b"
            url = "https://b.example"
            agents = ["nobody"]
            """
        ),
    )
    for command in (["config", "check"], ["serve", "--config"]):
        done = pausepoint(*command, str(config), env={"TOKEN": "t0ken"})
        assert done.returncode == 2, done.stdout
        assert f"{config}: 5 problems" in done.stderr, done.stderr
        for problem in (
            f"{config}:5: principals.alice.roles: no agent's approval policy defines the role(s) tresury",
            f"{config}:7: webhooks[0]: a json webhook signs its requests: name the secret's variable with secret_env",
            f"{config}:7: webhooks[0]: webhook 'a': url must be an http(s) URL, not 'ftp://x'",
            f"{config}:11: webhooks[1]: a json webhook signs its requests",
            f"{config}:11: webhooks[1]: no agent named 'nobody' (agents: payAgent)",
        ):
            assert problem in done.stderr, done.stderr
        assert done.stdout == "" and "Traceback" not in done.stderr


def test_an_asgi_app_names_every_section_it_does_not_take(tmp_path):
    config = write(
        tmp_path / "team.toml",
        'app = "tests.cli.apps:asgi"\n[store]\nurl = "memory:"\n[metrics]\nenabled = true\n',
    )
    done = pausepoint("config", "check", str(config))
    assert done.returncode == 2
    assert f"{config}: 2 problems" in done.stderr, done.stderr
    assert f"{config}:2: store: tests.cli.apps:asgi is an ASGI app" in done.stderr
    assert f"{config}:4: metrics: tests.cli.apps:asgi is an ASGI app" in done.stderr


def test_every_option_a_store_does_not_take_is_named(tmp_path):
    """All of them at once, as for every other key (found by a probe: the first one only)."""
    text = 'app = "tests.cli.apps:pay_ai"\n[store]\nurl = "sqlite:///x.db"\nschema = "foo"\nprefix = "p:"\n'
    config = write(tmp_path / "team.toml", text)
    done = pausepoint("config", "check", str(config))
    assert done.returncode == 2
    assert f"{config}: 2 problems" in done.stderr, done.stderr
    assert f"{config}:4: store.schema: a sqlite store takes no 'schema' option (it is postgresql's)" in done.stderr
    assert f"{config}:5: store.prefix: a sqlite store takes no 'prefix' option (it is redis's)" in done.stderr


def test_a_file_that_cannot_be_read_is_a_clear_error(tmp_path):
    done = pausepoint("config", "check", str(tmp_path / "missing.toml"))
    assert done.returncode == 2
    assert f"cannot read the config file {tmp_path / 'missing.toml'}: No such file or directory" in done.stderr
    done = pausepoint("serve", "--config", str(tmp_path / "missing.toml"))
    assert done.returncode == 2 and "pausepoint serve: error: cannot read the config file" in done.stderr


def test_an_asgi_app_takes_only_its_address_and_logs(tmp_path):
    config = write(tmp_path / "team.toml", 'app = "tests.cli.apps:asgi"\n[listen]\nport = 0\n')
    done = pausepoint("config", "check", str(config))
    assert done.returncode == 0 and "app        tests.cli.apps:asgi (an ASGI app, served as it is)" in done.stdout
    config = write(tmp_path / "team.toml", 'app = "tests.cli.apps:asgi"\n\n[store]\nurl = "memory:"\n')
    for command in (["config", "check", str(config)], ["serve", "--config", str(config)]):
        done = pausepoint(*command)
        assert done.returncode == 2
        assert f"{config}:3: store: tests.cli.apps:asgi is an ASGI app: it brings its own" in done.stderr


def test_serve_needs_an_app_from_the_command_line_or_the_file(tmp_path):
    config = write(tmp_path / "team.toml", "[listen]\nport = 0\n")
    for command in (["serve", "--config", str(config)], ["config", "check", str(config)]):
        done = pausepoint(*command)
        assert done.returncode == 2
        assert f'{config} names no app: add app = "module:attr" to it (or give serve a TARGET)' in done.stderr
    assert "the following arguments are required: TARGET" in pausepoint("serve").stderr


def test_check_names_the_extra_a_section_needs(tmp_path):
    """Each optional part names what it needs; with them installed, the check passes."""
    config = write(
        tmp_path / "team.toml",
        GOOD_HEAD + '[tracing]\nprotocol = "grpc"\nendpoint = "http://127.0.0.1:4317"\n[metrics]\nenabled = true\n',
    )
    done = pausepoint("config", "check", str(config))
    assert done.returncode == 0, done.stderr
    assert "tracing    OTLP grpc -> http://127.0.0.1:4317 (service pausepoint, sampled 1)" in done.stdout


def test_a_slack_user_mapped_to_no_principal_is_one_problem_named_once(tmp_path):
    """Found by a probe: 'acme/' was named at its user's key and again as the Slack app's."""
    config = write(
        tmp_path / "team.toml",
        GOOD_HEAD
        + "[tenants.acme]\n[principals.alice]\ntoken_env = \"TOKEN\"\n[notifiers.links]\nsecret_env = \"LINK_SECRET\"\n"
        "console_url = \"https://pp.example.com/console\"\n[notifiers.slack]\nsigning_secret_env = \"TOKEN\"\n"
        "users = { U1 = \"alice\", U5 = \"acme/\" }\n",
    )  # fmt: skip
    done = pausepoint("config", "check", str(config), env={"TOKEN": "t0ken", "LINK_SECRET": "0123456789abcdef0123"})
    assert done.returncode == 2, done.stdout
    assert "notifiers.slack.users.U5: 'acme/' is no principal of this file" in done.stderr, done.stderr
    assert "'acme/'" not in done.stderr.replace("notifiers.slack.users.U5: 'acme/'", ""), done.stderr


def test_synchronous_takes_the_same_values_as_the_url_query(tmp_path):
    """Found by a probe: ``synchronous = "normal"`` was refused where ``?synchronous=normal`` in
    the URL was taken: one rule for both places (any case, shown as NORMAL)."""
    for store in ('url = "sqlite:///x.db"\nsynchronous = "normal"\n', 'url = "sqlite:///x.db?synchronous=normal"\n'):
        done = pausepoint("config", "check", str(write(tmp_path / "s.toml", GOOD_HEAD + "[store]\n" + store)))
        assert done.returncode == 0, done.stderr
        assert "store      sqlite:///x.db (synchronous 'NORMAL')" in done.stdout
    config = write(tmp_path / "s.toml", GOOD_HEAD + '[store]\nurl = "sqlite:///x.db"\nsynchronous = "off"\n')
    done = pausepoint("config", "check", str(config))
    assert done.returncode == 2
    assert f"{config}:4: store.synchronous: must be FULL or NORMAL, not 'off'" in done.stderr, done.stderr
