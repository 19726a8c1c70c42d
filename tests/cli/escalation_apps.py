"""Apps whose approval policies hand a pause nobody decided in time on (``Escalation``), for the
config checks, named as ``tests.cli.escalation_apps:<attr>``: treasury decides each transfer
within ten minutes, then each step's role (``leads`` names no tool: it decides what it is handed;
``auditors`` may only deny transfers)."""

from datetime import timedelta

from pausepoint import ApprovalPolicy, Escalation, Pausepoint, Role
from pausepoint.testing import ScriptedModel
from tests.approval_apps import Transfer, script


def _escalating(*to: str, quorum: int = 1) -> Pausepoint:
    """Transfers ``quorum`` of treasury approve, handed to each role of ``to`` in turn, the
    first after ten minutes."""
    policy = ApprovalPolicy(
        roles={
            "treasury": Role(tools=["transfer_money"]),
            "leads": Role(tools=[]),
            "auditors": Role(tools=["transfer_money"], decisions=["deny"]),
        },
        quorum={"transfer_money": quorum},
        ttl=timedelta(minutes=10),
        escalation={"transfer_money": [Escalation(to=[role], ttl=timedelta(hours=1)) for role in to]},
    )
    ai = Pausepoint(approval=policy)

    @ai.tool(requires_approval=True)
    async def transfer_money(input: Transfer) -> str:
        """Move money."""
        return f"sent {input.amount} to {input.to_account}"

    ai.define_agent(name="payAgent", model=ScriptedModel(script), tools=[transfer_money])
    return ai


#: handed to a role no policy defines (a typo of treasury)
typo_ai = _escalating("tresury")
#: handed to leads
leads_ai = _escalating("leads")
#: two approvals, handed to leads
leads_two_ai = _escalating("leads", quorum=2)
#: two approvals, handed to leads, then to auditors (who may only deny)
two_steps_ai = _escalating("leads", "auditors", quorum=2)
