"""Apps for the CLI tests to name as ``tests.cli.apps:<attr>`` (the examples, on in-memory stores)."""

from examples import banking, shell
from pausepoint import ApprovalPolicy, Pausepoint, Role
from pausepoint.testing import ScriptedModel
from tests.approval_apps import Transfer, script, treasury
from tests.approval_apps import build as build_bank

bank_ai, bank_agent = banking.build()
shell_ai, shell_agent = shell.build()


async def asgi(scope, receive, send):
    """A bare ASGI app: ``serve`` runs it as it is."""
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"plain ASGI"})


def _pay_app() -> Pausepoint:
    """Payments two of treasury approve; who holds treasury is declared by ``serve --approver``."""
    ai = Pausepoint(approval=ApprovalPolicy(roles={"treasury": Role(tools=["transfer_money"])},
                                            quorum={"transfer_money": 2}))  # fmt: skip

    @ai.tool(requires_approval=True)
    async def transfer_money(input: Transfer) -> str:
        """Move money."""
        return f"sent {input.amount} to {input.to_account}"

    ai.define_agent(name="payAgent", model=ScriptedModel(script), tools=[transfer_money])
    return ai


pay_ai = _pay_app()


# The approval tests' bank (tests/approval_apps.py): two of treasury approve each transfer; and
# one of treasury who did not ask for it, who may grant later transfers for the session.
quorum_agent, _, quorum_ledger = build_bank(policy=treasury(quorum={"transfer_money": 2}))
grant_agent, _, grant_ledger = build_bank(policy=treasury(grantable=["transfer_money"], separation_of_duties=True))
