"""Slack's Block Kit: a pause as a card with Approve / Deny buttons, and the card as it stands.

The message tells what the console's card tells — the pause's ``view`` (``Agent.view``): its
title, summary and fields, its risk, who asked, where its approval stands, when it expires and
what happens then — and, with approval links configured, carries the link's token in its
buttons' ``value`` (the callback names exactly that pause; ``_slack_actions``) and the link
itself in an "Open in console" button. A high-risk pause asks for a confirmation before either
decision, as the console does. Once decided, the same card says who decided, through what,
and loses its buttons ("Approved by alice via Slack at ...").

Everything a model or a user wrote is escaped for Slack's mrkdwn (``&``, ``<``, ``>``), so an
input cannot mention ``@channel`` or make a link; headers are plain text.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ._story import moment

__all__ = ["APPROVE", "DENY", "OPEN", "card_message", "escape"]

APPROVE = "pausepoint.approve"
DENY = "pausepoint.deny"
OPEN = "pausepoint.open"

_RISK = {
    "high": ":red_circle: High risk",
    "normal": ":large_yellow_circle: Normal risk",
    "low": ":white_circle: Low risk",
}
_MAX_FIELDS = 10  # Block Kit's limit for a section's fields
_MAX_HEADER = 150
_MAX_TEXT = 2900  # a section's text takes 3,000 characters


def card_message(
    agent: str,
    interrupt: Mapping[str, Any],
    *,
    token: str | None = None,
    url: str | None = None,
    outcome: str | None = None,
    approvable: bool = True,
) -> dict[str, Any]:
    """The Slack message for a pause: ``interrupt`` as the REST API shows it (with its
    ``view``). With ``token``, Approve / Deny buttons carrying it (Approve only when
    ``approvable``: a yes can answer the tool); with ``url``, an "Open in console" button;
    ``outcome`` (a decision, in words) ends the card instead of the buttons."""
    view = interrupt.get("view") or {}
    title = view.get("title") or interrupt["name"]
    risk = view.get("risk") or "normal"
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": _plain(title, _MAX_HEADER)},
        *_details(view),
        {"type": "context", "elements": [_mrkdwn(" · ".join(_facts(agent, view, decided=outcome is not None)))]},
    ]
    expiry = _expiry(interrupt, view)
    if expiry is not None and outcome is None:
        blocks.append({"type": "context", "elements": [_mrkdwn(expiry)]})
    if outcome is not None:
        blocks.append({"type": "section", "text": _mrkdwn(outcome)})
    else:
        buttons = _buttons(title, risk, token, url, approvable)
        if buttons:
            blocks.append({"type": "actions", "block_id": "pausepoint", "elements": buttons})
    fallback = f"{agent} asks for a decision: {title}" if outcome is None else f"{title}: {outcome}"
    return {"text": escape(fallback), "blocks": blocks}


def escape(text: str) -> str:
    """``text`` for Slack's mrkdwn: only ``&``, ``<`` and ``>`` are control characters there."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _details(view: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The summary and the fields, as one section (none when there is neither)."""
    section: dict[str, Any] = {"type": "section"}
    if view.get("summary"):
        section["text"] = _mrkdwn(escape(view["summary"])[:_MAX_TEXT])
    fields = [_mrkdwn(f"*{escape(f['label'])}*\n{escape(f['text'])}"[:1900]) for f in view.get("fields") or ()]
    if fields:
        section["fields"] = fields[:_MAX_FIELDS]
    return [section] if len(section) > 1 else []


def _facts(agent: str, view: Mapping[str, Any], *, decided: bool) -> list[str]:
    """The card's small print: risk, agent, who asked, where the approval stands — once
    ``decided``, only who approved before (the outcome line says the rest: a decided card waits
    for nobody)."""
    facts = [_RISK.get(view.get("risk") or "normal", "Normal risk"), f"*{escape(agent)}*"]
    approval = view.get("approval") or {}
    asked = approval.get("requested_by")
    if asked:
        facts.append(f"asked by {escape(asked)}")
    counted = approval.get("approved_by") or []
    if decided:  # where the approval stood before the decision ("1 of 2") would read as if it ran on one
        if counted:
            facts.append(f"approved before by {escape(', '.join(counted))}")
    elif approval:
        progress = approval.get("progress") or ""
        if counted:
            progress += f" ({escape(', '.join(counted))})"
        facts.append(progress)
        if approval.get("waiting_for"):
            facts.append(escape(approval["waiting_for"]))
    return facts


def _expiry(interrupt: Mapping[str, Any], view: Mapping[str, Any]) -> str | None:
    """When the pause expires (in the reader's own time zone, as Slack writes dates), and what
    happens then."""
    if not interrupt.get("expires_at"):
        return None
    at = datetime.fromisoformat(interrupt["expires_at"])
    when = f"<!date^{int(at.timestamp())}^{{date_short_pretty}} at {{time}}|{moment(at)}>"
    then = f" — {escape(view['on_expiry'])}" if view.get("on_expiry") else ""
    return f":hourglass_flowing_sand: Expires {when}{then}"


def _buttons(title: str, risk: str, token: str | None, url: str | None, approvable: bool) -> list[dict[str, Any]]:
    buttons: list[dict[str, Any]] = []
    if token is not None:
        if approvable:
            approve = _button(APPROVE, "Approve", style="primary", value=token)
            if risk == "high":
                approve["confirm"] = _confirm("Approve?", f"*{escape(title)}* goes ahead as shown.", "Yes, approve")
            buttons.append(approve)
        deny = _button(DENY, "Deny", style="danger", value=token)
        if risk == "high":
            deny["confirm"] = _confirm("Deny?", f"*{escape(title)}* does not happen; the agent is told.", "Yes, deny")
        buttons.append(deny)
    if url is not None:
        buttons.append(_button(OPEN, "Open in console", url=url))
    return buttons


def _button(action_id: str, text: str, **extra: str) -> dict[str, Any]:
    return {"type": "button", "action_id": action_id, "text": _plain(text), **extra}


def _confirm(title: str, text: str, confirm: str) -> dict[str, Any]:
    """Slack's confirmation dialog; "Back" leaves everything as it was."""
    return {"title": _plain(title), "text": _mrkdwn(text), "confirm": _plain(confirm), "deny": _plain("Back")}


def _plain(text: str, limit: int = 75) -> dict[str, Any]:
    shown = text if len(text) <= limit else text[: limit - 1] + "…"
    return {"type": "plain_text", "text": shown, "emoji": True}


def _mrkdwn(text: str) -> dict[str, Any]:
    return {"type": "mrkdwn", "text": text}
