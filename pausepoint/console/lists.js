// The sidebar lists (inbox, recent sessions) and the audit trail.

import { answerSummary, decisionLabel } from "./cards.js";
import { h, jsonView, relativeTime, shortId } from "./dom.js";

function describePauses(interrupts) {
  if (!interrupts || !interrupts.length) return "waiting";
  const first = interrupts[0];
  // the most telling words of its input: its longest string
  const strings = first.input && typeof first.input === "object" ? Object.values(first.input).filter((v) => typeof v === "string") : [];
  const detail = strings.sort((a, b) => b.length - a.length)[0];
  const more = interrupts.length > 1 ? ` +${interrupts.length - 1}` : "";
  return `${first.name}${detail ? ": " + detail : ""}${more}`;
}

// items: [{agent, session, interrupts?}] ; current: "agent/session_id" or null.
export function renderSessions(list, empty, items, current, { showPauses }) {
  list.replaceChildren(...items.map((item) => {
    const key = `${item.agent}/${item.session.session_id}`;
    const href = `#agent=${encodeURIComponent(item.agent)}&session=${encodeURIComponent(item.session.session_id)}`;
    const pending = item.session.pending;
    return h("li", { class: "session-item", dataset: { key, session: item.session.session_id } },
      h("a", { href, class: "session-link", "aria-current": key === current ? "page" : null },
        h("span", { class: "session-title", text: showPauses ? describePauses(item.interrupts) : `Session ${shortId(item.session.session_id)}` }),
        h("span", { class: "session-meta" },
          h("span", { text: item.agent }),
          h("span", { "aria-hidden": "true", text: "·" }),
          h("span", { class: "mono", text: shortId(item.session.session_id) }),
          h("span", { "aria-hidden": "true", text: "·" }),
          h("time", { datetime: item.session.updated_at, text: relativeTime(item.session.updated_at) })),
        pending ? h("span", { class: "pending-pill", "aria-label": `${pending} waiting`, text: String(pending) }) : null));
  }));
  empty.hidden = items.length > 0;
}

export function renderAudit(list, empty, entries) {
  // Answers only: the conversation already shows the messages (entries with decision "message").
  entries = entries.filter((entry) => entry.decision !== "message");
  list.replaceChildren(...entries.slice().reverse().map((entry) => {
    const details = {};
    for (const field of ["output", "replace_input", "resumed_metadata", "metadata"]) {
      if (entry[field] !== null && entry[field] !== undefined) details[field] = entry[field];
    }
    const kind = entry.decision === "deny" || entry.decision === "expire" || entry.decision === "cancel" ? "deny" : "ok";
    return h("li", { class: "audit-entry", dataset: { ref: entry.ref, decision: entry.decision } },
      h("div", { class: "audit-head" },
        h("span", { class: `badge badge-${kind === "deny" ? "deny" : "ok"}`, text: decisionLabel(entry) }),
        h("span", { class: "mono audit-tool", text: entry.name })),
      h("p", { class: "audit-text", text: answerSummary(entry) }),
      Object.keys(details).length
        ? h("details", { class: "audit-details" }, h("summary", { text: "What was sent" }), jsonView(details, "Answer details"))
        : null);
  }));
  empty.hidden = entries.length > 0;
}
