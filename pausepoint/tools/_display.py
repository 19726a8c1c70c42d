"""How a paused call reads to the person who decides on it.

A tool or interrupt may declare a ``PauseDisplay``: a title and a summary (templates over its
input's fields, or functions of the validated input), the input fields that matter in the order
they matter, and a risk level. ``render`` turns a display and a paused call's input into a
``PauseView`` — the one rendering every surface shows (the REST API, the web console, the
terminal chat). Whatever is not declared comes from the input schema: field titles and
descriptions, decimals and amounts written as money.

Rendering never fails: a title, summary or risk function that raises is logged and replaced by
the default (for risk: ``"high"``, so a broken function asks for more care, not less).

A view shows what the input says, nothing hidden (``_visible``): a character that would change
or hide text without being seen — a bidi override or isolate, a zero-width space or joiner, a
BOM, a tag character, any other control, a line or paragraph separator — is written as a marker,
``⟨U+202E⟩``; tabs, line breaks and runs of spaces read as one space, so padding cannot push
what matters past the cut of a title or summary (300 characters, ending in "…").
"""

from __future__ import annotations

import functools
import json
import logging
import re
import string
import types
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Literal, TypeAlias, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from ..errors import DefinitionError
from ._inputs import validated_model

__all__ = [
    "field_words",
    "lets_approve",
    "lets_deny",
    "ApprovalView",
    "PauseDisplay",
    "PauseField",
    "PauseView",
    "Risk",
    "check_display",
    "expiry_note",
    "render",
]

log = logging.getLogger("pausepoint")

Risk: TypeAlias = Literal["low", "normal", "high"]
RISKS: tuple[Risk, ...] = ("low", "normal", "high")
_MAX_TEXT = 300
_DEFAULT_SUMMARY_FIELDS = 3
_SYMBOLS = {"USD": "$", "EUR": "€", "GBP": "£"}
_AMOUNT = re.compile(r"(^|_)amount($|_)|[a-z]Amount$", re.IGNORECASE)
# Characters a person cannot see (or that reorder what they see): controls, format characters
# (bidi, zero-width, tags), surrogates, line and paragraph separators.
_UNSEEN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_BREAKS = frozenset("\t\n\r")
_SPACES = re.compile(r"\s+")
_MARKER = len("⟨U+10FFFF⟩")
# A number longer than this written out is written as its digits and exponent ("1E+5000"): as
# exact, and a hostile "1e999999999" does not become a gigabyte of zeros.
_MAX_PLACES = 1000


@dataclass(frozen=True, slots=True)
class PauseDisplay:
    """How a tool's pauses read to a person (``@ai.tool(display=...)``, ``define_interrupt(display=...)``).

    ``title`` and ``summary`` are templates over the input's top-level fields
    (``"Pay {amount} to {payee}"``, each field written as ``PauseView.fields`` writes it), or
    functions of the validated input returning a string. ``fields`` names the input fields a
    person needs to see, in order (default: all of them, in schema order). ``risk`` is
    ``"low"``, ``"normal"`` or ``"high"``, or a function of the validated input returning one;
    the console asks for a confirmation before any decision on a high-risk pause.

    A field is named by its Python name or by its alias (``from_: str = Field(alias="from")``:
    ``{from}`` or ``{from_}``) alike: the alias is the name the model sends and a view shows.
    Templates and field names are checked against the input schema when the tool is defined
    (``DefinitionError``).
    """

    title: str | Callable[[Any], str] | None = None
    summary: str | Callable[[Any], str] | None = None
    fields: Sequence[str] | None = None
    risk: Risk | Callable[[Any], Risk] = "normal"

    def __post_init__(self) -> None:
        for name in ("title", "summary"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str) and not callable(value):
                raise DefinitionError(f"PauseDisplay.{name} must be a template string or a function of the input")
        if not callable(self.risk) and self.risk not in RISKS:
            allowed = ", ".join(RISKS)
            raise DefinitionError(f"PauseDisplay.risk must be one of {allowed} (or a function), not {self.risk!r}")
        if self.fields is not None:
            if isinstance(self.fields, str) or not all(isinstance(f, str) for f in self.fields):
                raise DefinitionError("PauseDisplay.fields must be a sequence of input field names")
            object.__setattr__(self, "fields", tuple(self.fields))


@dataclass(frozen=True, slots=True)
class PauseField:
    """One input field as a person reads it: ``label`` ("Amount"), ``text`` ("€1,250.50")."""

    name: str
    label: str
    text: str
    description: str | None = None


@dataclass(frozen=True, slots=True)
class ApprovalView:
    """Where a pause's approval stands, as every surface shows it (``PauseView.approval``).

    ``progress`` reads "Needs approval" or "1 of 2 approvals"; ``approved_by`` are the
    approvals counted; ``roles`` the roles that decide it, ``approving_roles`` those of them
    that may give what it waits for (an approval; an answer, for a question) — a role that may
    only deny is in the first, not the second; ``may_approve`` / ``may_deny`` / ``may_respond``
    who may still approve, deny or answer it in the tool's place (None: anyone who may answer the
    session, or members the policy cannot list) — a card offers each only to them, as the server
    refuses anyone else; ``excluded`` who may not
    approve (the requester under separation of duties, those counted already); ``waiting_for``
    says it in a sentence. ``grantable``: an approval may grant later calls (``grant_note``
    says which); ``offer`` says what a yes also approves; ``rule`` names the rule that asked
    for a person; ``escalated`` says who it was handed to when nobody decided in time.
    """

    required: int
    approvals: int
    progress: str
    approved_by: list[str] = field(default_factory=list)
    roles: list[str] | None = None
    approving_roles: list[str] | None = None
    may_approve: list[str] | None = None
    may_deny: list[str] | None = None
    may_respond: list[str] | None = None
    excluded: list[str] = field(default_factory=list)
    requested_by: str | None = None
    waiting_for: str = ""
    decisions: list[str] = field(default_factory=list)
    gated: bool = False
    grantable: bool = False
    grant_note: str | None = None
    offer: str | None = None
    rule: str | None = None
    escalated: str | None = None


@dataclass(frozen=True, slots=True)
class PauseView:
    """A paused call as a person reads it: what ``Agent.view(interrupt)`` returns.

    ``on_expiry`` says what happens if nobody answers in time (None when the pause has no
    time-to-live); ``approval`` where its approval stands, for a pause the approval policy
    governs (None otherwise).
    """

    title: str
    summary: str
    fields: list[PauseField] = field(default_factory=list)
    risk: Risk = "normal"
    on_expiry: str | None = None
    approval: ApprovalView | None = None


def lets_approve(shown: ApprovalView, who: str) -> bool:
    """Whether the pause ``shown`` describes lets ``who`` approve it (or counted their approval
    already), as the server judges it: not excluded, and named by ``may_approve`` where it names
    anyone. The console's card, the terminal's and an MCP ask round read it the same way."""
    return who not in shown.excluded and (
        shown.may_approve is None or who in shown.may_approve or who in shown.approved_by
    )


def lets_deny(shown: ApprovalView, who: str) -> bool:
    """Whether the pause ``shown`` describes lets ``who`` deny it (``may_deny``, where it names anyone)."""
    return shown.may_deny is None or who in shown.may_deny


def check_display(display: PauseDisplay, model: type[BaseModel], tool_name: str) -> None:
    """Raise ``DefinitionError`` unless every field ``display`` names is a field of ``model``,
    by its Python name or its alias."""
    aliases = _aliases(model)
    named: list[tuple[str, str]] = [("fields", f) for f in display.fields or ()]
    for kind in ("title", "summary"):
        template = getattr(display, kind)
        if isinstance(template, str):
            named += [(kind, f) for f in _placeholders(template, tool_name, kind)]
    for kind, name in named:
        if name not in model.model_fields and name not in aliases:
            known = [n if _facts(model, n).key == n else f"{_facts(model, n).key} ({n})" for n in model.model_fields]
            raise DefinitionError(
                f"tool {tool_name!r}: the display's {kind} names {name!r}, which is not an input field "
                f"(fields: {', '.join(sorted(known)) or 'none'})"
            )


@functools.lru_cache(maxsize=256)
def _aliases(model: type[BaseModel]) -> types.MappingProxyType[str, str]:
    """The field name each alias of ``model``'s fields stands for (``{"from": "from_"}``): the
    names the model sends and a view shows, which a display may name a field by. A name that is
    itself a field's Python name stays that field's (a display meant it before aliases counted)."""
    found: dict[str, str] = {}
    for name, info in model.model_fields.items():
        for alias in (info.alias, info.serialization_alias, info.validation_alias):
            if isinstance(alias, str) and alias not in model.model_fields:
                found.setdefault(alias, name)
    return types.MappingProxyType(found)


def _placeholders(template: str, tool_name: str, kind: str) -> list[str]:
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise DefinitionError(f"tool {tool_name!r}: the display's {kind} is not a valid template: {exc}") from None
    names = []
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if not name.isidentifier():
            raise DefinitionError(
                f"tool {tool_name!r}: the display's {kind} may name input fields only ({{{name}}}: "
                "use a function of the input for anything more)"
            )
        if spec or conversion:  # a field is filled in with its text as shown ("€1,250.50"), not its value
            given = f"!{conversion}" if conversion else f":{spec}"
            raise DefinitionError(
                f"tool {tool_name!r}: the display's {kind} fills {{{name}}} in with the field's text as shown, "
                f"which {given!r} does not apply to: write {{{name}}}, or use a function of the input"
            )
        names.append(name)
    return names


def render(
    display: PauseDisplay | None,
    model: type[BaseModel] | None,
    tool_name: str,
    raw_input: Any,
    *,
    on_expiry: str | None = None,
) -> PauseView:
    """The view of a paused call of ``tool_name`` on ``raw_input`` (see the module docstring)."""
    display = display or PauseDisplay()
    validated: BaseModel | None = None
    values: dict[str, Any] = raw_input if isinstance(raw_input, dict) else {}
    if model is not None:
        try:  # its values by field name, as the display's templates name them
            validated = validated_model(model, raw_input, tool_name)
            values = validated.model_dump(mode="json", by_alias=False)
        except ValidationError:  # the input as it is, its keys read as the fields they name
            validated, values = None, _by_field_name(model, values)
    texts = {name: _text(_facts(model, name), value, values) for name, value in values.items()}
    every = {name: _field(model, name, texts[name]) for name in _ordered(model, values)}  # by field name
    named = every if display.fields is None else _named(model, display.fields)  # by alias or field name
    shown = [every[n] for n in named if n in every]
    default_summary = " · ".join(f"{f.label}: {f.text}" for f in shown[:_DEFAULT_SUMMARY_FIELDS])
    texts = _with_aliases(model, texts)  # a template names a field by its alias or its Python name
    title = _visible(_written(display.title, validated, texts, tool_name, "title")).strip() or humanize(tool_name)
    summary = _visible(_written(display.summary, validated, texts, tool_name, "summary")).strip() or default_summary
    return PauseView(
        title=_cap(title),
        summary=_cap(summary),
        fields=shown,
        risk=_risk(display.risk, validated, tool_name),
        on_expiry=on_expiry,
    )


def expiry_note(policy: Callable[..., Any], default: Callable[..., Any]) -> str:
    """What happens to a pause nobody answers in time, in words: the default policy's, or the
    first line of a custom policy's docstring."""
    if policy is default:
        return "It is denied automatically, and the agent is told nobody answered in time."
    doc = (getattr(policy, "__doc__", None) or "").strip().splitlines()
    return doc[0].strip() if doc else "The agent's expiry policy answers it."


def field_words(model: type[BaseModel] | None, name: str, value: Any) -> tuple[str, str]:
    """How field ``name`` of ``model`` and ``value`` of it read in a sentence: its label, lower
    case, and the value as a pause's fields show it ("amount", "$500.00")."""
    facts = _facts(model, name)
    return facts.label.lower(), _text(facts, value, {})


def humanize(name: str) -> str:
    """``"userApproval"`` / ``"pay_invoice"`` → ``"User approval"`` / ``"Pay invoice"``."""
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).replace("_", " ").replace("-", " ").split()
    text = " ".join(w if w.isupper() and len(w) > 1 else w.lower() for w in words)
    return text[:1].upper() + text[1:] if text else name


# -- the pieces ---------------------------------------------------------------------------------


def _ordered(model: type[BaseModel] | None, values: dict[str, Any]) -> list[str]:
    names = [n for n in (model.model_fields if model is not None else ()) if n in values]
    return names + [n for n in values if n not in names]


def _named(model: type[BaseModel] | None, names: Sequence[str]) -> list[str]:
    """The field names ``names`` (a display's ``fields``: Python names or aliases) stand for, in
    order, each once (``["from", "from_"]`` is one field)."""
    if model is None:
        return list(dict.fromkeys(names))
    aliases = _aliases(model)
    return list(dict.fromkeys(n if n in model.model_fields else aliases.get(n, n) for n in names))


def _with_aliases(model: type[BaseModel] | None, texts: dict[str, str]) -> dict[str, str]:
    """``texts`` (by field name) with each field's text under its aliases too, for templates."""
    if model is None:
        return texts
    return {**{alias: texts[name] for alias, name in _aliases(model).items() if name in texts}, **texts}


def _field(model: type[BaseModel] | None, name: str, text: str) -> PauseField:
    """Field ``name`` as a view shows it, named as the input names it: by its alias (the key the
    schema, the console's forms, the pause's input and an edit's audit entry use)."""
    facts = _facts(model, name)
    return PauseField(name=facts.key, label=facts.label, text=text, description=facts.description)


def _by_field_name(model: type[BaseModel], values: dict[str, Any]) -> dict[str, Any]:
    """``values`` (an input that did not validate) keyed by field name where a key is a
    field's alias, as a validated input's values are."""
    names = {info.alias: name for name, info in model.model_fields.items() if info.alias and info.alias != name}
    if not names:
        return values
    return {names.get(key, key): value for key, value in values.items()}


@dataclass(frozen=True, slots=True)
class _Facts:
    """What a field reads as, whatever its value: its ``label`` and ``description``, whether its
    schema says ``decimal`` and its name ``amount``; ``key``: its name in the input's JSON."""

    label: str
    description: str | None
    decimal: bool
    amount: bool
    key: str


@functools.lru_cache(maxsize=1024)
def _facts(model: type[BaseModel] | None, name: str) -> _Facts:
    """The ``_Facts`` of field ``name`` of ``model``: the same for every pause of a tool, so
    worked out once per tool and field (input schemas do not change once defined)."""
    info = model.model_fields.get(name) if model is not None else None
    return _Facts(
        label=(info.title if info is not None else None) or _label(name),
        description=info.description if info is not None else None,
        decimal=info is not None and _is_decimal(info.annotation),
        amount=_AMOUNT.search(name) is not None,
        key=(info.serialization_alias if info is not None else None) or name,
    )


def _label(name: str) -> str:
    """An input key in words; a key with a character a person cannot see (one the model made
    up, outside the schema), as it is, marked: in words it would lose the character."""
    return humanize(name) if name.isprintable() else _visible(name)


def _is_decimal(annotation: Any) -> bool:
    if annotation is Decimal:
        return True
    if get_origin(annotation) in (Union, types.UnionType):
        return any(arg is Decimal for arg in get_args(annotation))
    return False


def _text(facts: _Facts, value: Any, values: dict[str, Any]) -> str:
    """``value`` as a person reads it: money for amounts, Yes/No, lists joined, JSON otherwise;
    nothing in it unseen (``_visible``)."""
    return _visible(_words(facts, value, values))


def _words(facts: _Facts, value: Any, values: dict[str, Any]) -> str:
    if value is None or value == "":
        return "—"
    if isinstance(value, bool):
        return "Yes" if value else "No"
    if facts.amount and not isinstance(value, dict | list):
        money = _money(value, values.get("currency"))
        if money is not None:
            return money
    if facts.decimal and isinstance(value, str | int | float):
        number = _decimal(value)
        if number is not None:
            return f"{number:,f}" if _fits(number) else str(number)
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, list) and all(isinstance(v, str | int | float) and not isinstance(v, bool) for v in value):
        return ", ".join(str(v) for v in value)
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def _decimal(value: Any) -> Decimal | None:
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        return None
    return number if number.is_finite() else None


def _money(value: Any, currency: Any) -> str | None:
    """``1250.5`` → ``"1,250.50"``; with a currency code ``"€1,250.50"`` or ``"1,250.50 CHF"``.
    Never rounds: ``0.125`` stays ``"0.125"``."""
    number = _decimal(value)
    if number is None:
        return None
    exponent = number.as_tuple().exponent
    places = max(2, -exponent) if isinstance(exponent, int) else 2
    # copy_abs, not abs(): arithmetic would round to the context's 28 digits
    digits = f"{number.copy_abs():,.{places}f}" if _fits(number) else str(number.copy_abs())
    sign = "-" if number < 0 else ""
    code = currency.upper() if isinstance(currency, str) and re.fullmatch(r"[A-Za-z]{3}", currency) else None
    if code is None:
        return sign + digits
    symbol = _SYMBOLS.get(code)
    return f"{sign}{symbol}{digits}" if symbol else f"{sign}{digits} {code}"


def _fits(number: Decimal) -> bool:
    """Whether ``number`` written out in full stays under ``_MAX_PLACES`` digits."""
    exponent = number.as_tuple().exponent
    return isinstance(exponent, int) and number.adjusted() < _MAX_PLACES and -exponent < _MAX_PLACES


def _visible(text: str) -> str:
    r"""``text`` with nothing a person cannot see: each control, format, surrogate, line or
    paragraph separator character written as a marker (``"⟨U+202E⟩"``), tabs and line breaks
    as spaces, and every run of spaces as one.

    A bidi override would make ``"savings\u202e5$ tnuocca"`` read "savingsaccount $5", a
    zero-width space inside an IBAN would make it look like another IBAN, tag characters
    are invisible altogether: an approval card must show what it is asked about, so it marks
    them, even where they are harmless — a zero-width joiner inside an emoji sequence
    ("👩\u200d💻") reads as two emoji and a marker. Every other character, in any script, is
    left as it is.
    """
    if not text.isprintable():
        text = "".join(_unhidden(char) for char in text)
    return _SPACES.sub(" ", text)


def unseen(char: str) -> bool:
    """Whether ``char`` is one a person cannot see as itself (a control, format, surrogate, line or
    paragraph separator character): the views, and the terminal chat, write it as a marker."""
    return unicodedata.category(char) in _UNSEEN


def _unhidden(char: str) -> str:
    if char in _BREAKS:
        return " "
    return f"⟨U+{ord(char):04X}⟩" if unseen(char) else char


def _written(
    how: str | Callable[[Any], str] | None,
    validated: BaseModel | None,
    texts: dict[str, str],
    tool_name: str,
    kind: str,
) -> str:
    if how is None:
        return ""
    if isinstance(how, str):
        try:
            return how.format_map(_Texts(texts))
        except (ValueError, IndexError, KeyError) as exc:
            log.warning("tool %r: the display's %s could not be filled in: %s", tool_name, kind, exc)
            return ""
    if validated is None:
        return ""
    try:
        return str(how(validated)).strip()
    except Exception:
        log.warning("tool %r: the display's %s function failed; showing the default", tool_name, kind, exc_info=True)
        return ""


def _risk(risk: Risk | Callable[[Any], Risk], validated: BaseModel | None, tool_name: str) -> Risk:
    if not callable(risk):
        return risk
    if validated is None:
        return "high"
    try:
        found = risk(validated)
    except Exception:
        log.warning("tool %r: the display's risk function failed; the pause is high risk", tool_name, exc_info=True)
        return "high"
    if found not in RISKS:
        log.warning("tool %r: the display's risk function returned %r; the pause is high risk", tool_name, found)
        return "high"
    return found


def _cap(text: str) -> str:
    """``text`` cut to ``_MAX_TEXT`` characters, the cut marked "…" (never inside a marker)."""
    if len(text) <= _MAX_TEXT:
        return text
    cut = text[: _MAX_TEXT - 1]
    opened = cut.rfind("⟨")
    if opened > cut.rfind("⟩") and len(cut) - opened < _MARKER:
        cut = cut[:opened]
    return cut + "…"


class _Texts(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "—"
