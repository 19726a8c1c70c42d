// @ts-check
// The sidebar lists (inbox, recent sessions) and the audit trail.

import { decisionComment, decisionDetail, decisionLabel, decisionTone, decisionWho, editedFields } from "./decisions.js";
import { countdown, h, humanize, jsonView, localTime, relativeTime, shortId, timeEl, visible } from "./dom.js";

/**
 * The recent sessions: items [{agent, session}]; current: "agent/session_id" or null. A session's
 * pill counts its open pauses as the server last said.
 * @param {HTMLElement} list @param {HTMLElement} empty @param {any[]} items @param {string | null} current
 */
export function renderSessions(list, empty, items, current) {
  list.replaceChildren(...items.map((item) => {
    const key = `${item.agent}/${item.session.session_id}`;
    const href = `#agent=${encodeURIComponent(item.agent)}&session=${encodeURIComponent(item.session.session_id)}`;
    return h("li", { class: "session-item", dataset: { key, session: item.session.session_id } },
      h("a", { href, class: "session-link", "aria-current": key === current ? "page" : null },
        h("span", { class: "session-title", text: `Session ${shortId(item.session.session_id)}` }),
        h("span", { class: "session-meta" },
          h("span", { text: item.agent }),
          item.session.owner ? h("span", { text: `by ${item.session.owner}` }) : null,
          h("time", { class: "nowrap", datetime: item.session.updated_at, text: relativeTime(item.session.updated_at) })),
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

/**
 * What a grant approves, as a title and a summary: "Later “Transfer money” calls in this session",
 * "Amount: 700 · To account: savings · once · until 14:20:31".
 * @param {any} entry
 */
function grantView(entry) {
  const scope = entry.scope || {};
  const bounds = Object.entries(scope.bounds || {}).map(([field, conditions]) => {
    const said = Object.entries(/** @type {Record<string, any>} */ (conditions)).map(([op, value]) => {
      const shown = visible(Array.isArray(value) ? value.join(" or ") : String(value));
      return op === "equals" ? shown : op === "max" ? `at most ${shown}` : op === "min" ? `at least ${shown}` : `${op} ${shown}`;
    });
    return `${humanize(field)}: ${said.join(", ")}`;
  });
  const uses = scope.uses === 1 ? "once" : scope.uses ? `up to ${scope.uses} times` : "";
  const until = scope.expires_at ? `until ${localTime(scope.expires_at)}` : "";
  const title = `${entry.decision === "revoke" ? "No longer: later" : "Later"} “${humanize(entry.name)}” calls in this session`;
  return { title, summary: [...bounds, uses, until].filter(Boolean).join(" · "), fields: [] };
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
    const view = entry.view || (entry.decision === "grant" || entry.decision === "revoke" ? grantView(entry)
      : { title: humanize(entry.name), summary: "", fields: [] });
    const edits = editedFields(entry);
    const detail = decisionDetail(entry);
    return h("li", { class: "audit-entry", dataset: { ref: entry.ref, decision: entry.decision } },
      h("div", { class: "audit-head" },
        h("span", { class: `badge badge-${decisionTone(entry)}`, text: decisionLabel(entry) }),
        timeEl(entry.at, "audit-time")),
      h("p", { class: "audit-title", text: view.title }),
      view.summary && view.summary !== view.title ? h("p", { class: "audit-summary", text: view.summary }) : null,
      h("p", { class: "audit-who", text: decisionWho(entry) }),
      entry.reason && entry.decision !== "expire" ? h("p", { class: "audit-reason", text: `“${visible(entry.reason)}”` }) : null,
      decisionComment(entry) ? h("p", { class: "audit-comment", text: `Comment: “${decisionComment(entry)}”` }) : null,
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
