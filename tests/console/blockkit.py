"""A small Block Kit renderer: a Slack message (its ``blocks``) as an HTML page laid out as Slack
lays it out, for the docs' picture of what our Slack app posts and for tests that read it in a
browser.

It renders the blocks our app sends, and refuses any other (``ValueError``), so nothing is
silently left out of a picture: ``header`` (plain text), ``section`` (text and fields, two to a
row), ``context`` (small grey text), ``actions`` (buttons: ``primary`` green, ``danger`` red,
plain otherwise; a URL button too) and ``divider``. mrkdwn as Slack reads it: ``*bold*``,
``_italic_``, ``~strike~``, `` `code` ``, ``<url|text>`` links, ``<!date^…>`` dates (written in
UTC, as a reader in UTC sees them), ``&amp;`` ``&lt;`` ``&gt;``, and the emoji our app uses,
drawn as Slack draws emoji: small pictures (an unknown ``:name:`` stays text, as in Slack).

It is not Slack: fonts, spacing and emoji pictures are approximations.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = ["mrkdwn", "render"]

# Emoji as small SVG pictures (16 x 16), as Slack shows emoji images.
_EMOJI = {
    "red_circle": '<circle cx="8" cy="8" r="7" fill="#dd2e44"/>',
    "large_yellow_circle": '<circle cx="8" cy="8" r="7" fill="#fdcb58"/>',
    "white_circle": '<circle cx="8" cy="8" r="6.5" fill="#f5f8fa" stroke="#99aab5"/>',
    "white_check_mark": '<rect width="16" height="16" rx="3" fill="#77b255"/>'
    '<path d="M3.5 8.5l3 3 6-7" stroke="#fff" stroke-width="2.2" fill="none"/>',
    "no_entry": '<circle cx="8" cy="8" r="7.5" fill="#be1931"/>'
    '<rect x="3" y="6.6" width="10" height="2.8" fill="#fff"/>',
    "hourglass": '<path d="M3 1h10v2L9 8l4 5v2H3v-2l4-5-4-5z" fill="#ccd6dd" stroke="#66757f"/>'
    '<path d="M5 13.5h6L8 10z" fill="#ffac33"/>',
    "hourglass_flowing_sand": '<path d="M3 1h10v2L9 8l4 5v2H3v-2l4-5-4-5z" fill="#ccd6dd" stroke="#66757f"/>'
    '<path d="M5 3.5h6L8 7z M5 13.5h6L8 11.5z" fill="#ffac33"/>',
}

_STYLE = """
body { margin: 0; background: #fff; font: 15px/1.46668 "Lato", "DejaVu Sans", sans-serif; color: #1d1c1d; }
.message { display: flex; gap: 8px; padding: 8px 20px 12px; width: 620px; }
.avatar { width: 36px; height: 36px; border-radius: 6px; background: #1a56db; color: #fff; flex: none;
          font-weight: 900; font-size: 20px; display: flex; align-items: center; justify-content: center; }
.content { flex: 1; min-width: 0; }
.sender { font-weight: 900; } .badge { font-size: 10px; font-weight: 700; color: #616061; background: #e8e8e8;
          border-radius: 2px; padding: 1px 3px; margin: 0 4px; vertical-align: 1px; }
.time { font-size: 12px; color: #616061; }
.block { margin: 4px 0; }
.header { font-size: 18px; font-weight: 900; line-height: 1.33; margin-top: 8px; }
.fields { display: grid; grid-template-columns: 1fr 1fr; gap: 8px 16px; margin-top: 8px; }
.context { font-size: 12px; color: #616061; display: flex; gap: 8px; flex-wrap: wrap; }
.actions { display: flex; gap: 8px; flex-wrap: wrap; margin-top: 8px; }
button { font: 700 15px "Lato", "DejaVu Sans", sans-serif; height: 36px; padding: 0 16px; border-radius: 4px;
         border: 1px solid rgba(29, 28, 29, 0.3); background: #fff; color: #1d1c1d; }
button.primary { background: #007a5a; border-color: #007a5a; color: #fff; }
button.danger { background: #e01e5a; border-color: #e01e5a; color: #fff; }
hr { border: 0; border-top: 1px solid #ddd; }
a { color: #1264a3; text-decoration: none; }
code { font: 12px monospace; color: #e01e5a; background: #f6f6f6; border: 1px solid #e0e0e0; border-radius: 3px;
       padding: 1px 3px; }
.emoji { width: 1.2em; height: 1.2em; vertical-align: -0.25em; }
"""


def render(message: Mapping[str, Any], *, sender: str = "pausepoint", at: datetime | None = None) -> str:
    """An HTML page showing ``message`` (what Slack is sent) as posted by the app ``sender`` at
    ``at`` (now). Raises ``ValueError`` for a block or an element it does not know."""
    now = at or datetime.now(UTC)
    blocks = "".join(_block(block, now) for block in message["blocks"])
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><style>{_STYLE}</style></head><body>"
        f"<div class='message' data-testid='message'><div class='avatar' aria-hidden='true'>{sender[0].upper()}</div>"
        f"<div class='content'><div><span class='sender'>{html.escape(sender)}</span><span class='badge'>APP</span>"
        f"<span class='time'>{_clock(now)}</span></div>{blocks}</div></div></body></html>"
    )


def _block(block: Mapping[str, Any], now: datetime) -> str:
    kind = block["type"]
    if kind == "header":
        return f"<div class='block header' role='heading' aria-level='2'>{_text(block['text'], now)}</div>"
    if kind == "section":
        text = f"<div>{_text(block['text'], now)}</div>" if "text" in block else ""
        fields = "".join(f"<div>{_text(field, now)}</div>" for field in block.get("fields", ()))
        extra = set(block) - {"type", "text", "fields", "block_id"}
        if extra:
            raise ValueError(f"a section with {sorted(extra)} is not rendered here")
        return (
            f"<div class='block section'>{text}" + (f"<div class='fields'>{fields}</div>" if fields else "") + "</div>"
        )
    if kind == "context":
        return (
            "<div class='block context'>"
            + "".join(f"<span>{_text(e, now)}</span>" for e in block["elements"])
            + "</div>"
        )
    if kind == "actions":
        return "<div class='block actions'>" + "".join(_button(e, now) for e in block["elements"]) + "</div>"
    if kind == "divider":
        return "<hr>"
    raise ValueError(f"a {kind!r} block is not rendered here")


def _button(element: Mapping[str, Any], now: datetime) -> str:
    if element["type"] != "button":
        raise ValueError(f"a {element['type']!r} element is not rendered here")
    style = element.get("style", "")
    url = f" data-url='{html.escape(element['url'], quote=True)}'" if "url" in element else ""
    action = html.escape(element["action_id"], quote=True)
    return f"<button class='{style}' data-action='{action}'{url}>{_text(element['text'], now)}</button>"


def _text(obj: Mapping[str, Any], now: datetime) -> str:
    if obj["type"] == "plain_text":
        shown = html.escape(obj["text"])
        return _emoji(shown) if obj.get("emoji", True) else shown
    if obj["type"] == "mrkdwn":
        return mrkdwn(obj["text"], now)
    raise ValueError(f"a {obj['type']!r} text object is not rendered here")


_ANGLE = re.compile(r"<([^<>]*)>")
_STYLES = [
    (re.compile(r"(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])"), r"<b>\1</b>"),
    (re.compile(r"(?<![\w_])_(?=\S)([^_\n]+?)(?<=\S)_(?![\w_])"), r"<i>\1</i>"),
    (re.compile(r"(?<![\w~])~(?=\S)([^~\n]+?)(?<=\S)~(?![\w~])"), r"<s>\1</s>"),
]


def mrkdwn(text: str, now: datetime | None = None) -> str:
    """Slack's mrkdwn ``text`` as HTML (``now`` decides what "Today" is for dates)."""
    now = now or datetime.now(UTC)
    out: list[str] = []
    last = 0
    for found in _ANGLE.finditer(text):
        out.append(_styled(text[last : found.start()]))
        out.append(_angle(found[1], now))
        last = found.end()
    out.append(_styled(text[last:]))
    return "".join(out).replace("\n", "<br>")


def _styled(text: str) -> str:
    """A run of mrkdwn without ``<…>`` tokens: entities read, then code, bold, italic, strike, emoji."""
    shown = html.escape(html.unescape(text), quote=False)
    parts = re.split(r"(`[^`\n]+`)", shown)
    for i, part in enumerate(parts):
        if i % 2:
            parts[i] = f"<code>{part[1:-1]}</code>"
            continue
        for pattern, replacement in _STYLES:
            part = pattern.sub(replacement, part)
        parts[i] = _emoji(part)
    return "".join(parts)


def _angle(token: str, now: datetime) -> str:
    """A ``<…>`` token: a date, a special mention, a user or channel, or a link."""
    target, _, label = token.partition("|")
    if target.startswith("!date^"):
        parts = target.split("^")  # !date^<Unix seconds>^<format>[^<link>]
        stamp, form = parts[1], parts[2] if len(parts) > 2 else ""
        return html.escape(_date(int(stamp), form, now)) if stamp.isdigit() else html.escape(label)
    if target.startswith("!"):
        return f"<b>@{html.escape(target[1:])}</b>"
    if target[:1] in "@#":
        return f"<a>{html.escape(label or target)}</a>"
    shown = _styled(label) if label else html.escape(target)
    return f"<a href='{html.escape(target, quote=True)}'>{shown}</a>"


def _date(stamp: int, form: str, now: datetime) -> str:
    """Slack's ``<!date^…>`` tokens, in UTC: {date_short_pretty}, {date_short}, {date}, {time}."""
    at = datetime.fromtimestamp(stamp, UTC)
    short = f"{at:%b} {at.day}, {at.year}"
    pretty = {now.date(): "Today", (now - timedelta(days=1)).date(): "Yesterday",
              (now + timedelta(days=1)).date(): "Tomorrow"}.get(at.date(), short)  # fmt: skip
    tokens = {
        "{date_short_pretty}": pretty,
        "{date_short}": short,
        "{date}": f"{at:%B} {at.day}, {at.year}",
        "{time}": _clock(at),
    }
    for token, value in tokens.items():
        form = form.replace(token, value)
    return form


def _clock(at: datetime) -> str:
    return f"{(at.hour % 12) or 12}:{at:%M} {'AM' if at.hour < 12 else 'PM'}"


def _emoji(shown: str) -> str:
    def picture(found: re.Match[str]) -> str:
        drawing = _EMOJI.get(found[1])
        if drawing is None:
            return found[0]
        return (
            f"<svg class='emoji' viewBox='0 0 16 16' role='img' aria-label='{found[1]}' data-emoji='{found[1]}'>"
            f"{drawing}</svg>"
        )

    return re.sub(r":([a-z0-9_+-]+):", picture, shown)
