"""What ``config check`` refuses about who approves and the URLs and names the file gives, found
by outside probes: an escalation nobody could approve, a quorum no tenant's members reach, a
single sign-on approver role no policy defines, a credential in a URL, a str-or-list key's
problem named at pydantic's internal names, and a tenant named like the metrics' ``other``."""

from __future__ import annotations

from datetime import timedelta

import pytest

from pausepoint.errors import DefinitionError
from pausepoint.metrics import PrometheusMetrics
from pausepoint.webhooks import ApprovalLinks
from tests.cli.config_files import pausepoint, write

PAY = 'app = "tests.cli.apps:pay_ai"\n'
OIDC = '[auth.oidc]\nissuer = "https://login.example.com"\naudience = "pp"\n'
ENV = {"TOKEN": "t0ken", "A": "a-token", "B": "b-token", "C": "c-token", "LINK_A": "a-link-secret-of-16+"}


def principal(table: str, token: str, roles: str) -> str:
    return f'[{table}]\ntoken_env = "{token}"\nroles = ["{roles}"]\n'


def checked(tmp_path, text: str):
    return pausepoint("config", "check", str(write(tmp_path / "team.toml", text)), env=ENV)


TREASURY_AND_LEAD = principal("principals.alice", "A", "treasury") + principal("principals.erin", "B", "leads")


@pytest.mark.parametrize(
    ("app", "people", "said"),
    [
        ("typo_ai", TREASURY_AND_LEAD, "escalation step 1 of 'transfer_money' hands it to tresury, but only 0 "
         "member(s) hold a role there that may approve it, and it needs 1 (tresury: a role no approval policy "
         "defines and no member holds; roles: auditors, leads, treasury)"),
        ("leads_ai", principal("principals.alice", "A", "treasury"),
         "escalation step 1 of 'transfer_money' hands it to leads, but only 0 member(s) hold a role there"),
        ("leads_two_ai", TREASURY_AND_LEAD + principal("principals.bob", "C", "treasury"),
         "hands it to leads, but only 1 member(s) hold a role there that may approve it, and it needs 2"),
    ],
)  # fmt: skip
def test_an_escalation_nobody_could_approve_is_refused(tmp_path, app, people, said):
    """Found by a probe: a typo in ``Escalation(to=...)``, a role nobody holds, or one fewer hold
    than the quorum passed, and the pause handed on could only expire."""
    done = checked(tmp_path, f'app = "tests.cli.escalation_apps:{app}"\n' + people)
    assert done.returncode == 2, done.stdout
    assert said in done.stderr and "agent 'payAgent'" in done.stderr, done.stderr
    ok = checked(tmp_path, 'app = "tests.cli.escalation_apps:leads_ai"\n' + TREASURY_AND_LEAD)
    assert ok.returncode == 0, ok.stderr


def test_every_escalation_nobody_could_approve_is_named_at_the_members_it_counted(tmp_path):
    """Found by a probe: only the first step was named (the next one once it was fixed), and at
    every principal's roles, those of the other steps and of no step alike."""
    people = (
        TREASURY_AND_LEAD
        + principal("principals.bob", "C", "treasury")
        + principal("principals.ann", "TOKEN", "auditors")
    )
    done = checked(tmp_path, 'app = "tests.cli.escalation_apps:two_steps_ai"\n' + people)
    assert done.returncode == 2, done.stdout
    problems = [line for line in done.stderr.splitlines() if "escalation step" in line]
    assert len(problems) == 2, done.stderr
    first, second = problems
    assert "step 1 of 'transfer_money' hands it to leads, but only 1 member(s)" in first, first
    assert "principals.erin.roles" in first and "alice" not in first and "ann" not in first, first
    assert "step 2 of 'transfer_money' hands it to auditors, but only 0 member(s)" in second, second
    assert "principals.ann.roles" in second and "erin" not in second and "alice" not in second, second


def test_a_quorum_no_tenants_members_reach_is_refused(tmp_path):
    """Found by a probe: roles hold in their tenant, and the count of a quorum's approvers was
    skipped for a tenant's principals (the same people of no tenant were refused). Refused where
    the members of no one tenant reach it; a tenant with fewer may not use the tool."""
    acme = principal("tenants.acme.principals.alice", "A", "treasury")
    globex = principal("tenants.globex.principals.bob", "B", "treasury")
    done = checked(tmp_path, PAY + acme + globex)
    assert done.returncode == 2, done.stdout
    said = ("'transfer_money' needs 2 approvals, but at most 1 member(s) of any one tenant (acme: 1, globex: 1) "
            "hold a role that may approve it")  # fmt: skip
    assert said in done.stderr and ":4: tenants.acme.principals.alice.roles" in done.stderr, done.stderr
    two = checked(tmp_path, PAY + acme + globex + principal("tenants.acme.principals.carol", "C", "treasury"))
    assert two.returncode == 0, two.stderr


def test_a_single_sign_on_approver_role_no_policy_defines_is_refused(tmp_path):
    """Found by a probe: a typo in ``approver_roles`` passed (the same one in a principal's
    ``roles`` is refused)."""
    done = checked(tmp_path, PAY + OIDC + 'approver_roles = ["treasurey"]\n')
    assert done.returncode == 2, done.stdout
    said = "5: auth.oidc.approver_roles: no agent's approval policy defines the role(s) treasurey (roles: treasury)"
    assert said in done.stderr, done.stderr
    ok = checked(tmp_path, PAY + OIDC + 'approver_roles = ["treasury"]\n')
    assert ok.returncode == 0 and "approvers: whoever holds treasury" in ok.stdout, ok.stderr


def test_a_credential_in_a_url_is_refused_and_never_shown(tmp_path):
    """Found by a probe: a password in ``console_url``, ``issuer`` and ``jwks_uri`` was taken
    (and printed); every approval link would carry the console's."""
    text = (
        PAY + '[auth.oidc]\nissuer = "https://user:hunter2@login.example.com"\naudience = "pp"\n'
        'jwks_uri = "https://user:hunter2@login.example.com/keys"\n'
        '[notifiers.links]\nsecret_env = "LINK_A"\nconsole_url = "https://user:hunter2@pp.example.com/console"\n'
    )
    done = checked(tmp_path, text)
    assert done.returncode == 2, done.stdout
    for said in (
        "3: auth.oidc.issuer: issuer holds a user name or password",
        "5: auth.oidc.jwks_uri: jwks_uri holds a user name or password",
        "8: notifiers.links.console_url: this URL holds a user name or password: every approval link would carry it",
    ):
        assert said in done.stderr, done.stderr
    assert "hunter2" not in done.stderr + done.stdout
    with pytest.raises(DefinitionError) as refused:
        ApprovalLinks("a-link-secret-of-16+", console_url="https://user:hunter2@pp.example.com/console")
    assert "console_url holds a user name or password" in str(refused.value) and "hunter2" not in str(refused.value)
    links = ApprovalLinks("a-link-secret-of-16+", console_url="https://pp.example.com/console", ttl=timedelta(hours=1))
    assert links.url("t") == "https://pp.example.com/console/#link=t"


def test_a_password_in_the_collectors_url_points_at_a_header(tmp_path):
    """Found by a probe: the message said to give the whole URL in a variable, which ``[tracing]``
    has no key for; the credential goes in a header through ``headers_env``."""
    done = checked(tmp_path, PAY + '[tracing]\nendpoint = "https://user:hunter2@otel.example.com"\n')
    assert done.returncode == 2, done.stdout
    said = "3: tracing.endpoint: this URL holds a password, a secret: send the credential in a header instead"
    assert said in done.stderr and "(headers_env)" in done.stderr and "whole URL" not in done.stderr, done.stderr


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('[notifiers.links]\nsecret_env = ["LINK_A", "NOPE_X"]\nconsole_url = "https://pp.example.com/c"\n',
         "3: notifiers.links.secret_env[1]: the environment variable NOPE_X is not set"),
        ('[notifiers.links]\nsecret_env = "NOPE_X"\nconsole_url = "https://pp.example.com/c"\n',
         "3: notifiers.links.secret_env: the environment variable NOPE_X is not set"),
        ('[notifiers.links]\nsecret_env = 5\nconsole_url = "https://pp.example.com/c"\n',
         "3: notifiers.links.secret_env: the name of an environment variable, or a list of them"),
        ('[auth.oidc]\nissuer = "https://login.example.com"\naudience = [1]\n',
         "4: auth.oidc.audience[0]: Input should be a valid string"),
    ],
)  # fmt: skip
def test_a_key_taking_one_or_a_list_names_one_problem_at_the_key(tmp_path, text, said):
    """Found by a probe: a list with an unset variable was named twice, at pydantic's names for
    the kinds it tried (``secret_env."function-after[...]"``, ``secret_env."list[...]"[1]``)."""
    done = checked(tmp_path, PAY + text)
    assert done.returncode == 2, done.stdout
    assert said in done.stderr and "problems" not in done.stderr, done.stderr
    assert "function-after" not in done.stderr and "list[" not in done.stderr


def test_a_tenant_named_other_is_refused(tmp_path):
    """Found by a probe: the metrics count every tenant the file does not name as ``other``, so a
    tenant of that name was counted with them."""
    done = checked(tmp_path, PAY + "[tenants.other]\n[tenants.acme]\n")
    assert done.returncode == 2, done.stdout
    assert "2: tenants.other: 'other' is what the metrics call every tenant the file does not name" in done.stderr
    with pytest.raises(DefinitionError, match="'other' is the label of every tenant not named"):
        PrometheusMetrics(tenants=["acme", "other"])
    assert PrometheusMetrics(tenants=["acme"]).tenants == {"acme"}
