// @ts-check
// The conversation log: past messages (with the cards of their pauses, answered or open), and
// turns streaming in.

import { pauseKey } from "./decisions.js";
import { h, jsonView, localTime, visible } from "./dom.js";

/** @param {string} text @param {string} [who] who wrote it, when not the viewer */
export function userMessage(text, who = "You") {
  return h("div", { class: "msg msg-user" }, h("div", { class: "msg-role", text: who }), h("div", { class: "msg-body", text }));
}

/** @param {string} text */
function modelMessage(text) {
  return h("div", { class: "msg msg-model" }, h("div", { class: "msg-role", text: "Agent" }), h("div", { class: "msg-body", text }));
}

/** @param {any} value */
function preview(value) {
  const text = visible(typeof value === "string" ? value : JSON.stringify(value));
  return text.length > 90 ? text.slice(0, 89) + "…" : text;
}

/**
 * One line for a tool call or its result, expandable to the full JSON.
 * @param {"call" | "result"} kind @param {string} name @param {any} value @param {boolean} [isError] @param {string} [ref]
 */
function activity(kind, name, value, isError = false, ref = "") {
  const arrow = kind === "call" ? "→" : isError ? "✕" : "←";
  const verb = kind === "call" ? "called" : isError ? "failed" : "returned";
  return h("details", { class: `activity activity-${kind}${isError ? " activity-error" : ""}`, dataset: ref ? { ref } : null },
    h("summary", {},
      h("span", { class: "activity-arrow", "aria-hidden": "true", text: arrow }),
      h("span", { class: "mono activity-name", text: name }),
      h("span", { class: "visually-hidden", text: ` ${verb} ` }),
      h("span", { class: "activity-preview mono", text: preview(value) })),
    jsonView(value, `${name} ${kind === "call" ? "input" : "result"}`));
}

/**
 * The log of a stored session, from GET .../history. `cardsFor(callRef)` gives the cards of the
 * pauses of that tool call (answered ones first, then the open one), placed right after it.
 * @param {any[]} messages @param {(callRef: string) => HTMLElement[]} cardsFor
 * @param {string} [writer] who wrote the user messages ("You" when it is the viewer)
 */
export function historyNodes(messages, cardsFor, writer = "You") {
  /** @type {HTMLElement[]} */
  const nodes = [];
  for (const message of messages) {
    for (const part of message.parts) {
      if (part.kind === "text" && part.text) {
        nodes.push(message.role === "user" ? userMessage(part.text, writer) : modelMessage(part.text));
      } else if (part.kind === "tool_request") {
        nodes.push(activity("call", part.name, part.input, false, part.ref));
        const cards = cardsFor(part.ref);
        if (cards.length) nodes.push(h("div", { class: "turn-cards" }, ...cards));
      } else if (part.kind === "tool_response") {
        nodes.push(activity("result", part.name, part.output, part.is_error));
      }
    }
  }
  return nodes;
}

/**
 * A note saying the agent waits for other answers before it goes on.
 * @param {any[]} waiting the pauses still open (with views) @param {(key: string) => void} show
 */
export function waitingNote(waiting, show) {
  const one = waiting.length === 1;
  return h("div", { class: "waiting-note", role: "status", dataset: { keys: waiting.map((p) => pauseKey(p)).join(" ") } },
    h("strong", { text: "Recorded. " }),
    one ? "The agent goes on once the other pause is answered: " : `The agent goes on once the ${waiting.length} other pauses are answered: `,
    ...waiting.map((pause, i) => [i ? ", " : "",
      h("button", { type: "button", class: "link-button", onclick: () => show(pauseKey(pause)),
        text: pause.view ? pause.view.title : pause.name })]).flat(),
    ".");
}

// A turn as it streams: tool activity, then the model's text growing in place, then any cards.
// The text bubble is laid out before the first word arrives (a typing indicator holds its line),
// so streaming never moves what is above it.
export class TurnView {
  /** @param {HTMLElement} log */
  constructor(log) {
    this.log = log;
    this.el = h("div", { class: "turn", "aria-busy": "true" });
    this.activityList = h("div", { class: "turn-activity" });
    this.body = h("div", { class: "msg-body" }, h("span", { class: "typing", "aria-label": "The agent is working" },
      h("span"), h("span"), h("span")));
    this.bubble = h("div", { class: "msg msg-model streaming" }, h("div", { class: "msg-role", text: "Agent" }), this.body);
    this.status = h("p", { class: "turn-status muted", "aria-live": "off" });
    this.cards = h("div", { class: "turn-cards" });
    this.el.append(this.activityList, this.bubble, this.status, this.cards);
    this.text = "";
    log.append(this.el);
  }

  /** @param {any} chunk */
  chunk(chunk) {
    switch (chunk.kind) {
      case "text":
        if (!this.text) this.body.textContent = "";
        this.text += chunk.text;
        this.body.append(chunk.text);
        this.status.textContent = "";
        break;
      case "tool_call_delta":
        if (chunk.name) this.status.textContent = `Preparing ${chunk.name}…`;
        break;
      case "tool_request":
        this.activityList.append(activity("call", chunk.name, chunk.input, false, chunk.ref));
        this.status.textContent = `Running ${chunk.name}…`;
        break;
      case "tool_progress":
        this.status.textContent = `${chunk.name}: ${preview(chunk.data)}`;
        break;
      case "tool_result":
        this.activityList.append(activity("result", chunk.name, chunk.output, chunk.is_error));
        this.status.textContent = "";
        break;
      default:
        break;
    }
  }

  /** @param {{el: HTMLElement}} card */
  addCard(card) {
    this.cards.append(card.el);
  }

  /** @param {HTMLElement} node */
  note(node) {
    this.el.append(node);
  }

  /**
   * The turn ended: keep the text, or drop the empty bubble.
   * @param {any} response @param {string} [error]
   */
  finish(response, error) {
    this.el.setAttribute("aria-busy", "false");
    this.bubble.classList.remove("streaming");
    this.status.textContent = "";
    if (!this.text && response && response.message) {
      const text = response.message.parts.filter((/** @type {any} */ p) => p.kind === "text").map((/** @type {any} */ p) => p.text).join("");
      if (text) { this.text = text; this.body.textContent = text; }
    }
    if (!this.text) this.bubble.remove();
    if (error) this.el.append(h("p", { class: "turn-error", role: "alert", text: error }));
    else if (response && response.error) this.el.append(h("p", { class: "turn-error", role: "alert", text: response.error }));
  }
}

/**
 * Under each call a policy decided, who decided it: a grant names the person who gave it ("Approved
 * by alice's grant (given at 14:03:12)"), a rule its name. Calls already marked are left alone.
 * @param {HTMLElement} log @param {any[]} entries the session's audit trail
 */
export function markPolicyDecisions(log, entries) {
  for (const call of log.querySelectorAll(".activity-call[data-ref]")) {
    const ref = /** @type {HTMLElement} */ (call).dataset.ref;
    const next = call.nextElementSibling;
    if (next && next.classList.contains("activity-approved")) continue;
    const entry = entries.find((e) => e.call_ref === ref && e.via === "policy" && (e.decision === "approve" || e.decision === "deny"));
    if (!entry) continue;
    let text;
    if (entry.rule) text = `${entry.decision === "deny" ? "Denied" : "Approved"} by the rule “${entry.rule}”`;
    else {
      const given = entries.find((e) => e.decision === "grant" && e.grant === entry.grant);
      text = `Approved by ${entry.principal || "someone"}'s grant${given ? ` (given at ${localTime(given.at)})` : ""}`;
    }
    call.after(h("p", { class: "activity-approved", text }));
  }
}
