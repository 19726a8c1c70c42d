// Small DOM helpers. Everything that came from the server goes in as text, never as HTML.

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

// Readable, syntax-highlighted JSON, built from spans (safe for any value).
export function jsonView(value, label) {
  const code = h("code");
  write(code, value, 0);
  return h("pre", { class: "json", tabindex: "0", "aria-label": label || "JSON" }, code);
}

function span(cls, text) {
  return h("span", { class: cls, text });
}

function write(into, value, depth) {
  const pad = "  ".repeat(depth + 1);
  const end = "  ".repeat(depth);
  if (value === null || value === undefined) into.append(span("j-null", "null"));
  else if (typeof value === "string") into.append(span("j-str", JSON.stringify(value)));
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
      into.append(pad, span("j-key", JSON.stringify(key)), span("j-punc", ": "));
      write(into, value[key], depth + 1);
      into.append(i < keys.length - 1 ? span("j-punc", ",") : "", "\n");
    });
    into.append(end, span("j-punc", "}"));
  }
}

export function shortTime(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  return date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false });
}

export function relativeTime(iso) {
  if (!iso) return "";
  const seconds = Math.round((Date.now() - new Date(iso).getTime()) / 1000);
  if (seconds < 45) return "just now";
  if (seconds < 3600) return `${Math.round(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.round(seconds / 3600)} h ago`;
  return new Date(iso).toLocaleDateString();
}

export function shortId(id) {
  return id.length > 10 ? id.slice(0, 8) + "…" : id;
}
