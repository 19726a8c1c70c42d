"""The team example: the payments agent (``examples.payments``) served for a team, whose
treasury decides every payment. Who holds treasury is said where people sign in: a principal
the config file names (``roles = ["treasury"]``), or the roles claim of a token from the
company's identity provider.

Serve it with its config file, ``examples/pausepoint.toml`` (docs/config.md)::

    pausepoint config check examples/pausepoint.toml
    pausepoint serve --config examples/pausepoint.toml
"""

from __future__ import annotations

from pausepoint import ApprovalPolicy, Role

from .payments import build

__all__ = ["ai", "payments_agent"]

ai, payments_agent = build()
payments_agent.approval_policy = ApprovalPolicy(roles={"treasury": Role(tools=["pay_invoice"])})
