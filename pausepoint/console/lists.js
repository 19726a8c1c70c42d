// @ts-check
// The sidebar lists (inbox, recent sessions) and the audit trail.

import { decisionDetail, decisionLabel, decisionTone, decisionWho, editedFields } from "./decisions.js";
import { countdown, h, jsonView, localTime, relativeTime, shortId, timeEl } from "./dom.js";

/**
 * items: [{agent, session, interrupts?}]; current: "agent/session_id" or null.
 * @param {HTMLElement} list @param {HTMLElement} empty @param {any[]} items @param {string | null} current
 * @param {{showPauses: boolean}} options
 */
export function renderSessions(list, empty, items, current, { showPauses }) {
  list.replaceChildren(...items.map((item) => {
    const key = `${item.agent}/${item.session.session_id}`;
    const href = `#agent=${encodeURIComponent(item.agent)}&session=${encodeURIComponent(item.session.session_id)}`;
    const pauses = showPauses && item.interrupts ? item.interrupts : [];
    const first = pauses[0];
    const title = first ? (first.view ? first.view.title : first.name) : `Session ${shortId(item.session.session_id)}`;
    const more = pauses.length > 1 ? h("span", { class: "session-more", text: `+${pauses.length - 1} more` }) : null;
    const expiring = pauses.filter((/** @type {any} */ p) => p.expires_at).map((/** @type {any} */ p) => p.expires_at).sort()[0];
    const risky = pauses.some((/** @type {any} */ p) => p.view && p.view.risk === "high");
    return h("li", { class: "session-item", dataset: { key, session: item.session.session_id } },
      h("a", { href, class: "session-link", "aria-current": key === current ? "page" : null },
        h("span", { class: "session-title", text: title }),
        first && first.view && first.view.summary && first.view.summary !== title
          ? h("span", { class: "session-summary", text: first.view.summary }) : null,
        h("span", { class: "session-meta" },
          risky ? h("span", { class: "tag tag-risk", text: "High risk" }) : null,
          more,
          h("span", { text: item.agent }),
          h("time", { class: "nowrap", datetime: item.session.updated_at, text: relativeTime(item.session.updated_at) }),
          expiring ? h("span", { class: "nowrap expires", dataset: { expires: expiring }, text: expiresText(expiring) }) : null),
        item.session.pending ? h("span", { class: "pending-pill", "aria-label": `${item.session.pending} waiting`,
          text: String(item.session.pending) }) : null));
  }));
  empty.hidden = items.length > 0;
}

/**
 * A user message as the audit trail records it (who wrote into the session, when).
 * @param {any} entry
 */
function messageEntry(entry) {
  const parts = entry.message && entry.message.parts ? entry.message.parts : [];
  const text = parts.filter((/** @type {any} */ p) => p.kind === "text").map((/** @type {any} */ p) => p.text).join(" ");
  return h("li", { class: "audit-entry audit-message", dataset: { decision: "message" } },
    h("div", { class: "audit-head" },
      h("span", { class: "badge badge-muted", text: decisionLabel(entry) }),
      timeEl(entry.at, "audit-time")),
    h("p", { class: "audit-summary", text: text.length > 140 ? text.slice(0, 139) + "…" : text }),
    h("p", { class: "audit-who", text: decisionWho(entry) }));
}

/** @param {string} iso */
export function expiresText(iso) {
  const left = countdown(iso);
  return left ? `expires in ${left}` : `expired ${localTime(iso)}`;
}

/**
 * The audit trail, newest first: what was decided, on which call and its key input, by whom, when.
 * @param {HTMLElement} list @param {HTMLElement} empty @param {any[]} entries
 */
export function renderAudit(list, empty, entries) {
  list.replaceChildren(...entries.slice().reverse().map((entry) => {
    if (entry.decision === "message") return messageEntry(entry);
    /** @type {Record<string, any>} */
    const sent = {};
    for (const field of ["output", "replace_input", "resumed_metadata", "metadata"]) {
      if (entry[field] !== null && entry[field] !== undefined) sent[field] = entry[field];
    }
    const view = entry.view || { title: entry.name, summary: "", fields: [] };
    const edits = editedFields(entry);
    const detail = decisionDetail(entry);
    return h("li", { class: "audit-entry", dataset: { ref: entry.ref, decision: entry.decision } },
      h("div", { class: "audit-head" },
        h("span", { class: `badge badge-${decisionTone(entry)}`, text: decisionLabel(entry) }),
        timeEl(entry.at, "audit-time")),
      h("p", { class: "audit-title", text: view.title }),
      view.summary && view.summary !== view.title ? h("p", { class: "audit-summary", text: view.summary }) : null,
      h("p", { class: "audit-who", text: decisionWho(entry) }),
      entry.reason && entry.decision !== "expire" ? h("p", { class: "audit-reason", text: `“${entry.reason}”` }) : null,
      detail ? h("p", { class: "audit-detail", text: detail }) : null,
      edits.length ? h("ul", { class: "audit-edits", "aria-label": "Changed before approval" },
        ...edits.map((c) => h("li", {}, h("span", { class: "audit-edit-label", text: `${c.label}: ` }),
          h("del", { text: c.from }), " → ", h("ins", { text: c.to })))) : null,
      h("details", { class: "audit-details" },
        h("summary", { text: "Details" }),
        h("p", { class: "audit-tool" }, h("span", { class: "mono", text: entry.name }), " · ref ",
          h("span", { class: "mono", text: entry.ref })),
        Object.keys(sent).length ? jsonView(sent, "What was sent") : null));
  }));
  empty.hidden = entries.length > 0;
}
