"""Approval: who decides a pause and what decides without a person — the ``ApprovalPolicy``
(rules, roles, quorum, separation of duties, escalation), the gate a call passes before it runs,
grants, the check of every answer against the session, what "approve" means for each kind of
pause, and how an approval reads to the people deciding it.

May import: ``tools``, ``session``, ``content``, ``errors``. The public names are re-exported
from ``pausepoint``.
"""
