// @ts-check
// An approval link's page (<console>/#link=<token>): the one card a notification is about — the
// same card and confirmation as the console, no chat, no inbox. Opening the link decides
// nothing (mail scanners open links): the person, signed in, decides on the card, and the
// answer goes through the ordinary answer routes with `"link": <token>` added, so the server
// records that the decision came through the link.
//
// GET /v1/links/{token} says what the link is about: {"state": "open" | "used" | "expired" |
// "superseded", "agent", "session_id", "pause" (a pending interrupt with its view), "message"}.
// Any state but "open" is said in words, with no buttons.

import { Api, ApiError, explain, newKey } from "./api.js";
import { InterruptCard } from "./cards.js";
import { cardStates } from "./cardstate.js";
import { pauseKey } from "./decisions.js";
import { localTime, shortId } from "./dom.js";

const $ = (/** @type {string} */ id) => /** @type {HTMLElement} */ (document.getElementById(id));
/** Refusals that mean the pause moved on while the page was open: the page is shown afresh. */
const MOVED_ON = new Set(["link_used", "link_expired", "link_superseded", "already_resolved", "interrupt_expired"]);

/** @type {Record<string, string>} */
const CLOSED = {
  used: "This link was used already: the request it is about has been answered. Nothing more can be decided here.",
  expired: "This link has expired: it can no longer be used to answer. Nothing was decided through it.",
  superseded: "A newer request replaced the one this link is about: this link no longer answers anything.",
};

/**
 * Show the link's page for `token`, as `principal` sees it.
 * @param {Api} api @param {string} token @param {string} principal
 * @param {(agent: string) => Promise<any>} agentInfo the agent's description (its tools)
 */
export async function showLink(api, token, principal, agentInfo) {
  $("link-page").hidden = false;
  $("link-card").replaceChildren();
  $("link-context").textContent = "";
  say("Looking up this approval request…");
  let link;
  try {
    link = await api.get(`/v1/links/${encodeURIComponent(token)}`);
  } catch (error) {
    if (error instanceof ApiError && error.code === "invalid_link") {
      say("This approval link is not valid here: it may be cut short, altered, or from another server. Nothing was decided.");
    } else if (error instanceof ApiError && error.status === 404) {
      say("This approval link is not known here: it may be mistyped, or from another server. Nothing was decided.");
    } else if (error instanceof ApiError && error.status === 403) {
      say(`You are signed in as ${principal}, who may not decide this request. Nothing was decided.`);
    } else if (!(error instanceof ApiError && error.status === 401)) {
      say(`${explain(error)} Nothing was decided.`);
    }
    return;
  }
  const pause = link.pause || null;
  const view = pause && pause.view;
  $("link-context").textContent = context(link, pause);
  if (link.state !== "open" || !pause) {
    $("link-page").dataset.state = link.state;
    $("link-title").textContent = view ? `An approval request: “${view.title}”` : "An approval request";
    const ours = CLOSED[link.state] || "This link does not answer anything any more. Nothing was decided.";
    say(link.message && link.message !== ours ? `${ours} ${link.message}` : ours);
    return;
  }
  $("link-title").textContent = "An approval request for you";
  $("link-page").dataset.state = "open";
  say("Decide on it below: nothing happens until you confirm on the card.");
  const info = await agentInfo(link.agent);
  const tool = info.tools.find((/** @type {any} */ t) => t.name === pause.name) || null;
  const sent = new Set();
  const session = `/v1/agents/${encodeURIComponent(link.agent)}/sessions/${encodeURIComponent(link.session_id)}`;
  const card = new InterruptCard(pause, tool, {
    answer: async (c, action, body) => {
      const key = newKey();
      sent.add(key);
      const path = `${session}/interrupts/${encodeURIComponent(c.pause.ref)}/${action}`;
      try {
        await api.post(path, { ...body, pause_id: c.pause.pause_id, link: token }, { idempotencyKey: key });
      } catch (error) {
        if (error instanceof ApiError && error.status === 401) return;
        if (error instanceof ApiError && MOVED_ON.has(error.code)) {
          await showLink(api, token, principal, agentInfo); // what the link is now: used, expired, superseded
          return;
        }
        throw new Error(`${explain(error)} Nothing was decided.`);
      }
      c.setBusy(false);
      await settle(api, session, c, principal, sent);
    },
    validate: (toolName, kind, value) => api.post(
      `/v1/agents/${encodeURIComponent(link.agent)}/tools/${encodeURIComponent(toolName)}/validate`, { [kind]: value }),
    expired: () => say("Its time ran out: it can no longer be answered. Nothing was decided through this link."),
    confirmAll: () => false,
    canAnswer: true,
    principal,
    asker: { who: (pause.approval && pause.approval.requested_by) || null, at: pause.paused_at || null },
  });
  $("link-card").replaceChildren(card.el);
}

/**
 * After an answer: the card as the session's events now say (decided, or counted and waiting
 * for others), and what that means for the person.
 * @param {Api} api @param {string} session @param {InterruptCard} card @param {string} principal @param {Set<string>} sent
 */
async function settle(api, session, card, principal, sent) {
  const [detail, { entries }] = await Promise.all([api.get(session), api.get(session + "/audit")]);
  const key = pauseKey(card.pause);
  const states = cardStates([key], detail, entries, {
    principal, now: Date.now(), ours: (e) => sent.has(e.idempotency_key), seenOpen: () => true,
  });
  const state = states.get(key);
  card.apply(state);
  if (!state) return;
  if (state.kind === "counted") say("Your approval is counted; the others decide now. You can close this tab.");
  else if (state.elsewhere) say("Someone answered it first: nothing was decided through this link. You can close this tab.");
  else say("Recorded. You can close this tab.");
}

/** @param {string} text */
function say(text) {
  $("link-message").textContent = text;
}

/** "bankingAgent · asked by alice at 14:03:12 · session 3fa2b1c4…" @param {any} link @param {any} pause */
function context(link, pause) {
  const asker = pause && pause.approval && pause.approval.requested_by;
  const at = pause && pause.paused_at;
  return [link.agent, asker ? `asked by ${asker}${at ? ` at ${localTime(at)}` : ""}` : "",
    link.session_id ? `session ${shortId(link.session_id)}` : ""].filter(Boolean).join(" · ");
}
