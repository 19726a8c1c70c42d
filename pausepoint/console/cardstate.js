// @ts-check
// Every card's state, worked out in one place from the session's events: the pauses still open
// (GET .../sessions/{id}, each with its view) and the audit trail (GET .../audit). A card shows
// what this says — whichever way the news came (this page's answer, the feed, a reload) — so a
// quorum card, a requester's card, a cancelled card and the lists never disagree with the log.

import { pauseKey } from "./decisions.js";

/**
 * open      the pause waits, and this person may still decide it
 * counted   it waits for others: this person's approval of a quorum is counted
 * expiring  its time ran out; the server's sweep has not settled it yet
 * answered  decided (approved, answered, denied); `elsewhere` when not from this page
 * cancelled every open pause of the session was cancelled
 * expired   nobody answered in time: the expiry policy decided
 * @typedef {{kind: "open" | "counted" | "expiring" | "answered" | "cancelled" | "expired",
 *   pause: any, entry: any, approvers: string[], required: number, elsewhere: boolean}} CardState
 */

/**
 * Whether an audit entry answered a pause (or decided a call): not a grant given or revoked, an
 * escalation, or one approval of several counted while the pause stayed open.
 * @param {any} e
 */
export function answers(e) {
  if (e.decision === "grant" || e.decision === "revoke" || e.decision === "escalate" || e.decision === "message") return false;
  return !(e.decision === "approve" && e.via !== "policy" && e.required > 1 && e.approvals < e.required);
}

/**
 * The entry that settled a pause: the last answer to it (a quorum's resolving approval, not a
 * grant given with it). @param {any[]} entries @param {string} key
 */
export function settledBy(entries, key) {
  for (let i = entries.length - 1; i >= 0; i--) {
    if (pauseKey(entries[i]) === key && answers(entries[i])) return entries[i];
  }
  return null;
}

/**
 * Whether `principal`'s approval of the open `pause` is counted and the pause waits for others
 * (a quorum): it no longer waits for this person. @param {any} pause @param {string} principal
 */
export function countedFor(pause, principal) {
  const shown = pause && pause.view && pause.view.approval;
  return !!(shown && principal && shown.approved_by.includes(principal));
}

/**
 * Whether the open `pause` waits for `principal`: their approval is not counted yet, and they may
 * approve it or deny it (not the requester under separation of duties, nor someone whose roles
 * decide nothing of it). @param {any} pause @param {string} principal
 */
export function waitsFor(pause, principal) {
  const shown = pause && pause.view && pause.view.approval;
  if (!shown || !principal) return true;
  if (shown.approved_by.includes(principal)) return false;
  const mayApprove = !shown.excluded.includes(principal)
    && (!Array.isArray(shown.may_approve) || shown.may_approve.includes(principal));
  return mayApprove || !Array.isArray(shown.may_deny) || shown.may_deny.includes(principal);
}

/**
 * Whether `principal` may answer a pause in its tool's place (Respond…), as the server checks it
 * (403 otherwise): one the view's `may_respond` names; where it names nobody (members the policy
 * cannot list), anyone but the requester under separation of duties (excluded though no approval
 * of theirs is counted). @param {any} shown the view's `approval` (or null) @param {string} principal
 */
export function mayRespond(shown, principal) {
  if (!shown || !principal) return true;
  if (Array.isArray(shown.may_respond)) return shown.may_respond.includes(principal);
  return !(shown.requested_by === principal && shown.excluded.includes(principal) && !shown.approved_by.includes(principal));
}

/**
 * The state of each pause in `keys`. A key neither open nor settled in what was read (its answer
 * is being written) has no state: its card stays as it is.
 * @param {string[]} keys
 * @param {{interrupts: any[]}} detail the session as GET .../sessions/{id} returns it
 * @param {any[]} entries its audit trail
 * @param {{principal: string, now: number, ours: (entry: any) => boolean, seenOpen: (key: string) => boolean}} viewer
 *   who looks (their approvals count as theirs), the time, which answers this page gave, which
 *   cards it showed open
 * @returns {Map<string, CardState>}
 */
export function cardStates(keys, detail, entries, viewer) {
  const open = new Map(detail.interrupts.map((/** @type {any} */ p) => [pauseKey(p), p]));
  /** @type {Map<string, CardState>} */
  const states = new Map();
  for (const key of keys) {
    const entry = settledBy(entries, key);
    const approvals = entries.filter((e) => pauseKey(e) === key && e.decision === "approve" && e.via !== "policy");
    const base = {
      pause: open.get(key) || null,
      entry,
      approvers: approvals.map((e) => e.principal || "someone"),
      required: Math.max(0, ...approvals.map((e) => e.required || 0), entry ? entry.required || 0 : 0),
      elsewhere: false,
    };
    if (entry) {
      const kind = entry.decision === "cancel" ? "cancelled" : entry.decision === "expire" ? "expired" : "answered";
      const elsewhere = kind === "answered" && viewer.seenOpen(key) && !viewer.ours(entry);
      states.set(key, { ...base, kind, elsewhere });
      continue;
    }
    const pause = base.pause;
    if (!pause) continue;
    const shown = pause.view && pause.view.approval;
    if (pause.expires_at && new Date(pause.expires_at).getTime() <= viewer.now) {
      states.set(key, { ...base, kind: "expiring" });
    } else if (countedFor(pause, viewer.principal)) {
      states.set(key, { ...base, kind: "counted", required: shown.required, approvers: shown.approved_by });
    } else {
      states.set(key, { ...base, kind: "open", required: shown ? shown.required : 0, approvers: shown ? shown.approved_by : [] });
    }
  }
  return states;
}
