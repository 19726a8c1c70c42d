// @ts-check
// The inbox: what waits for the person, live, and — filtered by state — what was decided, what
// expired and which turns failed; an item can be dismissed (hidden for this person in this
// browser: the pause still waits, and anyone may still answer it) and restored.

import { Api } from "./api.js";
import { answers, countedFor, waitsFor } from "./cardstate.js";
import { decisionSentence, pauseKey } from "./decisions.js";
import { h, localTime, relativeTime, shortId } from "./dom.js";
import { expiresText } from "./lists.js";

/** @typedef {"waiting" | "decided" | "expired" | "failed" | "dismissed"} Filter */
/**
 * An item; `waiting`: how many of its pauses wait for this person (`waitsFor`: theirs to approve
 * or deny, their approval not counted yet); `counted`: each of its pauses has their approval
 * counted (a quorum's: it waits for others). An item waits for them if `waiting` is above 0.
 * @typedef {{key: string, agent: string, session: any, title: string, keys: string[], pauses: any[],
 *   asker: string | null, at: string, line: string, risky: boolean, expires: string | null,
 *   waiting: number, counted: boolean}} Item
 */

const FILTERS = /** @type {const} */ ([["waiting", "Waiting"], ["decided", "Decided"], ["expired", "Expired"],
  ["failed", "Failed"], ["dismissed", "Dismissed"]]);
const HISTORY_SESSIONS = 25;
// Sessions read a page at a time (the server's default page), at most MOST_SESSIONS of an agent;
// each waiting one is then read whole, DETAILS_AT_ONCE at a time.
const PAGE = 100;
const MOST_SESSIONS = 2000;
const DETAILS_AT_ONCE = 16;

/** @param {string} agent @param {string} sessionId */
function sessionPath(agent, sessionId) {
  return `/v1/agents/${encodeURIComponent(agent)}/sessions/${encodeURIComponent(sessionId)}`;
}

/** @param {string} agent @param {string} sessionId */
function sessionHref(agent, sessionId) {
  return `#agent=${encodeURIComponent(agent)}&session=${encodeURIComponent(sessionId)}`;
}

export class Inbox {
  /**
   * @param {{list: HTMLElement, empty: HTMLElement, count: HTMLElement, filters: HTMLElement}} els
   * @param {() => string | null} current "agent/session" shown now
   */
  constructor(els, current) {
    this.els = els;
    this.current = current;
    this.api = /** @type {Api | null} */ (null);
    this.principal = "";
    /** @type {string[]} */
    this.agents = [];
    /** @type {Map<string, {agent: string, session: any, interrupts: any[]}>} "agent/session" -> what waits */
    this.waiting = new Map();
    /** @type {Record<string, Item[]> | null} decided, expired and failed items, once read */
    this.history = null;
    /** @type {Filter} */
    this.filter = "waiting";
    /** @type {Set<string>} */
    this.dismissed = new Set();
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    this.historyTimer = undefined;
    this.buttons = new Map(FILTERS.map(([name, label]) => [name, h("button", { type: "button", class: "filter",
      "aria-pressed": name === "waiting" ? "true" : "false", onclick: () => this.show(name) },
    h("span", { class: "filter-label", text: label }), h("span", { class: "filter-count" }))]));
    els.filters.replaceChildren(...this.buttons.values());
  }

  /** @param {Api} api @param {string} principal @param {string[]} agents */
  start(api, principal, agents) {
    this.api = api;
    this.principal = principal;
    this.agents = agents;
    this.history = null;
    try {
      this.dismissed = new Set(JSON.parse(localStorage.getItem(this.storeKey()) || "[]"));
    } catch {
      this.dismissed = new Set();
    }
  }

  storeKey() {
    return `pausepoint.dismissed.${this.principal}`;
  }

  /** The number of items waiting for the person (not dismissed, with a pause they may still decide). */
  get count() {
    return this.waitingItems().filter((item) => !this.isDismissed(item) && item.waiting > 0).length;
  }

  /** Read every session with open pauses, of every agent (page after page: none is left out). */
  async refresh() {
    const found = await Promise.all(this.agents.map(async (agent) => {
      const sessions = await this.pendingSessions(agent);
      return sessions.map((/** @type {any} */ session) => ({ agent, session }));
    }));
    this.waiting.clear();
    const all = found.flat();
    for (let i = 0; i < all.length; i += DETAILS_AT_ONCE) {
      await Promise.all(all.slice(i, i + DETAILS_AT_ONCE).map((item) => this.refreshOne(item.agent, item.session.session_id, false)));
    }
    this.history = null;
    if (this.filter !== "waiting" && this.filter !== "dismissed") await this.loadHistory();
    this.render();
  }

  /** The agent's sessions with open pauses, every page of them. @param {string} agent @returns {Promise<any[]>} */
  async pendingSessions(agent) {
    const api = /** @type {Api} */ (this.api);
    const all = [];
    for (let offset = 0; offset < MOST_SESSIONS; offset += PAGE) {
      const { sessions } = await api.get(`/v1/agents/${encodeURIComponent(agent)}/sessions?pending=true&limit=${PAGE}&offset=${offset}`);
      all.push(...sessions);
      if (sessions.length < PAGE) break;
    }
    return all;
  }

  /**
   * Re-read one session (or take it as read: `detail`).
   * @param {string} agent @param {string} sessionId @param {boolean} [render] @param {any} [detail]
   */
  async refreshOne(agent, sessionId, render = true, detail = undefined) {
    const key = `${agent}/${sessionId}`;
    if (detail === undefined) {
      try {
        detail = await /** @type {Api} */ (this.api).get(sessionPath(agent, sessionId));
      } catch {
        this.waiting.delete(key);
        if (render) this.render();
        return;
      }
    }
    if (detail.session.pending > 0) this.waiting.set(key, { agent, session: detail.session, interrupts: detail.interrupts });
    else this.waiting.delete(key);
    if (render) {
      this.render();
      this.historySoon();
    }
  }

  /** Read the decided, expired and failed items again once the news has settled (shown: now). */
  historySoon() {
    if (this.filter === "waiting" || this.filter === "dismissed") return; // (read when one is picked)
    clearTimeout(this.historyTimer);
    this.historyTimer = setTimeout(async () => {
      await this.loadHistory();
      this.render();
    }, 800);
  }

  /** @param {Filter} filter */
  async show(filter) {
    this.filter = filter;
    for (const [name, button] of this.buttons) button.setAttribute("aria-pressed", name === filter ? "true" : "false");
    if (filter !== "waiting" && filter !== "dismissed") {
      this.els.empty.textContent = "Looking…";
      this.els.empty.hidden = false;
      this.els.list.replaceChildren();
      await this.loadHistory();
    }
    this.render();
  }

  /** The decided, expired and failed items of the latest sessions of every agent. */
  async loadHistory() {
    const api = /** @type {Api} */ (this.api);
    /** @type {Record<string, Item[]>} */
    const history = { decided: [], expired: [], failed: [] };
    await Promise.all(this.agents.map(async (agent) => {
      const { sessions } = await api.get(`/v1/agents/${encodeURIComponent(agent)}/sessions?limit=${HISTORY_SESSIONS}`);
      await Promise.all(sessions.map(async (/** @type {any} */ session) => {
        const path = sessionPath(agent, session.session_id);
        const [{ entries }, detail] = await Promise.all([api.get(path + "/audit"), api.get(path)]);
        this.historyOf(agent, session, entries, detail, history);
      }));
    }));
    for (const items of Object.values(history)) items.sort((a, b) => b.at.localeCompare(a.at));
    this.history = history;
  }

  /**
   * @param {string} agent @param {any} session @param {any[]} entries @param {any} detail
   * @param {Record<string, Item[]>} into
   */
  historyOf(agent, session, entries, detail, into) {
    const asked = entries.filter((e) => e.decision === "message");
    for (const entry of entries) {
      if (!answers(entry) || entry.via === "policy") continue;
      const asker = [...asked].reverse().find((m) => m.at <= entry.at);
      into[entry.decision === "expire" ? "expired" : "decided"].push(this.item(agent, session, {
        key: `${agent}/${session.session_id}/${pauseKey(entry)}`, title: entry.view ? entry.view.title : entry.name,
        keys: [], pauses: [], asker: asker ? asker.principal : session.owner, at: entry.at,
        line: decisionSentence(entry), risky: !!(entry.view && entry.view.risk === "high"), expires: null,
        waiting: 0, counted: false,
      }));
    }
    const last = detail.last_response;
    if (last && last.finish_reason === "failed") {
      const message = asked[asked.length - 1];
      const text = message && message.message ? message.message.parts.map((/** @type {any} */ p) => p.text || "").join(" ") : "";
      into.failed.push(this.item(agent, session, {
        key: `${agent}/${session.session_id}/failed/${last.turn}`, title: text ? `“${text}”` : `Session ${shortId(session.session_id)}`,
        keys: [], pauses: [], asker: message ? message.principal : session.owner, at: session.updated_at,
        line: `The agent's turn failed${last.error ? `: ${last.error}` : "."}`, risky: false, expires: null,
        waiting: 0, counted: false,
      }));
    }
  }

  /** @param {string} agent @param {any} session @param {Omit<Item, "agent" | "session">} rest @returns {Item} */
  item(agent, session, rest) {
    return { agent, session, ...rest };
  }

  /** @returns {Item[]} */
  waitingItems() {
    return [...this.waiting.values()].map(({ agent, session, interrupts }) => {
      const first = interrupts[0];
      const title = first ? (first.view ? first.view.title : first.name) : `Session ${shortId(session.session_id)}`;
      const expires = interrupts.filter((/** @type {any} */ p) => p.expires_at).map((/** @type {any} */ p) => p.expires_at).sort()[0];
      const more = interrupts.length > 1 ? `+${interrupts.length - 1} more · ` : "";
      const waiting = interrupts.filter((/** @type {any} */ p) => waitsFor(p, this.principal)).length;
      const counted = interrupts.length > 0 && interrupts.every((/** @type {any} */ p) => countedFor(p, this.principal));
      return this.item(agent, session, {
        key: `${agent}/${session.session_id}`, title, pauses: interrupts,
        keys: interrupts.map((/** @type {any} */ p) => `${agent}/${session.session_id}/${pauseKey(p)}`),
        asker: (first && first.approval && first.approval.requested_by) || session.owner,
        at: (first && first.paused_at) || session.updated_at,
        line: first && first.view && first.view.summary !== title ? `${more}${first.view.summary}` : more.replace(/ · $/, ""),
        risky: interrupts.some((/** @type {any} */ p) => p.view && p.view.risk === "high"), expires: expires || null,
        waiting, counted,
      });
    }).sort((a, b) => b.at.localeCompare(a.at));
  }

  /** @param {Item} item */
  isDismissed(item) {
    return item.keys.length > 0 && item.keys.every((k) => this.dismissed.has(k));
  }

  /** @param {Item} item @param {boolean} dismiss */
  setDismissed(item, dismiss) {
    for (const key of item.keys) {
      if (dismiss) this.dismissed.add(key);
      else this.dismissed.delete(key);
    }
    localStorage.setItem(this.storeKey(), JSON.stringify([...this.dismissed]));
    this.render();
  }

  render() {
    const waiting = this.waitingItems();
    const shown = waiting.filter((item) => !this.isDismissed(item));
    const dismissed = waiting.filter((item) => this.isDismissed(item));
    const forYou = shown.filter((item) => item.waiting > 0).length;
    /** @type {Record<Filter, Item[] | null>} */
    const lists = {
      waiting: shown, dismissed,
      decided: this.history ? this.history.decided : null,
      expired: this.history ? this.history.expired : null,
      failed: this.history ? this.history.failed : null,
    };
    /** @type {Partial<Record<Filter, number>>} */
    const counts = { waiting: forYou, dismissed: dismissed.length };
    for (const [name, button] of this.buttons) {
      const count = counts[/** @type {Filter} */ (name)];
      /** @type {HTMLElement} */ (button.querySelector(".filter-count")).textContent = count ? String(count) : "";
    }
    /** @type {HTMLElement} */ (this.buttons.get("dismissed")).hidden = !dismissed.length && this.filter !== "dismissed";
    const items = lists[this.filter] || [];
    this.els.list.replaceChildren(...items.map((item) => this.row(item)));
    this.els.empty.hidden = items.length > 0;
    this.els.empty.textContent = {
      waiting: "Nothing is waiting for you.", dismissed: "Nothing dismissed.", decided: "Nothing decided lately.",
      expired: "Nothing expired lately.", failed: "No failed turns lately.",
    }[this.filter];
    this.els.count.textContent = String(forYou);
    this.els.count.dataset.zero = forYou ? "false" : "true";
    document.title = forYou ? `(${forYou}) pausepoint console` : "pausepoint console";
  }

  /** @param {Item} item */
  row(item) {
    const key = `${item.agent}/${item.session.session_id}`;
    const asker = item.asker ? (item.asker === this.principal ? "asked by you" : `asked by ${item.asker}`) : "";
    const link = h("a", { href: sessionHref(item.agent, item.session.session_id), class: "session-link",
      "aria-current": key === this.current() ? "page" : null },
    h("span", { class: "session-title", text: item.title }),
    item.line ? h("span", { class: "session-summary", text: item.line }) : null,
    h("span", { class: "session-meta" },
      item.risky ? h("span", { class: "tag tag-risk", text: "High risk" }) : null,
      item.counted ? h("span", { class: "tag tag-counted", text: "Your approval is counted" }) : null,
      asker ? h("span", { text: asker }) : null,
      h("span", { class: "mono", title: item.session.session_id, text: `session ${shortId(item.session.session_id)}` }),
      h("span", { text: item.agent }),
      h("time", { class: "nowrap", datetime: item.at, title: localTime(item.at), text: relativeTime(item.at) }),
      item.expires ? h("span", { class: "nowrap expires", dataset: { expires: item.expires }, text: expiresText(item.expires) }) : null),
    this.filter === "waiting" && item.waiting
      ? h("span", { class: "pending-pill", "aria-label": `${item.waiting} waiting for you`, text: String(item.waiting) }) : null);
    const action = this.filter === "waiting"
      ? h("button", { type: "button", class: "btn btn-quiet btn-small", "aria-label": `Dismiss “${item.title}” from your inbox`,
        title: "Hide it here; it still waits, and anyone may still answer it", onclick: () => this.setDismissed(item, true) }, "Dismiss")
      : this.filter === "dismissed"
        ? h("button", { type: "button", class: "btn btn-quiet btn-small", "aria-label": `Restore “${item.title}” to your inbox`,
          onclick: () => this.setDismissed(item, false) }, "Restore")
        : null;
    const note = this.filter === "dismissed" ? h("p", { class: "session-note", text: "Dismissed here: it still waits for an answer." }) : null;
    const counted = item.counted ? { counted: "true" } : {};
    return h("li", { class: "session-item", dataset: { key, session: item.session.session_id, ...counted } }, link, note, action);
  }
}
