"""Email: an event as a message (text and HTML), and sending it through SMTP.

A pause reads as the console's card does — its view's title, summary and fields, its risk, who
asked, where its approval stands, when it expires and what happens then — with the approval
link to open it (``ApprovalLinks``; the person signs in and decides there: the link decides
nothing, and a mail scanner that opens it changes nothing). An answer or an expiry is one line
in the audit trail's words ("Approved by alice via Slack at ..."); other events a sentence.

Everything shown in the HTML part is escaped. The ``Message-ID`` comes from the event id, the
same on every attempt, so a message delivered twice (at least once) reads as one. Sending is
``smtplib`` in a worker thread; any failure is the attempt's error, retried by the outbox.
"""

from __future__ import annotations

import html
import re
import smtplib
import ssl
from collections.abc import Mapping
from datetime import datetime
from email.message import EmailMessage
from email.utils import format_datetime
from typing import Any

from ..stores import Event
from ..webhooks import EmailNotifier, slack_text
from ._story import decided_words, moment

__all__ = ["compose", "send"]

_LINE_BREAKS = re.compile(r"[\r\n]+")
_SLACK_MARKUP = re.compile(r":[a-z_]+: |[*`]")


def compose(notifier: EmailNotifier, event: Event, body: Mapping[str, Any], url: str | None) -> EmailMessage:
    """The message for ``event`` (its public ``body``), with the approval link ``url`` if any."""
    subject, lines, card = _content(body, url)
    message = EmailMessage()
    message["Subject"] = _LINE_BREAKS.sub(" ", subject)[:200]
    message["From"] = notifier.sender
    message["To"] = ", ".join(notifier.to)
    message["Date"] = format_datetime(event.at)
    message["Message-ID"] = f"<pausepoint.{event.id}@{notifier.sender.rpartition('@')[2]}>"
    message["Auto-Submitted"] = "auto-generated"
    message["Pausepoint-Event-Id"] = event.id
    message["Pausepoint-Event-Type"] = event.kind
    message.set_content("\n".join(lines) + "\n")
    message.add_alternative(card, subtype="html")
    return message


def send(notifier: EmailNotifier, message: EmailMessage) -> None:
    """Send ``message`` through the notifier's SMTP server (blocking: run it in a thread).
    Raises what ``smtplib`` and ``ssl`` raise (``OSError`` subclasses and ``SMTPException``)."""
    context = ssl.create_default_context()
    smtp: smtplib.SMTP
    if notifier.security == "ssl":
        smtp = smtplib.SMTP_SSL(notifier.host, notifier.port, timeout=notifier.timeout, context=context)
    else:
        smtp = smtplib.SMTP(notifier.host, notifier.port, timeout=notifier.timeout)
    with smtp:
        if notifier.security == "starttls":
            smtp.starttls(context=context)  # SMTPNotSupportedError when the server cannot: nothing is sent
        if notifier.username is not None and notifier.password is not None:
            smtp.login(notifier.username, notifier.password)
        smtp.send_message(message, from_addr=notifier.sender, to_addrs=list(notifier.to))


def _content(body: Mapping[str, Any], url: str | None) -> tuple[str, list[str], str]:
    """The subject, the text part's lines and the HTML part of an event."""
    agent = body["agent"]
    if body["type"] == "pause":
        return _pause(body, url)
    entry = body.get("entry")
    if body["type"] in ("answer", "expiry") and entry:
        title = (entry.get("view") or {}).get("title") or entry["name"]
        line = decided_words(
            entry["decision"], entry.get("principal"), entry["via"], _at(entry["at"]), entry.get("rule")
        )
        subject = f"{title}: {line.split(' at ')[0]} ({agent})"
        lines = [title, "", line + ".", "", f"Agent: {agent} · session {body['session_id']}"]
    else:
        sentence = _SLACK_MARKUP.sub("", slack_text(body))
        subject = f"{agent}: {body['type'].replace('_', ' ')} in session {body['session_id']}"
        lines = [sentence]
    return subject, lines, _html_page([f"<p>{html.escape(line)}</p>" for line in lines if line])


def _pause(body: Mapping[str, Any], url: str | None) -> tuple[str, list[str], str]:
    interrupt = body["interrupt"]
    view = interrupt.get("view") or {}
    title = view.get("title") or interrupt["name"]
    risk = view.get("risk") or "normal"
    facts = _facts(body, interrupt, view)
    subject = f"Decision needed: {title} ({body['agent']}" + (", high risk)" if risk == "high" else ")")
    lines = [title]
    if view.get("summary"):
        lines.append(view["summary"])
    lines.append("")
    lines += [f"{f['label']}: {f['text']}" for f in view.get("fields") or ()]
    lines.append("")
    lines += [f"{name}: {value}" for name, value in facts]
    if url is not None:
        lines += ["", "Open it to decide (you sign in, then confirm; opening the link decides nothing):", url]
    else:
        lines += ["", "Open the pausepoint console to decide."]
    rows = "".join(
        f"<tr><th align='left' style='padding:2px 12px 2px 0'>{html.escape(f['label'])}</th>"
        f"<td>{html.escape(f['text'])}</td></tr>"
        for f in view.get("fields") or ()
    )
    small = "".join(f"<li>{html.escape(name)}: {html.escape(value)}</li>" for name, value in facts)
    parts = [f"<h2 style='margin:0 0 8px'>{html.escape(title)}</h2>"]
    if view.get("summary"):
        parts.append(f"<p>{html.escape(view['summary'])}</p>")
    if rows:
        parts.append(f"<table>{rows}</table>")
    parts.append(f"<ul style='color:#444'>{small}</ul>")
    if url is not None:
        parts.append(
            f"<p><a href='{html.escape(url, quote=True)}' style='background:#1a56db;color:#fff;padding:8px 16px;"
            "border-radius:4px;text-decoration:none'>Open to decide</a></p>"
            "<p style='color:#666;font-size:12px'>You sign in and confirm there; opening the link decides nothing.</p>"
        )
    return subject, lines, _html_page(parts)


def _facts(body: Mapping[str, Any], interrupt: Mapping[str, Any], view: Mapping[str, Any]) -> list[tuple[str, str]]:
    facts = [("Risk", view.get("risk") or "normal"), ("Agent", f"{body['agent']} · session {body['session_id']}")]
    approval = view.get("approval") or {}
    asked = approval.get("requested_by")
    if asked:
        facts.append(("Asked by", asked))
    if approval:
        facts.append(("Approval", " — ".join(filter(None, [approval.get("progress"), approval.get("waiting_for")]))))
    if interrupt.get("expires_at"):
        then = f" — {view['on_expiry']}" if view.get("on_expiry") else ""
        facts.append(("Expires", moment(_at(interrupt["expires_at"])) + then))
    return facts


def _html_page(parts: list[str]) -> str:
    return (
        "<!doctype html><html><body style='font-family:system-ui,sans-serif;font-size:14px;color:#111'>"
        + "".join(parts)
        + "</body></html>\n"
    )


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text)
