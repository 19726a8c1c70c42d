// @ts-check
// Small DOM helpers. Everything that came from the server goes in as text, never as HTML.

/**
 * An element: h("p", {class: "x", text: "hi", onclick: fn, dataset: {a: "1"}}, ...children).
 * @param {string} tag
 * @param {Record<string, any>} [attrs]
 * @param {...any} children
 * @returns {HTMLElement}
 */
export function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/**
 * Readable, syntax-highlighted JSON, built from spans (safe for any value).
 * @param {any} value
 * @param {string} [label]
 */
export function jsonView(value, label) {
  const code = h("code");
  write(code, value, 0);
  return h("pre", { class: "json", tabindex: "0", "aria-label": label || "JSON" }, code);
}

// Characters a person cannot see, or that reorder what they see: controls, format characters
// (bidi overrides and isolates, zero-width ones, tags), lone surrogates, line and paragraph
// separators. The server's views write them as markers; so does every text the console builds
// from an input or an answer itself (``visible``), and its JSON shows them escaped.
const UNSEEN = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/gu;

/** @param {string} char */
function codePoint(char) {
  return (char.codePointAt(0) || 0).toString(16).toUpperCase().padStart(4, "0");
}

/**
 * ``text`` as a person may read it, nothing hidden: each character they could not see written
 * as a marker ("⟨U+202E⟩"), tabs and line breaks as spaces, every run of spaces as one — as the
 * server writes a pause's view.
 * @param {any} text
 */
export function visible(text) {
  return String(text).replace(/[\t\n\r]/g, " ").replace(UNSEEN, (c) => `⟨U+${codePoint(c)}⟩`).replace(/\s+/g, " ");
}

/** A string as JSON, with what a person cannot see escaped (``\u202e``) rather than obeyed. @param {string} text */
function jsonString(text) {
  return JSON.stringify(text).replace(UNSEEN, (c) =>
    Array.from({ length: c.length }, (_, i) => `\\u${c.charCodeAt(i).toString(16).padStart(4, "0")}`).join(""));
}

/** @param {string} cls @param {string} text */
function span(cls, text) {
  return h("span", { class: cls, text });
}

/** @param {HTMLElement} into @param {any} value @param {number} depth */
function write(into, value, depth) {
  const pad = "  ".repeat(depth + 1);
  const end = "  ".repeat(depth);
  if (value === null || value === undefined) into.append(span("j-null", "null"));
  else if (typeof value === "string") into.append(span("j-str", jsonString(value)));
  else if (typeof value === "number") into.append(span("j-num", String(value)));
  else if (typeof value === "boolean") into.append(span("j-bool", String(value)));
  else if (Array.isArray(value)) {
    if (!value.length) return into.append(span("j-punc", "[]"));
    into.append(span("j-punc", "["), "\n");
    value.forEach((item, i) => {
      into.append(pad);
      write(into, item, depth + 1);
      into.append(i < value.length - 1 ? span("j-punc", ",") : "", "\n");
    });
    into.append(end, span("j-punc", "]"));
  } else {
    const keys = Object.keys(value);
    if (!keys.length) return into.append(span("j-punc", "{}"));
    into.append(span("j-punc", "{"), "\n");
    keys.forEach((key, i) => {
      into.append(pad, span("j-key", jsonString(key)), span("j-punc", ": "));
      write(into, value[key], depth + 1);
      into.append(i < keys.length - 1 ? span("j-punc", ",") : "", "\n");
    });
    into.append(end, span("j-punc", "}"));
  }
}

// -- time: always the viewer's local time ---------------------------------------------------

/** @param {Date} a @param {Date} b */
function sameDay(a, b) {
  return a.getFullYear() === b.getFullYear() && a.getMonth() === b.getMonth() && a.getDate() === b.getDate();
}

/**
 * "14:05:12" today, "3 Mar, 14:05" on another day (local time).
 * @param {string | null | undefined} iso
 */
export function localTime(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  const time = date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false });
  if (sameDay(date, new Date())) return time;
  const day = date.toLocaleDateString([], { day: "numeric", month: "short" });
  return `${day}, ${time.slice(0, 5)}`;
}

/**
 * The full local date and time with its zone, for a title attribute.
 * @param {string | null | undefined} iso
 */
function fullTime(iso) {
  if (!iso) return "";
  return new Date(iso).toLocaleString([], { dateStyle: "full", timeStyle: "long" });
}

/**
 * A <time> element showing localTime, with the full time as its title.
 * @param {string} iso
 * @param {string} [cls]
 */
export function timeEl(iso, cls) {
  return h("time", { class: cls, datetime: iso, title: fullTime(iso), text: localTime(iso) });
}

/** @param {string | null | undefined} iso */
export function relativeTime(iso) {
  if (!iso) return "";
  const seconds = Math.round((Date.now() - new Date(iso).getTime()) / 1000);
  if (seconds < 45) return "just now";
  if (seconds < 3600) return `${Math.max(1, Math.round(seconds / 60))} min ago`;
  if (seconds < 86400) return `${Math.round(seconds / 3600)} h ago`;
  return new Date(iso).toLocaleDateString();
}

/**
 * How long until `iso`: "4:05", "1 h 12 min", "2 days"; "" when past.
 * @param {string} iso
 * @param {number} [now]
 */
export function countdown(iso, now = Date.now()) {
  const left = Math.floor((new Date(iso).getTime() - now) / 1000);
  if (left <= 0) return "";
  if (left < 3600) return `${Math.floor(left / 60)}:${String(left % 60).padStart(2, "0")}`;
  if (left < 86400) return `${Math.floor(left / 3600)} h ${Math.floor((left % 3600) / 60)} min`;
  return `${Math.round(left / 86400)} days`;
}

/** @param {string} id */
export function shortId(id) {
  return id.length > 16 ? id.slice(0, 12) + "…" : id; // a name a client gave ("seed-118") whole
}

/**
 * A JSON value as a person reads it, in one line: Yes/No, lists joined, objects as "key: value".
 * @param {any} value
 * @returns {string}
 */
export function plainText(value) {
  if (value === null || value === undefined) return "—";
  if (typeof value === "boolean") return value ? "Yes" : "No";
  if (typeof value === "string") return visible(value);
  if (typeof value === "number") return String(value);
  if (Array.isArray(value)) return value.map(plainText).join(", ");
  return Object.entries(value)
    .filter(([, v]) => v !== "" && v !== null && v !== undefined)
    .map(([k, v]) => `${visible(humanize(k))}: ${plainText(v)}`)
    .join(" · ");
}

/**
 * "userApproval" / "payment_id" → "User approval" / "Payment id".
 * @param {string} name
 */
export function humanize(name) {
  const words = name.replace(/([a-z0-9])([A-Z])/g, "$1 $2").replace(/[_-]+/g, " ").trim().split(/\s+/);
  const text = words.map((w) => (w.length > 1 && w === w.toUpperCase() ? w : w.toLowerCase())).join(" ");
  return text ? text[0].toUpperCase() + text.slice(1) : name;
}
