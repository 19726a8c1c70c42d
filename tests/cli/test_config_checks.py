"""What ``config check`` (and ``serve --config``) refuses beyond a key's type, found by outside
probes: a flag naming a principal the file could not name, a token that could never sign in, a
duplicate token named at the wrong line, a webhook that would hear nothing, roles beside
``approver = false``, and problems that hid others (every part of the file is checked at once)."""

from __future__ import annotations

import textwrap

import pytest

from pausepoint.cli import CliError, parser
from pausepoint.cli._settings import ServeSettings, resolve
from tests.cli.config_files import pausepoint, write

HEAD = 'app = "tests.cli.apps:pay_ai"\n'
NAME_RULE = "is not a name: 1 to 128 printable characters, not starting or ending in a space"


def resolved(*argv: str, env: dict[str, str] | None = None) -> ServeSettings:
    """``serve ARGV``'s settings, in this process (nothing is served)."""
    return resolve(parser().parse_args(["serve", *argv]), env or {})


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--token", "acme/=x-token-12345678"], f"--token 'acme/': '' {NAME_RULE}"),
        (["--token", "acme/ =x-token-12345678"], f"--token 'acme/ ': ' ' {NAME_RULE}"),
        (["--token", " =x-token-12345678"], f"--token ' ': ' ' {NAME_RULE}"),
        (["--token", "alice =x-token-12345678"], f"--token 'alice ': 'alice ' {NAME_RULE}"),
        (["--approver", "acme/ :x-token-12345678"], f"--approver 'acme/ ': ' ' {NAME_RULE}"),
        (["--approver", "bob\t:x-token-12345678"], f"--approver 'bob\\t': 'bob\\t' {NAME_RULE}"),
        (["--operator", " oncall"], f"--operator ' oncall': ' oncall' {NAME_RULE}"),
    ],
)  # fmt: skip
def test_a_flag_names_only_a_principal_the_file_could_name(tmp_path, flags, said):
    """Found by a probe: ``--token "acme/ =..."`` made an acme principal named " " (who could
    create sessions), and ``--token "acme/=..."`` one whose token was refused everywhere."""
    config = write(tmp_path / "team.toml", HEAD + "[tenants.acme]\n")
    with pytest.raises(CliError) as refused:
        resolved("--config", str(config), *flags)
    assert said in str(refused.value)
    assert "x-token-12345678" not in str(refused.value)
    done = pausepoint("serve", "--config", str(config), "--port", "0", *flags)
    assert done.returncode == 2 and f"pausepoint serve: error: {said}" in done.stderr, done.stderr
    # the names the file takes, the flags take
    settings = resolved("--config", str(config), "--token", "acme/dana@example.com=t", "--token", "a b=u",
                        "--approver", "acme/Zoë:v", "--token", "on call=w", "--operator", "on call")  # fmt: skip
    assert sorted(settings.principals) == ["a b", "acme/Zoë", "acme/dana@example.com", "on call"]
    assert settings.operators == ["on call"]  # an operator signs in: one with no token is refused


@pytest.mark.parametrize(
    ("token", "why"),
    [
        (" a1ice-token", "starts or ends with white space (a space, a line break)"),
        ("a1ice-token\n", "starts or ends with white space (a space, a line break)"),
        ("a1ice\ntoken", "holds a control character (a line break, a tab)"),
        ("a1ice\x7ftoken", "holds a control character (a line break, a tab)"),
        ("a1ice-tökén", "holds a character beyond ASCII"),
    ],
)
def test_a_token_that_could_never_sign_in_is_refused_naming_its_principal(tmp_path, token, why):
    """Found by a probe: ``config check`` said ok to such a token, which no request can send
    (the server strips a token's spaces; a header carries no line break). Short tokens are fine."""
    config = write(tmp_path / "team.toml", HEAD + '[principals.bot]\ntoken_env = "SHORT"\n\n'
                   '[tenants.acme.principals.alice]\ntoken_env = "ALICE_TOKEN"\n')  # fmt: skip
    done = pausepoint("config", "check", str(config), env={"ALICE_TOKEN": token, "SHORT": "t"})
    assert done.returncode == 2, done.stdout
    said = f"{config}:6: tenants.acme.principals.alice.token_env: the token of 'acme/alice' {why}"
    assert said in done.stderr and "could never sign in" in done.stderr, done.stderr
    assert "a1ice" not in done.stderr and "'bot'" not in done.stderr  # never the token; a short one is fine
    for flag, value, where in (("--token", f"acme/alice={token}", "--token acme/alice=..."),
                               ("--approver", f"acme/alice:{token}", "--approver acme/alice:...")):  # fmt: skip
        with pytest.raises(CliError) as refused:
            resolved("--config", str(config), flag, value, env={"ALICE_TOKEN": "fine", "SHORT": "t"})
        assert f"{where}: the token of 'acme/alice' {why}" in str(refused.value)
        assert "a1ice" not in str(refused.value)
    # a space inside a token is sent as it is: it signs in
    assert resolved("--token", "alice=a b", "tests.cli.apps:pay_ai").tokens == {"a b": "alice"}


def test_a_token_given_twice_is_named_at_its_token_env_line(tmp_path):
    """Found by a probe: the problem was named at ``roles`` (a principal with roles) or at the
    table's header (one without), not at the key that gives the token."""
    config = write(
        tmp_path / "team.toml",
        textwrap.dedent(
            """\
            app = "tests.cli.apps:pay_ai"
            [principals.bob]
            token_env = "TOKEN"

            [principals.carol]
            token_env = "TOKEN"

            [tenants.acme.principals.alice]
            roles = ["treasury"]
            token_env = "TOKEN"
            """
        ),
    )
    done = pausepoint("config", "check", str(config), env={"TOKEN": "t0ken"})
    assert done.returncode == 2, done.stdout
    for said in (
        f"{config}:6: principals.carol.token_env: the token of 'carol' is given twice (it is also the token of 'bob')",
        f"{config}:10: tenants.acme.principals.alice.token_env: the token of 'acme/alice' is given twice",
    ):
        assert said in done.stderr, done.stderr
    # a flag's token: named at the flag, also for a principal the file declares
    settings = resolved("--config", str(config), "--token", "carol=other", env={"TOKEN": "other"})
    assert "--token carol=...: the token of 'carol' is given twice" in "\n".join(settings.problems.found)
    # ... also when the flag gives an earlier principal of the file the token of a later one
    # (found by a probe: the later one's token_env line was named)
    two = write(
        tmp_path / "two.toml",
        HEAD + '[principals.bob]\ntoken_env = "BOB"\n\n[principals.carol]\ntoken_env = "CAROL"\n',
    )
    settings = resolved("--config", str(two), "--token", "bob=c-token", env={"BOB": "b-token", "CAROL": "c-token"})
    found = "\n".join(settings.problems.found)
    assert "--token bob=...: the token of 'bob' is given twice" in found and "token_env" not in found, found


@pytest.mark.parametrize(
    ("section", "key", "line"),
    [
        ('[[webhooks]]\nname = "o"\nurl = "https://o.example"\nsecret_env = "TOKEN"\n', "webhooks[0]", 7),
        ('[[notifiers.email]]\nname = "m"\nhost = "smtp.example.com"\nsender = "pp@example.com"\n'
         'to = ["desk@example.com"]\n', "notifiers.email[0]", 8),
    ],
)  # fmt: skip
@pytest.mark.parametrize("empty", ["tenants", "agents"])
def test_an_empty_list_of_tenants_or_agents_is_refused(tmp_path, section, key, line, empty):
    """Found by a probe: ``tenants = []`` passed, and made a webhook that never fires (so did
    ``agents = []``). Left out, the key means every one."""
    config = write(tmp_path / "team.toml", f"{HEAD}[tenants.acme]\n{section}{empty} = []\n")
    done = pausepoint("config", "check", str(config), env={"TOKEN": "t0ken"})
    assert done.returncode == 2, done.stdout
    assert f"{config}:{line}: {key}.{empty}: an empty list: it would hear no session, ever; leave {empty} out" in (
        done.stderr
    )
    config = write(tmp_path / "team.toml", f"{HEAD}[tenants.acme]\n{section}")
    assert pausepoint("config", "check", str(config), env={"TOKEN": "t0ken"}).returncode == 0


@pytest.mark.parametrize("table", ["principals.alice", "tenants.acme.principals.alice"])
def test_roles_beside_approver_false_are_refused(tmp_path, table):
    """Found by a probe: passed silently, and the roles made an approver all the same."""
    text = f'{HEAD}[{table}]\ntoken_env = "TOKEN"\nroles = ["treasury"]\napprover = false\n'
    done = pausepoint("config", "check", str(write(tmp_path / "team.toml", text)), env={"TOKEN": "t0ken"})
    assert done.returncode == 2, done.stdout
    assert f":5: {table}.approver: roles make their holder an approver: drop approver = false (or the roles)" in (
        done.stderr
    )


EVERY_PART = """\
app = "tests.cli.apps:pay_ai"

[principals.alice]
token_env = "TOKEN"
roles = ["tresury"]

[principals.bob]
token_env = "TOKEN"

[principals.carol]
roles = ["treasury"]

[auth.oidc]
issuer = "https://login.example.com"
audience = "pp"
algorithms = ["none"]

[tenants."a/b"]

[tenants.acme.principals.dan]
token_env = "TOKEN"
operator = "yes"

[[webhooks]]
name = "broken"
url = "https://x.example"
tenants = []

[[webhooks]]
name = "y"
url = "ftp://y.example"
secret_env = "TOKEN"
tenants = ["acme"]

[notifiers.links]
secret_env = "TOKEN"
console_url = "https://pp.example.com/console"

[notifiers.slack]
signing_secret_env = "TOKEN"
users = { U1 = "ghost", U2 = "acme/dan" }

[delivery]
lease_seconds = -1
"""


def test_a_problem_of_the_schema_hides_no_other(tmp_path):
    """Found by a probe: ``algorithms = ["none"]`` or a tenant's name stopped the check there,
    and the duplicate token, the unknown role, the short link secret were named only once those
    were fixed. Now each part the schema refuses is left out and the others are checked; what
    reads across a part left out says nothing about it (no guess: carol may sign in through the
    provider, the webhook's tenant and Slack's users may be of the tenant left out)."""
    config = write(tmp_path / "team.toml", EVERY_PART)
    done = pausepoint("config", "check", str(config), env={"TOKEN": "t0ken"})
    assert done.returncode == 2, done.stdout
    expected = [
        "16: auth.oidc.algorithms: 'none' is no signature",
        "18: tenants.\"a/b\": 'a/b' is not a tenant's name",
        "22: tenants.acme.principals.dan.operator: Input should be a valid boolean",
        "27: webhooks[0].tenants: an empty list",
        "44: delivery.lease_seconds: Input should be greater than or equal to 0.01",
        "8: principals.bob.token_env: the token of 'bob' is given twice (it is also the token of 'alice')",
        "29: webhooks[1]: webhook 'y': url must be an http(s) URL, not 'ftp://y.example'",
        "35: notifiers.links: ApprovalLinks: each secret must be a string of 16 characters at least",
        "5: principals.alice.roles: no agent's approval policy defines the role(s) tresury",
    ]
    assert f"{config}: {len(expected)} problems" in done.stderr, done.stderr
    for said in expected:
        assert f"{config}:{said}" in done.stderr, done.stderr


def test_durations_no_loop_can_keep_are_named_not_served(tmp_path):
    """``inf`` passed the check, then crashed serve (a lease's timedelta), or stopped the expiry
    sweep for good (1e12: a date out of range), and 1e-9 held serve past SIGTERM (found by a
    probe): each is named at its key, and serve does not start."""
    text = (
        'app = "tests.cli.config_apps:expiring_ai"\n[delivery]\nlease_seconds = inf\ninterval_seconds = 1e12\n'
        "[expiry]\ninterval_seconds = 1e-9\n"
        '[[webhooks]]\nname = "w"\nurl = "https://w.example"\nsecret_env = "TOKEN"\ntimeout_seconds = nan\n'
        "backoff_seconds = inf\n"
    )
    config = write(tmp_path / "times.toml", text)
    for command in (["config", "check"], ["serve", "--config"]):
        done = pausepoint(*command, str(config), env={"TOKEN": "t0ken"})
        assert done.returncode == 2, done.stdout + done.stderr
        assert "Traceback" not in done.stderr
        for said in (
            "3: delivery.lease_seconds: Input should be a finite number",
            "4: delivery.interval_seconds: Input should be less than or equal to 86400",
            "6: expiry.interval_seconds: Input should be greater than or equal to 0.01",
            "11: webhooks[0].timeout_seconds: Input should be a finite number",
            "12: webhooks[0].backoff_seconds: Input should be a finite number",
        ):
            assert f"{config}:{said}" in done.stderr, done.stderr


def test_a_wrong_app_hides_no_other_problem_of_the_file(tmp_path):
    """The file's problems are named with the app's: its ``app`` key, or the app it names that
    cannot be imported."""
    text = 'app = "nocolon"\n[listen]\nport = "x"\n[principals.a]\ntoken_env = "T"\n[principals.b]\ntoken_env = "T"\n'
    config = write(tmp_path / "team.toml", text)
    for command in (["config", "check"], ["serve", "--config"]):
        done = pausepoint(*command, str(config), env={"T": "t"})
        assert done.returncode == 2, done.stdout
        assert f"{config}: 3 problems" in done.stderr, done.stderr
        assert f"{config}:1: app: module:attribute (like myapp:ai), not 'nocolon'" in done.stderr
        assert f"{config}:3: listen.port: Input should be a valid integer" in done.stderr
        assert f"{config}:7: principals.b.token_env: the token of 'b' is given twice" in done.stderr
    done = pausepoint("serve", "tests.cli.apps:missing", "--config", str(config), env={"T": "t"})
    assert f"{config}: 4 problems" in done.stderr and "module 'tests.cli.apps' has no attribute" in done.stderr


def test_a_malformed_url_from_the_environment_is_named_at_url_env_and_never_shown(tmp_path):
    """A webhook's url_env holds a secret (a Slack incoming-webhook URL posts as the app): a
    malformed one is named at its key without its value (found by a probe: printed in full)."""
    config = write(
        tmp_path / "hooks.toml",
        HEAD
        + textwrap.dedent(
            """\
            [[webhooks]]
            name = "desk"
            format = "slack"
            url_env = "DESK_HOOK"
            """
        ),
    )
    secret = "hooks.slack.com/services/T000/B000/XXXXSECRETXXXX"
    done = pausepoint("config", "check", str(config), env={"DESK_HOOK": secret})
    assert done.returncode == 2, done.stdout
    assert f"{config}:5: webhooks[0].url_env: $DESK_HOOK must hold an http(s) URL" in done.stderr, done.stderr
    assert "SECRET" not in done.stderr + done.stdout


def test_a_key_with_a_control_character_is_named_with_it_escaped(tmp_path):
    """Every problem stays on one line: a key holding a line break or a bell is shown escaped,
    as the message's quoted name is (found by a probe: the key broke the line in two)."""
    config = write(
        tmp_path / "ctrl.toml",
        HEAD + '[tenants.acme.principals."al\\nice"]\ntoken_env = "TOKEN"\n[tenants."ac\\u0007me".principals.bob]\n'
        'token_env = "OTHER"\n',
    )
    done = pausepoint("config", "check", str(config), env={"TOKEN": "t-1", "OTHER": "t-2"})
    assert done.returncode == 2, done.stdout
    assert 'tenants.acme.principals."al\\nice"' in done.stderr and "\x07" not in done.stderr, done.stderr
    assert all(line.startswith(("pausepoint", str(config), " ")) for line in done.stderr.splitlines()), done.stderr


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('app = "nomod:ai"\n[listen]\nprot = 1\n', "1: app: no module named 'nomod'"),
        ('app = "tests.cli.apps:bank_agent"\n', "1: app: tests.cli.apps:bank_agent is an Agent ('bankingAgent')"),
        (HEAD + '\n[store]\nurl = "sqlite:///nodir/x.db"\n', "4: store.url: the SQLite file's folder "),
        (HEAD + '[store]\nurl = "redis://127.0.0.1:1/zero"\n',
         "3: store.url: a Redis URL's path is its database's number (redis://host:6379/0), not 'zero'"),
        (HEAD + '[store]\nurl_env = "STORE_URL"\n', "3: store.url_env: the Redis driver takes no 'bogus' option"),
        # found by a second probe: a schema PostgreSQL cannot take was named at store.url, not at its own key
        (HEAD + '[store]\nurl = "postgresql://127.0.0.1:1/pp"\nschema = "' + "s" * 64 + '"\n',
         "4: store.schema: a PostgreSQL schema's name has 1 to 63 bytes in UTF-8, not 64"),
    ],
)  # fmt: skip
def test_the_app_and_the_store_are_named_at_their_keys(tmp_path, text, said):
    """docs/config.md: every problem is named at its key and line — an app that cannot be
    imported, a store the store check refuses too (found by a probe: neither was)."""
    config = write(tmp_path / "team.toml", text)
    for command in (["config", "check"], ["serve", "--config"]):
        done = pausepoint(*command, str(config), env={"STORE_URL": "redis://127.0.0.1:1/0?bogus=1"})
        assert done.returncode == 2, done.stdout
        assert f"{config}:{said}" in done.stderr, done.stderr


@pytest.mark.parametrize(
    ("host", "taken"),
    [("not a host!!", False), ("-x.example", False), ("a..b", False), ("localhost", True), ("0.0.0.0", True),
     ("::1", True), ("api.example.com", True)],
)  # fmt: skip
def test_a_listen_host_that_is_no_host_is_named_at_its_key(tmp_path, host, taken):
    """Found by a probe: ``config check`` said it would run, then ``serve`` could not resolve it."""
    config = write(tmp_path / "h.toml", f'{HEAD}[listen]\nhost = "{host}"\n')
    done = pausepoint("config", "check", str(config), env={"TOKEN": "t0ken"})
    if taken:
        assert done.returncode == 0, done.stderr
    else:
        assert done.returncode == 2
        assert f"listen.host: {host!r} is no host name or IP address" in done.stderr, done.stderr
