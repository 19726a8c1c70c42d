// @ts-check
// What an answer was, in words: the label on a settled card and in the audit trail, and the
// sentence that says who decided what, when (local time) and why.

import { humanize, localTime, plainText, visible } from "./dom.js";

/**
 * @typedef {{ref: string, pause_id?: string, name: string, decision: string, at: string, principal: string | null, via: string,
 *   output?: any, replace_input?: any, resumed_metadata?: any, reason?: string | null, call_ref?: string,
 *   input?: any, view?: any, rule?: string | null, grant?: string | null, approvals?: number, required?: number,
 *   metadata?: any}} Entry
 */

/**
 * Which pause an interrupt or an audit entry is about: its `pause_id` where the server sends one
 * (a call that pauses again keeps its ref), else its ref.
 * @param {{ref: string, pause_id?: string}} item
 */
export function pauseKey(item) {
  return item.pause_id || item.ref;
}

/** @param {Entry} entry */
export function decisionLabel(entry) {
  switch (entry.decision) {
    case "message":
      return "Message";
    case "restart": {
      // a restart approves only when it carried the approval: without it the tool ran again
      // (and may have paused again), edited or not
      const approved = !!(entry.resumed_metadata && entry.resumed_metadata.tool_approved);
      if (entry.replace_input !== null && entry.replace_input !== undefined) return approved ? "Edited & approved" : "Edited & run again";
      if (entry.required && entry.required > 1) return `Approved (${entry.approvals} of ${entry.required})`;
      return approved ? "Approved" : "Run again";
    }
    case "respond":
      if (entry.output && entry.output.approved === true) return "Approved";
      if (entry.output && entry.output.approved === false) return "Not approved";
      return "Answered";
    case "approve":
      if (entry.via === "policy") {
        if (entry.rule) return "Approved by a rule";
        return entry.principal ? `Approved by ${entry.principal}'s grant` : "Approved by a grant";
      }
      if (entry.replace_input !== null && entry.replace_input !== undefined) return "Edited & approved";
      return entry.required && entry.required > 1 ? `Approved (${entry.approvals} of ${entry.required})` : "Approved";
    case "grant":
      return "Granted";
    case "revoke":
      return "Grant revoked";
    case "escalate":
      return "Escalated";
    case "deny":
      if (entry.via === "policy") return "Denied by a rule";
      return "Denied";
    case "cancel":
      return `Cancelled${approvalsIn(entry)}`;
    case "expire":
      return `Expired${approvalsIn(entry)}`;
    default:
      return entry.decision;
  }
}

/**
 * How many had approved a call under a quorum when it was cancelled or expired:
 * " (1 of 2 approvals in)"; "" for a call that needed one approval, or none.
 * @param {Entry} entry
 */
function approvalsIn(entry) {
  return entry.required && entry.required > 1 ? ` (${entry.approvals || 0} of ${entry.required} approvals in)` : "";
}

/** "ok" | "deny" | "muted": the colour of the decision. @param {Entry} entry */
export function decisionTone(entry) {
  if (entry.decision === "deny" || (entry.decision === "respond" && entry.output && entry.output.approved === false)) {
    return "deny";
  }
  if (entry.decision === "cancel" || entry.decision === "expire") return "muted";
  return "ok";
}

/**
 * Who decided, and when: "by alice at 14:03:12 (via http)"; an expiry has nobody.
 * @param {Entry} entry
 */
export function decisionWho(entry) {
  if (entry.decision === "expire") return `Nobody answered in time · ${localTime(entry.at)}`;
  if (entry.via === "policy") {
    // a grant's decision names the person who granted it; a rule's, the rule
    const by = entry.rule ? `the rule “${entry.rule}”` : `${entry.principal || "an unnamed caller"} (granted earlier)`;
    return `by ${by} at ${localTime(entry.at)}`;
  }
  const who = entry.principal ? `by ${entry.principal}` : "by an unnamed caller";
  return `${who} at ${localTime(entry.at)} · via ${entry.via}`;
}

/**
 * What followed from the decision, beyond its label (or "").
 * @param {Entry} entry
 */
export function decisionDetail(entry) {
  if (entry.decision === "expire") {
    return entry.output && entry.output.denied ? "The agent was told it was denied." : `The agent got: ${plainText(entry.output)}.`;
  }
  if (entry.decision === "respond" && entry.output !== undefined) {
    // a plain yes or no says it all in its label; anything more is the answer itself
    const output = entry.output;
    const rest = output && typeof output === "object" && !Array.isArray(output)
      ? Object.fromEntries(Object.entries(output).filter(([k]) => k !== "approved")) : output;
    const more = plainText(rest);
    return more && more !== "—" ? `Answer: ${plainText(output)}` : "";
  }
  return "";
}

/**
 * One line: "Approved by alice at 14:03:12 · via http — “reason”".
 * @param {Entry} entry
 */
export function decisionSentence(entry) {
  const who = decisionWho(entry);
  let text = entry.decision === "expire" ? `${decisionLabel(entry)}: ${who.toLowerCase()}` : `${decisionLabel(entry)} ${who}`;
  if (entry.reason && entry.decision !== "expire") text += ` — “${visible(entry.reason)}”`;
  const detail = decisionDetail(entry);
  return detail ? `${text}. ${detail}` : text;
}

/**
 * The fields an edit changed: [{label, from, to}].
 * @param {Entry} entry
 */
export function editedFields(entry) {
  if (!["restart", "approve"].includes(entry.decision) || entry.replace_input === null || entry.replace_input === undefined) return [];
  const before = entry.input && typeof entry.input === "object" ? entry.input : {};
  const after = entry.replace_input && typeof entry.replace_input === "object" ? entry.replace_input : {};
  const labels = new Map((entry.view ? entry.view.fields : []).map((/** @type {any} */ f) => [f.name, f.label]));
  return Object.keys({ ...before, ...after })
    .filter((key) => JSON.stringify(before[key]) !== JSON.stringify(after[key]))
    .map((key) => ({ label: labels.get(key) || humanize(key), from: plainText(before[key]), to: plainText(after[key]) }));
}

/** The comment the person saved with the decision (the answer's `metadata.comment`), or "". @param {Entry} entry */
export function decisionComment(entry) {
  const comment = entry.metadata && entry.metadata.comment;
  return typeof comment === "string" ? comment : "";
}
