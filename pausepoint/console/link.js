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
//
// While the page is open, its card follows its pause as the console's cards do: reading the
// link takes the right to answer the session, which takes the right to see it, so the person's
// own credentials read the session's events from the feed (GET /v1/feed); each event of the
// session reads the session again, and the card and the words above it show its state
// (cardstate.js) — approvals counted by others, an answer given elsewhere, a cancel, an expiry.
// Its countdown ticks every second. A call that paused again once its pause was answered makes
// the link superseded: the page then says what GET /v1/links/{token} and a reload say — a new
// request waits — unless the answer was this person's own (it stands, and the new request waits).
//
// An answer whose reply was lost may have been decided: the page never says it was not. It is
// sent again under the same idempotency key once the server answers (reach.js, as the console's
// cards do), and the card then shows what the server holds.

import { Api, ApiError, explain, newKey, unreachable } from "./api.js";
import { InterruptCard } from "./cards.js";
import { cardStates } from "./cardstate.js";
import { pauseKey } from "./decisions.js";
import { localTime, shortId } from "./dom.js";
import { sendAgainWhenBack } from "./reach.js";

const $ = (/** @type {string} */ id) => /** @type {HTMLElement} */ (document.getElementById(id));
/** Refusals that mean the pause moved on while the page was open: the page is shown afresh. */
const MOVED_ON = new Set(["link_used", "link_expired", "link_superseded", "already_resolved", "interrupt_expired"]);
/** How often (ms), and how many times at most, a pause whose time ran out is read again until
 * the server's sweep settles it. */
const EXPIRED_LOOK = 2000;
const EXPIRED_LOOKS = 30;

/** @type {Record<string, string>} */
const CLOSED = {
  used: "This link was used already: the request it is about has been answered. Nothing more can be decided here.",
  expired: "This link has expired: it can no longer be used to answer. Nothing was decided through it.",
  superseded: "A newer request replaced the one this link is about: this link no longer answers anything.",
};

/** @type {LinkFollower | null} what the page follows now (stopped when it is shown afresh) */
let following = null;

/**
 * Show the link's page for `token`, as `principal` sees it.
 * @param {Api} api @param {string} token @param {string} principal
 * @param {(agent: string) => Promise<any>} agentInfo the agent's description (its tools)
 * @param {import("./reach.js").Reach} reach what waits for the server (an answer whose reply was lost)
 */
export async function showLink(api, token, principal, agentInfo, reach) {
  if (following) following.stop();
  following = null;
  $("link-page").hidden = false;
  $("link-card").replaceChildren();
  $("link-context").textContent = "";
  say("Looking up this approval request…");
  const link = await lookUp(api, token, principal);
  if (!link) return;
  const pause = link.pause || null;
  $("link-context").textContent = context(link, pause);
  if (link.state !== "open" || !pause) {
    showClosed(link, pause);
    return;
  }
  $("link-title").textContent = "An approval request for you";
  $("link-page").dataset.state = "open";
  const info = await agentInfo(link.agent);
  const tool = info.tools.find((/** @type {any} */ t) => t.name === pause.name) || null;
  const follower = new LinkFollower(api, reach, token, principal, link,
    () => showLink(api, token, principal, agentInfo, reach));
  follower.card = new InterruptCard(pause, tool, {
    answer: (c, action, body) => follower.answer(c, action, body),
    validate: (toolName, kind, value) => api.post(
      `/v1/agents/${encodeURIComponent(link.agent)}/tools/${encodeURIComponent(toolName)}/validate`, { [kind]: value }),
    expired: () => follower.expired(),
    confirmAll: () => false,
    canAnswer: true,
    principal,
    asker: { who: (pause.approval && pause.approval.requested_by) || null, at: pause.paused_at || null },
  });
  $("link-card").replaceChildren(follower.card.el);
  following = follower;
  follower.show({ interrupts: [pause] }, []); // as the link says it is now: open, or counted
  follower.start();
}

/**
 * What the link points at, or null (said on the page) when it cannot be read.
 * @param {Api} api @param {string} token @param {string} principal
 */
async function lookUp(api, token, principal) {
  try {
    return await api.get(`/v1/links/${encodeURIComponent(token)}`);
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
    return null;
  }
}

/** A link that answers nothing any more, in words, with no buttons. @param {any} link @param {any} pause */
function showClosed(link, pause) {
  const view = pause && pause.view;
  $("link-card").replaceChildren();
  $("link-page").dataset.state = link.state;
  $("link-title").textContent = view ? `An approval request: “${view.title}”` : "An approval request";
  const ours = CLOSED[link.state] || "This link does not answer anything any more. Nothing was decided.";
  say(link.message && link.message !== ours ? `${ours} ${link.message}` : ours);
}

/**
 * The open link's card, following its pause: the session's events from the feed, the countdown
 * every second, and this page's own answers.
 */
class LinkFollower {
  /**
   * @param {Api} api @param {import("./reach.js").Reach} reach @param {string} token @param {string} principal
   * @param {any} link GET /v1/links/{token} @param {() => Promise<void>} reshow shows the link afresh (it no
   *   longer answers its pause)
   */
  constructor(api, reach, token, principal, link, reshow) {
    this.api = api;
    this.reach = reach;
    this.token = token;
    this.principal = principal;
    this.link = link;
    this.reshow = reshow;
    this.session = `/v1/agents/${encodeURIComponent(link.agent)}/sessions/${encodeURIComponent(link.session_id)}`;
    /** @type {InterruptCard} */
    this.card = /** @type {InterruptCard} */ (/** @type {unknown} */ (null));
    /** @type {Set<string>} idempotency keys of the answers this page sent */
    this.sent = new Set();
    this.reads = 0; // bumped by each read of the session: an older reply is dropped
    this.stopped = false;
    /** @type {{stop: () => void} | null} */
    this.feed = null;
    /** @type {ReturnType<typeof setInterval> | undefined} */
    this.clock = undefined;
    /** @type {ReturnType<typeof setTimeout> | undefined} the next look at a pause whose time ran out */
    this.expiryLook = undefined;
    this.expiryLooks = 0;
    /** what this page's answer waits under in `reach` while the server is out of reach */
    this.waitName = `link:${pauseKey(link.pause)}`;
  }

  start() {
    this.clock = setInterval(() => { if (this.card.open) this.card.tick(Date.now()); }, 1000);
    this.feed = this.api.feed((_name, data) => {
      if (data && data.agent === this.link.agent && data.session_id === this.link.session_id) this.news();
    }, (state) => {
      if (state === "live") this.news(); // following from now: read what happened before
      else if (state === "unauthorized") this.stop(); // signed out (said by the console): nothing more moves
    });
  }

  stop() {
    this.stopped = true;
    clearInterval(this.clock);
    clearTimeout(this.expiryLook);
    if (this.feed) this.feed.stop();
    this.reach.drop(this.waitName); // the link is shown afresh (or signed out): it answers nothing now
    this.reach.drop(`read:${this.waitName}`);
  }

  /** Something happened to the session: read it again (unless this page's own answer is under way). */
  news() {
    if (!this.card.answering) this.refresh();
  }

  /** Read the session and its audit trail; show what they say of the card's pause. */
  async refresh() {
    const read = ++this.reads;
    let detail, entries;
    try {
      [detail, { entries }] = await Promise.all([this.api.get(this.session), this.api.get(this.session + "/audit")]);
    } catch {
      return; // out of reach, or signed out (said by the console): the next news reads it again
    }
    if (read !== this.reads || this.stopped) return;
    const state = this.show(detail, entries);
    if (state && state.kind !== "answered") return;
    // Answered, or gone unanswered: the call may have paused again since (the link superseded).
    const again = await this.askedAgain();
    if (read !== this.reads || this.stopped) return;
    if (again && !(state && ownAnswer(state, this.principal))) await this.reshow(); // as a reload says it
    else if (state) say(stateWords(state, this.principal, again));
  }

  /**
   * Show the card's state as `detail` and `entries` give it, and what it means for the person (an
   * answer's words once the link's state is known: `refresh`); undefined when they give none (the
   * pause is neither open nor settled in what was read).
   * @param {{interrupts: any[]}} detail @param {any[]} entries
   */
  show(detail, entries) {
    const key = pauseKey(this.card.pause);
    const state = cardStates([key], detail, entries, {
      principal: this.principal, now: Date.now(), ours: (e) => this.sent.has(e.idempotency_key), seenOpen: () => true,
    }).get(key);
    if (!state) return undefined;
    this.card.apply(state);
    if (this.card.el.dataset.state === "expiring") this.expired();
    else if (state.kind === "open" && this.reach.waiting.has(this.waitName)) say(WAITING);
    else if (state.kind !== "answered") say(stateWords(state, this.principal, false));
    return state;
  }

  /** Whether the call paused again since the link's pause (GET /v1/links says "superseded"); false when unknown. */
  async askedAgain() {
    try {
      const now = await this.api.get(`/v1/links/${encodeURIComponent(this.token)}`);
      return now.state === "superseded";
    } catch {
      return false; // the next news reads it again
    }
  }

  /** Its time ran out: say so, and read it again until the server's sweep settles it. */
  expired() {
    say("Its time ran out: it can no longer be answered. Nothing was decided through this link.");
    if (this.expiryLook || this.expiryLooks++ >= EXPIRED_LOOKS) return;
    this.expiryLook = setTimeout(async () => {
      this.expiryLook = undefined;
      if (this.stopped || this.card.el.dataset.state !== "expiring") return;
      await this.refresh();
    }, EXPIRED_LOOK);
  }

  /**
   * The card's answer, through the link, with an idempotency key of its own (a retry gets the
   * first outcome, never a second decision).
   * @param {InterruptCard} card @param {"approve" | "respond" | "deny"} action @param {any} body
   */
  async answer(card, action, body) {
    const key = newKey();
    this.sent.add(key);
    await this.deliver(card, action, body, key);
  }

  /**
   * Send the answer under `key`; a lost reply is sent again under it once the server answers.
   * @param {InterruptCard} card @param {"approve" | "respond" | "deny"} action @param {any} body @param {string} key
   */
  async deliver(card, action, body, key) {
    const path = `${this.session}/interrupts/${encodeURIComponent(card.pause.ref)}/${action}`;
    try {
      await this.api.post(path, { ...body, pause_id: card.pause.pause_id, link: this.token }, { idempotencyKey: key });
    } catch (error) {
      if (unreachable(error)) { // it may have been decided: never said otherwise
        say(WAITING);
        sendAgainWhenBack(this.reach, card, action,
          { name: this.waitName, resend: () => this.deliver(card, action, body, key), reread: () => this.refresh() });
        return;
      }
      if (error instanceof ApiError && error.status === 401) return;
      if (error instanceof ApiError && MOVED_ON.has(error.code)) {
        await this.reshow(); // what the link is now: used, expired, superseded
        return;
      }
      // a refusal (4xx) decided nothing; a server's failure may have come after it decided
      const refused = error instanceof ApiError && error.status >= 400 && error.status < 500;
      throw new Error(refused ? `${explain(error)} Nothing was decided.` : explain(error));
    }
    card.setBusy(false);
    await this.refresh();
  }
}

/** Said above a card whose answer waits for the server (it may have been decided already). */
const WAITING = "The server did not answer: the card below says what becomes of your answer.";

/**
 * Whether the card's answer was this person's: given on this page, or their approval counted in
 * a quorum others completed. @param {import("./cardstate.js").CardState} state @param {string} principal
 */
function ownAnswer(state, principal) {
  return !state.elsewhere || state.approvers.includes(principal);
}

/**
 * What the card's state means for the person who opened the link; `again`: the call paused again
 * since (a new request waits for them).
 * @param {import("./cardstate.js").CardState} state @param {string} principal @param {boolean} again
 */
function stateWords(state, principal, again) {
  const theirs = state.approvers.includes(principal);
  const done = again ? "The agent asked again: the new request is in your inbox." : "You can close this tab.";
  switch (state.kind) {
    case "open":
      return "Decide on it below: nothing happens until you confirm on the card.";
    case "counted":
      return "Your approval is counted; the others decide now. You can close this tab.";
    case "expiring":
      return "Its time ran out: it can no longer be answered. Nothing was decided through this link.";
    case "answered":
      if (!state.elsewhere) return `Recorded. ${done}`;
      return theirs ? `The others completed the approvals: your approval counted. ${done}`
        : `Someone answered it first: nothing was decided through this link. ${done}`;
    case "cancelled":
      return "It was cancelled: it can no longer be answered. You can close this tab.";
    case "expired":
      return "Its time ran out: nobody answered in time, and the expiry decided. You can close this tab.";
  }
}

/** @param {string} text */
function say(text) {
  const message = $("link-message");
  if (message.textContent !== text) message.textContent = text; // the same news is not said twice
}

/** "bankingAgent · asked by alice at 14:03:12 · session 3fa2b1c4…" @param {any} link @param {any} pause */
function context(link, pause) {
  const asker = pause && pause.approval && pause.approval.requested_by;
  const at = pause && pause.paused_at;
  return [link.agent, asker ? `asked by ${asker}${at ? ` at ${localTime(at)}` : ""}` : "",
    link.session_id ? `session ${shortId(link.session_id)}` : ""].filter(Boolean).join(" · ");
}
