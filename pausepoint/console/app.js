// @ts-check
// The console: sign in, pick an agent, chat, answer pauses, watch the inbox and the audit trail.
//
// The URL fragment names what is shown: #agent=<name>&session=<id>, or #link=<token> for the one
// card an approval link is about (link.js). A demo or a link may add token=<token>: it is moved
// to sessionStorage (this tab only) and removed from the address bar at once; a token other than
// the tab's takes its place (the person is told). Where the server signs people in through an
// OpenID Connect provider, "Sign in with <provider>" goes there and back (signin.js).
//
// Focus belongs to the person: the console never moves it to a card. Typing while nothing in
// particular has focus (or a card with nothing left to decide) goes to the composer, and so does
// focus a decision leaves behind; cards take shortcuts only once selected (cards.js).
// Every card's state comes from the session's events (cardstate.js), read again after anything
// happens to the session: this page's answer, the feed's news, a reload.

import { Api, ApiError, apiBase, explain, newKey, sendableToken, unreachable } from "./api.js";
import { InterruptCard } from "./cards.js";
import { cardStates, settledBy } from "./cardstate.js";
import { pauseKey } from "./decisions.js";
import { TurnView, historyNodes, markPolicyDecisions, userMessage, waitingNote } from "./conversation.js";
import { h, shortId } from "./dom.js";
import { Inbox } from "./inbox.js";
import { showLink } from "./link.js";
import { expiresText, renderAudit, renderSessions } from "./lists.js";
import { Reach, sendAgainWhenBack } from "./reach.js";
import { SignInError, expiresAt, finishSignIn, isReturn, loadProvider, offerProvider, readClaims, startSignIn } from "./signin.js";

const TOKEN_KEY = "pausepoint.token";
/** What can name a session (as the server checks a caller's id): anything else is no session. */
const SESSION_ID = /^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$/;
const SWITCHED_KEY = "pausepoint.switchedFrom";
const CONFIRM_KEY = "pausepoint.confirmAll";
const $ = (/** @type {string} */ id) => /** @type {HTMLElement} */ (document.getElementById(id));

const state = {
  api: /** @type {Api} */ (/** @type {unknown} */ (null)),
  principal: "",
  /** @type {string[]} */
  agents: [],
  /** @type {Map<string, any>} agent name -> GET /v1/agents/{agent} */
  info: new Map(),
  /** @type {string | null} */
  agent: null,
  /** @type {string | null} */
  sessionId: null,
  /** @type {Map<string, InterruptCard>} pause key -> the card of this session's pause */
  cards: new Map(),
  /** @type {Set<string>} idempotency keys of the answers this page sent */
  sent: new Set(),
  /** @type {Set<string>} pause keys this page showed open (an answer from elsewhere is news) */
  seen: new Set(),
  /** @type {{session: any, interrupts: any[]} | null} the session as last read */
  detail: null,
  /** @type {any[]} its audit trail as last read */
  entries: [],
  busy: false,
  signedOut: false,
  /** @type {import("./signin.js").Provider | null} the provider the server signs people in through */
  provider: null,
  /** @type {{stop: () => void} | null} */
  feed: null,
  view: 0, // bumped whenever another session is shown: late replies for an old one are dropped
  canSend: true,
  canAnswer: true,
  /** @type {Set<string>} the open pauses a screen reader was told of (this session's) */
  announced: new Set(),
  missing: false, // what the route names is not there (an unknown agent, an id no session can have)
};

const inbox = new Inbox({ list: $("inbox"), empty: $("inbox-empty"), count: $("inbox-count"), filters: $("inbox-filters") },
  () => currentKey());
const reach = new Reach($("offline"));

// -- start ------------------------------------------------------------------------------------

function route() {
  const params = new URLSearchParams(location.hash.slice(1));
  return { token: params.get("token"), agent: params.get("agent"), session: params.get("session"), link: params.get("link") };
}

/** The fragment without its token. */
function hashWithoutToken() {
  const params = new URLSearchParams(location.hash.slice(1));
  params.delete("token");
  const rest = params.toString();
  return rest ? "#" + rest : location.pathname + location.search;
}

/** @param {string | null} agent @param {string | null} session @param {{replace?: boolean}} [options] */
function setRoute(agent, session, { replace = false } = {}) {
  const params = new URLSearchParams();
  if (agent) params.set("agent", agent);
  if (session) params.set("session", session);
  const hash = "#" + params.toString();
  if (replace) history.replaceState(null, "", hash);
  else if (location.hash !== hash) location.hash = hash;
}

async function boot() {
  const { token } = route();
  if (token) {
    const before = sessionStorage.getItem(TOKEN_KEY);
    if (before && before !== token) sessionStorage.setItem(SWITCHED_KEY, "another sign-in");
    sessionStorage.setItem(TOKEN_KEY, token);
    history.replaceState(null, "", hashWithoutToken());
  }
  // Until someone is signed in, a token put in the address bar is tried in place of the last
  // (once signed in, wireUp's listener takes the link's identity instead).
  window.addEventListener("hashchange", () => {
    const { token: next } = route();
    if (wired || !next) return;
    history.replaceState(null, "", hashWithoutToken());
    signIn(next);
  });
  $("signin-form").addEventListener("submit", (e) => {
    e.preventDefault();
    signIn(/** @type {HTMLInputElement} */ ($("token-input")).value.trim());
  });
  const { provider, problem } = await loadProvider(apiBase());
  state.provider = provider;
  offerProvider(provider, problem, toProvider);
  if (isReturn()) {
    try {
      sessionStorage.setItem(TOKEN_KEY, await finishSignIn(provider));
    } catch (error) {
      return showSignIn(error instanceof SignInError ? error.message : explain(error));
    }
  }
  const saved = sessionStorage.getItem(TOKEN_KEY);
  if (saved) await signIn(saved);
  else if (route().link) showSignIn("", "Sign in to answer this approval request. Opening its link decided nothing.");
  else showSignIn();
}

/** To the provider to sign in, and back to what is shown now. */
function toProvider() {
  if (!state.provider) return;
  const hash = hashWithoutToken();
  startSignIn(state.provider, hash.startsWith("#") ? hash : "")
    .catch((error) => showSignIn(error instanceof SignInError ? error.message : explain(error)));
}

/** @param {string} [message] an error @param {string} [note] what signing in is for */
function showSignIn(message = "", note = "") {
  $("app").hidden = true;
  $("link-page").hidden = true;
  $("signin").hidden = false;
  $("signin-error").textContent = message;
  if (note) $("signin-note").textContent = note;
  $("token-input").focus();
}

/** @param {string} token */
async function signIn(token) {
  if (!token) return showSignIn("Enter a token.");
  if (!sendableToken(token)) {
    // No server could be sent it (a character an HTTP header cannot carry): a wrong token.
    sessionStorage.removeItem(TOKEN_KEY);
    return showSignIn("That token was not accepted.");
  }
  const api = new Api(token);
  let listing;
  try {
    listing = await api.get("/v1/agents");
  } catch (error) {
    sessionStorage.removeItem(TOKEN_KEY);
    const text = error instanceof ApiError && error.status === 401 ? "That token was not accepted." : explain(error);
    return showSignIn(text);
  }
  sessionStorage.setItem(TOKEN_KEY, token);
  api.onSignedOut = signedOut;
  state.api = api;
  reach.api = api;
  state.signedOut = false;
  state.principal = listing.principal || "";
  state.agents = listing.agents;
  watchExpiry(token);
  state.sessionId = null; // show the route again, as this identity sees it
  $("signin").hidden = true;
  $("signed-out").hidden = true;
  $("who").textContent = state.principal;
  $("link-who").textContent = state.principal;
  $("agent-select").replaceChildren(...state.agents.map((name) => h("option", { value: name, text: name })));
  for (const id of ["message", "send", "new-chat", "agent-select"]) /** @type {HTMLButtonElement} */ ($(id)).disabled = false;
  wireUp();
  const switched = sessionStorage.getItem(SWITCHED_KEY);
  if (switched) {
    sessionStorage.removeItem(SWITCHED_KEY);
    toast(`Signed in as ${state.principal}: the link you opened carried ${switched}.`);
  }
  if (route().link) {
    await applyRoute();
    return;
  }
  $("app").hidden = false;
  if (state.feed) state.feed.stop();
  startFeed();
  inbox.start(api, state.principal, state.agents);
  await inbox.refresh();
  await applyRoute();
}

/**
 * The server refused the token (revoked, expired): nothing more can be decided or sent here.
 * Every control goes off, the person is told, and signing in again brings them back here.
 */
function signedOut() {
  if (state.signedOut) return;
  state.signedOut = true;
  sessionStorage.removeItem(TOKEN_KEY);
  if (state.feed) state.feed.stop();
  state.feed = null;
  for (const card of state.cards.values()) card.freeze();
  for (const id of ["message", "send", "new-chat", "agent-select", "cancel-open"]) /** @type {HTMLButtonElement} */ ($(id)).disabled = true;
  closeCancel();
  $("feed-state").dataset.state = "unauthorized";
  $("feed-state").textContent = "signed out";
  $("signed-out").hidden = false;
  if (!$("link-page").hidden) {
    $("link-message").textContent = "Your sign-in is no longer accepted: the token was revoked or has expired. Nothing was decided.";
  }
}

/** @type {ReturnType<typeof setTimeout> | undefined} */
let expiryTimer;
/**
 * A token that says when it expires (a JWT's exp) is tried on the server then, and every 15 s
 * after while the server still takes it (clocks differ): once refused, the console signs out
 * and offers to sign in again, before the person acts in vain.
 * @param {string} token
 */
function watchExpiry(token) {
  clearTimeout(expiryTimer);
  const at = expiresAt(token);
  if (at === null) return;
  const check = async () => {
    if (state.signedOut || state.api.token !== token) return;
    try {
      await state.api.get("/v1/agents"); // refused: onSignedOut
    } catch {
      /* refused (signed out now), or the server is away (looked at again) */
    }
    if (!state.signedOut && state.api.token === token) expiryTimer = setTimeout(check, 15_000);
  };
  expiryTimer = setTimeout(check, Math.min(Math.max(at - Date.now(), 0) + 1000, 2 ** 31 - 1));
}

function signOut() {
  sessionStorage.removeItem(TOKEN_KEY);
  if (state.feed) state.feed.stop();
  location.hash = "";
  location.reload();
}

/**
 * A link with a token opened in this tab: the token is the link's identity. Another than the
 * tab's takes its place (after a reload, so nothing of the old identity stays); the same is
 * just taken out of the address bar.
 * @param {string} token
 */
function switchIdentity(token) {
  history.replaceState(null, "", hashWithoutToken());
  if (state.api && token === state.api.token && !state.signedOut) {
    applyRoute();
    return;
  }
  sessionStorage.setItem(TOKEN_KEY, token);
  if (state.principal) sessionStorage.setItem(SWITCHED_KEY, `another sign-in than ${state.principal}'s`);
  location.reload();
}

let wired = false;
function wireUp() {
  if (wired) return;
  wired = true;
  window.addEventListener("hashchange", () => {
    const { token } = route();
    if (token) switchIdentity(token);
    else applyRoute();
  });
  for (const link of document.querySelectorAll(".skip-link")) link.addEventListener("click", skip);
  $("agent-select").addEventListener("change", (e) => setRoute(/** @type {HTMLSelectElement} */ (e.target).value, null));
  $("new-chat").addEventListener("click", () => setRoute(state.agent, null));
  $("sign-out").addEventListener("click", signOut);
  $("sign-in-again").addEventListener("click", () => {
    const claims = readClaims(state.api.token);
    if (state.provider && claims && claims.iss === state.provider.issuer) toProvider(); // signed in there: again there
    else showSignIn("", "Sign in again to go on where you were.");
  });
  const confirmAll = /** @type {HTMLInputElement} */ ($("confirm-all"));
  confirmAll.checked = localStorage.getItem(CONFIRM_KEY) === "true";
  confirmAll.addEventListener("change", () => localStorage.setItem(CONFIRM_KEY, String(confirmAll.checked)));
  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    $("message").focus(); // clicking Send leaves the person in the composer, not on a button
    send();
  });
  const box = /** @type {HTMLTextAreaElement} */ ($("message"));
  box.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); send(); }
  });
  box.addEventListener("input", () => autosize(box));
  $("cancel-open").addEventListener("click", openCancel);
  $("cancel-back").addEventListener("click", closeCancel);
  $("cancel-form").addEventListener("submit", (e) => { e.preventDefault(); cancelPending(); });
  $("cancel-form").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && e.target instanceof HTMLInputElement) e.preventDefault(); // click to cancel
    if (e.key === "Escape") closeCancel();
  });
  document.addEventListener("keydown", globalKeys);
  setInterval(tick, 1000);
}

/**
 * The skip links move focus without touching the address bar (the session stays shown): to the
 * conversation, or to what waits for the person — the first open card, else the inbox.
 * @param {Event} e
 */
function skip(e) {
  e.preventDefault();
  const to = /** @type {HTMLElement} */ (e.currentTarget).dataset.skip;
  if (to === "main") {
    $("main").focus();
    return;
  }
  const card = openCards()[0];
  if (card) {
    card.el.scrollIntoView({ block: "center" });
    card.el.focus({ preventScroll: true });
  } else {
    const first = $("inbox").querySelector("a");
    (first instanceof HTMLElement ? first : $("inbox")).focus();
  }
}

/** Whether a card's element still waits for a decision (open, or counted and open to more). @param {HTMLElement} el */
function actionable(el) {
  return el.dataset.state === "open" || el.dataset.state === "counted";
}

/** @param {HTMLTextAreaElement} box */
function autosize(box) {
  box.style.height = "auto";
  box.style.height = Math.min(box.scrollHeight, 200) + "px";
}

/**
 * Keys pressed while nothing in particular has focus: "/" or any character goes to the composer
 * (stray typing lands there, never on a card or a navigation shortcut).
 * @param {KeyboardEvent} e
 */
function globalKeys(e) {
  const target = e.target;
  if (e.ctrlKey || e.metaKey || e.altKey || e.isComposing) return;
  if (target instanceof HTMLInputElement || target instanceof HTMLTextAreaElement || target instanceof HTMLSelectElement) return;
  // (a card that has nothing left to decide takes no keys: what is typed on it goes to the composer)
  const settledCard = target instanceof HTMLElement && target.matches(".card") && !actionable(target);
  if (!settledCard && target instanceof Element
    && target.closest(".card, button, a, summary, details, form, [contenteditable]")) return;
  if ($("composer").hidden || $("app").hidden || state.signedOut) return;
  if (e.key === "/") {
    e.preventDefault();
    $("message").focus();
  } else if (e.key.length === 1) {
    $("message").focus(); // the character is typed there
  }
}

// -- agents and sessions ------------------------------------------------------------------------

/** @param {string} name */
async function agentInfo(name) {
  if (!state.info.has(name)) state.info.set(name, await state.api.get(`/v1/agents/${encodeURIComponent(name)}`));
  return state.info.get(name);
}

/** @param {string} agent @param {string} sessionId */
function sessionPath(agent, sessionId) {
  return `/v1/agents/${encodeURIComponent(agent)}/sessions/${encodeURIComponent(sessionId)}`;
}

/**
 * Cancelling a session's open pauses is conversing in it (the server takes it from those who may
 * send, as the composer is): offered only to someone who may both answer and send.
 */
function mayCancel() {
  return state.canAnswer && state.canSend && !state.signedOut;
}

/** @param {boolean} canSend @param {boolean} canAnswer @param {string} [owner] */
function setPermissions(canSend, canAnswer, owner) {
  state.canSend = canSend;
  state.canAnswer = canAnswer;
  $("composer").hidden = !canSend;
  const note = $("readonly-note");
  note.hidden = canSend;
  note.textContent = canSend ? "" : canAnswer
    ? `You may answer this session's pauses, but only ${owner || "its owner"} writes in it.`
    : `You may read this session; only ${owner || "its owner"} acts in it.`;
  if (!mayCancel()) {
    $("cancel-open").hidden = true;
    closeCancel();
  }
}

const narrow = () => matchMedia("(max-width: 760px)").matches;

async function applyRoute() {
  const { agent, session, link } = route();
  if (link) {
    $("app").hidden = true;
    if (state.feed) state.feed.stop();
    state.feed = null;
    await showLink(state.api, link, state.principal, agentInfo, reach);
    return;
  }
  if ($("app").hidden && !$("link-page").hidden) {
    location.reload(); // from a link's page back to the console: start it afresh
    return;
  }
  if (!state.agents.length) {
    $("conv-title").textContent = "No agents";
    $("conv-sub").textContent = "This server serves no agents.";
    return;
  }
  if (agent && !state.agents.includes(agent)) {
    // Never another agent in its place: the address bar names this one.
    clearShown(null, null);
    renderSessions($("recent"), $("recent-empty"), [], null);
    showMissing(`No agent “${agent}”`, `There is no agent named “${agent}” here: choose one from the list of agents.`);
    return;
  }
  const name = agent || state.agents[0];
  if (session && !SESSION_ID.test(session)) {
    // No session can have this id: the server is not asked (the id is no path to send it).
    clearShown(name, null);
    const view = state.view;
    const info = await agentInfo(name);
    if (view !== state.view) return;
    showMissing(`Session ${shortId(session)}`, info.description || "", `No session '${session}'`);
    await refreshRecent();
    markCurrent();
    return;
  }
  if (name === state.agent && session === state.sessionId && session) return;
  clearShown(name, session || null);
  if (state.missing) {
    state.missing = false;
    setPermissions(true, true); // until the session says otherwise
  }
  const info = await agentInfo(name);
  $("conv-sub").textContent = info.description || "";
  $("conv-sub").hidden = !info.description;
  if (session) await showSession(name, session);
  else {
    setPermissions(true, true);
    $("conv-title").textContent = "New conversation";
    $("log").append(h("div", { class: "log-empty" },
      h("p", { text: `Start a conversation with ${name}.` }),
      h("p", { class: "muted", text: "When one of its tools needs a person, the call pauses here as a card for you to answer." })));
    if (!narrow()) $("message").focus();
  }
  updateOpen();
  await refreshRecent();
  markCurrent();
  if (session && narrow()) {
    const first = openCards()[0]; // one column: bring what the person came for into view
    if (first) showActions(first);
  }
}

/**
 * One column: a card from its top, and its buttons on the screen too where the card is taller
 * than the screen (Approve on the first screen).
 * @param {{el: HTMLElement}} card
 */
function showActions(card) {
  card.el.scrollIntoView({ block: "start" });
  const actions = card.el.querySelector(".card-actions");
  if (actions && actions.getBoundingClientRect().bottom > innerHeight) actions.scrollIntoView({ block: "end" });
}

/**
 * Forget what was shown; show ``agent``'s session ``sessionId`` (null: a new one) next.
 * @param {string | null} agent @param {string | null} sessionId
 */
function clearShown(agent, sessionId) {
  state.view += 1;
  state.agent = agent;
  state.sessionId = sessionId;
  state.detail = null;
  state.entries = [];
  state.cards.clear();
  state.announced.clear();
  closeCancel();
  showNotice("");
  $("app").dataset.session = sessionId ? "true" : "false";
  /** @type {HTMLSelectElement} */ ($("agent-select")).value = agent || "";
  /** @type {HTMLTextAreaElement} */ ($("message")).placeholder = agent ? `Message ${agent}…` : "Write a message…";
  $("log").replaceChildren();
  renderAudit($("audit"), $("audit-empty"), []);
}

/**
 * What the route names is not there: say so where the conversation's title goes (and in the log,
 * as an unknown session is), with nothing to write into.
 * @param {string} title @param {string} sub @param {string} [problem]
 */
function showMissing(title, sub, problem) {
  state.missing = true;
  setPermissions(false, false);
  $("readonly-note").hidden = true;
  $("conv-title").textContent = title;
  $("conv-sub").textContent = sub;
  $("conv-sub").hidden = !sub;
  if (problem) $("log").replaceChildren(h("p", { class: "turn-error", role: "alert", text: problem }));
  updateOpen();
}

/**
 * Who asked for a pause and when: the person the approval names, else the one whose message
 * came last before it; the time it paused, else the time of that message.
 * @param {any} item a pending interrupt or an audit entry @param {any[]} entries @param {string} [owner]
 */
function askerOf(item, entries, owner) {
  const before = item.paused_at || item.at || null;
  const messages = entries.filter((e) => e.decision === "message" && (!before || e.at <= before));
  const message = messages[messages.length - 1];
  const who = (item.approval && item.approval.requested_by) || (message && message.principal) || owner || null;
  return { who, at: item.paused_at || (message ? message.at : null) };
}

/**
 * Show a stored session: its history with the cards of its pauses, its audit trail. While a card's
 * form is open (a confirmation, a reason, an answer), only what the session's events say is shown
 * (``show``): its cards are not made again under the person.
 * @param {string} agent @param {string} sessionId
 */
async function showSession(agent, sessionId) {
  const view = state.view;
  $("conv-title").textContent = `Session ${shortId(sessionId)}`;
  let detail, messages, entries;
  try {
    [detail, { messages }, { entries }] = await Promise.all([
      state.api.get(sessionPath(agent, sessionId)),
      state.api.get(sessionPath(agent, sessionId) + "/history"),
      state.api.get(sessionPath(agent, sessionId) + "/audit"),
    ]);
  } catch (error) {
    if (view !== state.view) return;
    if (unreachable(error)) {
      reach.queue("session", () => showSession(agent, sessionId));
      if (state.detail || state.cards.size) return; // a refresh that could not reach the server: what is shown stays
    }
    $("log").replaceChildren(h("p", { class: "turn-error", role: "alert", text: explain(error) }));
    return;
  }
  if (view !== state.view) return;
  setPermissions(detail.can_send !== false, detail.can_answer !== false, detail.session.owner);
  const info = await agentInfo(agent);
  if (view !== state.view) return;
  if ([...state.cards.values()].some((c) => c.panel || c.answering)) {
    show(detail, entries); // a card's form opened while the session was read: nothing is redrawn under it
    return;
  }
  state.cards.clear();
  const placed = new Set();
  const owner = detail.session.owner;
  // Each tool call's pauses, where the call is: the answered ones as the audit trail recorded
  // them, then the one still open. (A call the policy decided never paused: it is in the audit
  // trail and marked under the call, not a card.)
  const cardsFor = (/** @type {string} */ callRef) => {
    const cards = [];
    const settled = new Set();
    for (const entry of entries) {
      if (entry.call_ref !== callRef || entry.via === "policy" || settled.has(pauseKey(entry))) continue;
      if (!settledBy(entries, pauseKey(entry))) continue;
      settled.add(pauseKey(entry));
      const card = addCard({ name: entry.name, ref: entry.ref, pause_id: entry.pause_id, input: entry.input,
        metadata: null, view: entry.view, call_ref: entry.call_ref }, info, askerOf(entry, entries, owner));
      cards.push(card.el);
    }
    for (const pause of detail.interrupts.filter((/** @type {any} */ p) => p.call_ref === callRef)) {
      cards.push(addCard(pause, info, askerOf(pause, entries, owner)).el);
      placed.add(pauseKey(pause));
    }
    return cards;
  };
  $("log").replaceChildren(...historyNodes(messages, cardsFor, owner && owner !== state.principal ? owner : "You"));
  const rest = detail.interrupts.filter((/** @type {any} */ p) => !placed.has(pauseKey(p)));
  if (rest.length) {
    $("log").append(h("div", { class: "turn-cards" }, ...rest.map((/** @type {any} */ p) => addCard(p, info, askerOf(p, entries, owner)).el)));
  }
  show(detail, entries);
  scrollToEnd(true);
}

/** Read the session again and show every card, note and list as its events say. */
async function sync() {
  const agent = state.agent;
  const sessionId = state.sessionId;
  if (!agent || !sessionId || state.signedOut) return;
  const view = state.view;
  let detail, entries;
  try {
    [detail, { entries }] = await Promise.all([
      state.api.get(sessionPath(agent, sessionId)),
      state.api.get(sessionPath(agent, sessionId) + "/audit"),
    ]);
  } catch (error) {
    if (unreachable(error)) reach.queue("sync", sync);
    else if (error instanceof ApiError && error.code === "session_not_found" && view === state.view) gone(agent, sessionId);
    return;
  }
  if (view !== state.view) return;
  show(detail, entries);
  inbox.refreshOne(agent, sessionId, true, detail);
  await refreshRecent();
  markCurrent();
}

/**
 * The session shown is gone (deleted, or no longer readable by this person): its cards offer
 * nothing, and the inbox drops it (its read fails), as REST no longer lists it.
 * @param {string} agent @param {string} sessionId
 */
function gone(agent, sessionId) {
  for (const card of state.cards.values()) card.gone();
  updateOpen();
  inbox.refreshOne(agent, sessionId, true);
  announce("This session no longer exists.");
}

/**
 * Show what the session's events say: each card's state, the waiting notes that still wait, the
 * calls a policy decided, the audit trail, what may be cancelled.
 * @param {any} detail @param {any[]} entries
 */
function show(detail, entries) {
  state.detail = detail;
  state.entries = entries;
  const states = cardStates([...state.cards.keys()], detail, entries, {
    principal: state.principal,
    now: Date.now(),
    ours: (entry) => state.sent.has(entry.idempotency_key) || (entry.decision === "cancel" && entry.principal === state.principal),
    seenOpen: (key) => state.seen.has(key),
  });
  for (const [key, card] of state.cards) {
    card.apply(states.get(key));
    if (card.open) state.seen.add(key);
  }
  const open = new Set(detail.interrupts.map((/** @type {any} */ p) => pauseKey(p)));
  for (const note of $("log").querySelectorAll(".waiting-note")) {
    const keys = (/** @type {HTMLElement} */ (note).dataset.keys || "").split(" ").filter(Boolean);
    if (!keys.some((k) => open.has(k))) note.remove();
  }
  markPolicyDecisions($("log"), entries);
  renderAudit($("audit"), $("audit-empty"), entries);
  updateOpen();
}

// -- chatting -----------------------------------------------------------------------------------

function nearBottom() {
  const log = $("log");
  return log.scrollHeight - log.scrollTop - log.clientHeight < 80;
}

function scrollToEnd(force = false) {
  const log = $("log");
  if (force || nearBottom()) log.scrollTop = log.scrollHeight;
}

/** @param {boolean} busy */
function setBusy(busy) {
  state.busy = busy;
  /** @type {HTMLButtonElement} */ ($("send")).disabled = busy || state.signedOut;
  $("composer").setAttribute("aria-busy", busy ? "true" : "false");
}

function openCards() {
  return [...state.cards.values()].filter((c) => c.open);
}

/** The "cancel open pauses" control and the composer's notice follow what is open. */
function updateOpen() {
  const open = openCards();
  announceOpen(open);
  $("cancel-open").hidden = !(open.length && mayCancel());
  if (!open.length) {
    if (!reach.waiting.has("composer")) showNotice("");
    closeCancel();
  }
}

/** @param {string} text @param {boolean} [offerCancel] */
function showNotice(text, offerCancel = false) {
  const notice = $("composer-notice");
  notice.hidden = !text;
  const label = openCards().length === 1 ? "Cancel it to write something else…" : "Cancel them to write something else…";
  notice.replaceChildren(text, offerCancel ? h("button", { type: "button", class: "link-button", onclick: openCancel, text: label }) : "");
}

/** A new session's id, chosen here: a message sent again after a lost connection names the same session. */
function newSessionId() {
  return newKey().replace(/-/g, "");
}

async function send() {
  const box = /** @type {HTMLTextAreaElement} */ ($("message"));
  const text = box.value.trim();
  if (!text || state.busy || !state.agent || state.signedOut) return;
  const open = openCards();
  if (open.length) {
    const what = open.length === 1 ? "A pause is" : `${open.length} pauses are`;
    showNotice(`${what} waiting for an answer: the agent goes on once it has one. `, mayCancel());
    return;
  }
  if (reach.offline) {
    keepUntilBack(text);
    return;
  }
  reach.drop("composer");
  showNotice("");
  box.value = "";
  autosize(box);
  const log = $("log");
  const empty = log.querySelector(".log-empty");
  if (empty) empty.remove();
  log.append(userMessage(text));
  const sessionId = state.sessionId || newSessionId();
  const written = state.entries.filter((e) => e.decision === "message").length;
  try {
    await runTurn(sessionPath(state.agent, sessionId) + "/messages", { message: text }, null, { restoreText: text, sessionId });
  } catch (error) {
    if (unreachable(error)) keepUntilBack(text, { sessionId, written });
  }
}

/**
 * A message that could not be sent: it stays in the composer, and is sent once the server is
 * back — unless the person changed it meanwhile, or it turns out it did arrive.
 * @param {string} text @param {{sessionId: string, written: number}} [sent] where it went, if it went out
 */
function keepUntilBack(text, sent) {
  const box = /** @type {HTMLTextAreaElement} */ ($("message"));
  if (!box.value) box.value = text;
  showNotice("The console cannot reach the server: your message is kept here, and sent once it is back.");
  reach.queue("composer", async () => {
    if (box.value.trim() !== text) return showNotice("");
    if (sent && await arrived(sent.sessionId, sent.written, text)) {
      box.value = "";
      showNotice("");
      if (!state.sessionId) setRoute(state.agent, sent.sessionId);
      else await showSession(/** @type {string} */ (state.agent), sent.sessionId);
      return;
    }
    await send();
  });
}

/**
 * Whether a message whose reply broke off reached the session after all.
 * @param {string} sessionId @param {number} written messages in the session before it @param {string} text
 */
async function arrived(sessionId, written, text) {
  try {
    const { entries } = await state.api.get(sessionPath(/** @type {string} */ (state.agent), sessionId) + "/audit");
    const messages = entries.filter((/** @type {any} */ e) => e.decision === "message");
    const last = messages[messages.length - 1];
    const said = last && last.message ? last.message.parts.map((/** @type {any} */ p) => p.text || "").join("") : "";
    return messages.length > written && said === text;
  } catch {
    return false; // no such session yet: it did not arrive
  }
}

/**
 * Runs a turn (a send or an answer), streaming it into the log. Returns the response, or throws
 * the ApiError of a refusal or of a server that cannot be reached (after putting the log back as
 * it was when nothing arrived).
 * @param {string} path @param {any} body @param {string | null} key
 * @param {{restoreText?: string, answered?: string, sessionId?: string}} [options] answered: the key of
 *   the pause answered (its card says what became of it)
 */
async function runTurn(path, body, key, { restoreText, answered, sessionId } = {}) {
  const view = state.view;
  const agent = /** @type {string} */ (state.agent);
  setBusy(true);
  const turn = new TurnView($("log"));
  scrollToEnd(true);
  /** @type {any[]} */
  const pending = [];
  let response;
  try {
    response = await state.api.turn(path, body, (chunk) => {
      if (view !== state.view) return;
      if (chunk.kind === "interrupt") pending.push(chunk.interrupt);
      turn.chunk(chunk);
      scrollToEnd();
    }, { idempotencyKey: key });
  } catch (error) {
    setBusy(false);
    const refused = error instanceof ApiError && (unreachable(error) || (error.status >= 400 && error.status < 500));
    if (refused && !turn.text && !turn.activityList.childElementCount) {
      turn.el.remove(); // nothing happened (or nothing arrived): put the log back as it was
      if (restoreText !== undefined) {
        $("log").lastElementChild?.remove();
        const box = /** @type {HTMLTextAreaElement} */ ($("message"));
        if (!box.value) box.value = restoreText;
        if (!unreachable(error) && !state.signedOut) toast(explain(error));
      }
      throw error;
    }
    turn.finish(null, explain(error));
    throw error;
  } finally {
    setBusy(false);
  }
  if (view !== state.view) return response;
  if (!state.sessionId) {
    state.sessionId = response.session_id || sessionId;
    setRoute(agent, state.sessionId, { replace: true });
    $("app").dataset.session = "true";
    $("conv-title").textContent = `Session ${shortId(/** @type {string} */ (state.sessionId))}`;
  }
  turn.finish(response);
  const info = await agentInfo(agent);
  const open = response.interrupts.length ? response.interrupts : pending;
  const added = [];
  for (const pause of open) {
    if (!state.cards.has(pauseKey(pause))) {
      turn.addCard(addCard(pause, info, askerOf(pause, state.entries, state.principal)));
      added.push(pause);
    }
  }
  const others = response.interrupts.filter((/** @type {any} */ p) => pauseKey(p) !== answered);
  if (answered && response.finish_reason === "interrupted" && !turn.text && !added.length && others.length) {
    turn.note(waitingNote(others, showCard));
  }
  updateOpen();
  scrollToEnd(true);
  const waiting = added.length ? state.cards.get(pauseKey(added[0])) : undefined;
  if (waiting && narrow()) showActions(waiting);
  if (!document.activeElement || document.activeElement === document.body) {
    if (state.canSend && !narrow()) $("message").focus(); // focus was nowhere: give it back to the composer
  }
  if (!answered) await sync(); // (an answer's card reads the session once its own state is cleared)
  return response;
}

/** Scroll to a card and select it (the person asked for it). @param {string} key */
function showCard(key) {
  const card = state.cards.get(key);
  if (!card) return;
  card.el.scrollIntoView({ block: "center" });
  card.el.focus({ preventScroll: true });
}

/** @param {any} pause @param {any} info @param {{who: string | null, at: string | null}} asker */
function addCard(pause, info, asker) {
  const tool = info.tools.find((/** @type {any} */ t) => t.name === pause.name) || null;
  const card = new InterruptCard(pause, tool, {
    answer: (c, action, body) => answer(c, action, body),
    validate: (toolName, kind, value) => state.api.post(
      `/v1/agents/${encodeURIComponent(info.name)}/tools/${encodeURIComponent(toolName)}/validate`, { [kind]: value }),
    expired: (c) => watchExpired(c),
    confirmAll: () => /** @type {HTMLInputElement} */ ($("confirm-all")).checked,
    canAnswer: state.canAnswer,
    principal: state.principal,
    asker,
  });
  state.cards.set(pauseKey(pause), card); // (shown open, it is "seen": show() notes it)
  return card;
}

/**
 * An answer from a card, sent with an idempotency key of its own (a retry can never decide twice).
 * @param {InterruptCard} card @param {"approve" | "respond" | "deny"} action @param {any} body
 */
async function answer(card, action, body) {
  if (state.busy) throw new Error("Wait for the agent to finish this turn.");
  if (!state.agent || !state.sessionId) throw new Error("No session.");
  const key = newKey();
  state.sent.add(key);
  await deliver(card, action, body, key);
}

/** @param {InterruptCard} card @param {"approve" | "respond" | "deny"} action @param {any} body @param {string} key */
async function deliver(card, action, body, key) {
  const path = `${sessionPath(/** @type {string} */ (state.agent), /** @type {string} */ (state.sessionId))}/interrupts/${encodeURIComponent(card.pause.ref)}/${action}`;
  // The card's own pause: if the call paused again since, showing something else, the server
  // refuses this answer instead of applying it to what the person has not seen.
  const answered = card.pause.pause_id ? { ...body, pause_id: card.pause.pause_id } : body;
  try {
    await runTurn(path, answered, key, { answered: pauseKey(card.pause) });
  } catch (error) {
    if (unreachable(error)) {
      // The request may have reached the server before the connection broke: never say it did not.
      sendAgainWhenBack(reach, card, action,
        { name: pauseKey(card.pause), resend: () => deliver(card, action, body, key), reread: sync });
      return;
    }
    card.setBusy(false);
    if (error instanceof ApiError && error.status === 401) {
      card.freeze();
      card.setStatus("Nothing was decided: your sign-in is no longer accepted.", "error");
      return;
    }
    if (error instanceof ApiError && (error.code === "already_resolved" || error.code === "interrupt_expired"
      || error.code === "session_not_found")) {
      await sync(); // (a session gone: its cards close, and the inbox drops it)
      return;
    }
    throw new Error(explain(error));
  }
  card.setBusy(false);
  await sync();
  settleFocus(card);
}

/**
 * A decision on ``card`` is done: focus that was left on the card, or went nowhere when its
 * buttons went away, goes to the composer where the person may write (what they type next
 * lands there), else stays on the card. Focus the person moved elsewhere meanwhile stays there.
 * @param {InterruptCard} card
 */
function settleFocus(card) {
  const active = document.activeElement;
  const lost = !active || active === document.body || card.el.contains(active);
  if (!lost || card.open) return; // moved elsewhere, or the card still asks something
  if (state.canSend && !$("composer").hidden && !state.signedOut && !narrow()) $("message").focus();
  else card.el.focus({ preventScroll: true }); // its buttons are gone: keep the person where they were
}

// -- cancelling the open pauses -------------------------------------------------------------------

function openCancel() {
  const open = openCards();
  if (!open.length || !mayCancel()) return;
  $("cancel-title").textContent = open.length === 1
    ? `Cancel the open pause “${open[0].view.title}”?`
    : `Cancel the ${open.length} open pauses (${open.map((c) => `“${c.view.title}”`).join(", ")})?`;
  $("cancel-submit").textContent = open.length === 1 ? "Cancel it" : `Cancel all ${open.length}`;
  $("cancel-status").textContent = "";
  $("cancel-form").hidden = false;
  $("cancel-reason").focus();
}

function closeCancel() {
  $("cancel-form").hidden = true;
}

async function cancelPending() {
  if (!state.agent || !state.sessionId || state.busy || !mayCancel()) return;
  const reasonBox = /** @type {HTMLInputElement} */ ($("cancel-reason"));
  const reason = reasonBox.value.trim() || `cancelled by ${state.principal || "the approver"}`;
  const submit = /** @type {HTMLButtonElement} */ ($("cancel-submit"));
  const cancelling = openCards();
  submit.disabled = true;
  for (const card of cancelling) card.setBusy(true, "Cancelling…"); // the feed's news of it is ours
  try {
    await state.api.post(`${sessionPath(state.agent, state.sessionId)}/cancel`, { reason });
  } catch (error) {
    $("cancel-status").textContent = explain(error);
    for (const card of cancelling) card.setBusy(false, "");
    return;
  } finally {
    submit.disabled = false;
  }
  reasonBox.value = "";
  for (const card of cancelling) card.setBusy(false);
  closeCancel();
  await sync();
  if (state.canSend) $("message").focus();
}

/**
 * The session moved on without this page (an answer given elsewhere, an expiry, another client's
 * turn): once it is at rest (its last record ends a turn), show it again as the server has it.
 * Nothing is redrawn while the person has a card's form open.
 */
async function catchUp() {
  const view = state.view;
  const agent = state.agent;
  const sessionId = state.sessionId;
  if (!agent || !sessionId) return;
  for (let i = 0; i < 60; i++) {
    if (view !== state.view || state.busy || state.signedOut) return; // another session, or our own turn will show it
    let detail;
    try {
      detail = await state.api.get(sessionPath(agent, sessionId));
    } catch {
      return;
    }
    if (view !== state.view || state.busy) return;
    if (detail.last_response && detail.last_response.version === detail.session.version) {
      if ([...state.cards.values()].some((c) => c.panel || c.answering)) return sync();
      await showSession(agent, sessionId);
      await refreshRecent();
      markCurrent();
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

// -- expiry -----------------------------------------------------------------------------------------

function tick() {
  const now = Date.now();
  for (const card of state.cards.values()) if (card.open) card.tick(now);
  for (const node of document.querySelectorAll(".expires[data-expires]")) {
    node.textContent = expiresText(/** @type {HTMLElement} */ (node).dataset.expires || "");
  }
}

/**
 * A card's pause ran out of time: the server's expiry sweep settles it (the feed says so); until
 * then, look again every few seconds.
 * @param {InterruptCard} card
 */
function watchExpired(card) {
  const view = state.view;
  let tries = 0;
  const look = async () => {
    if (view !== state.view || tries++ > 40) return;
    if (card.el.dataset.state === "expiring") await sync();
    if (card.el.dataset.state !== "expiring") {
      if (!card.open) await catchUp(); // settled: what the agent did next (one handed on still waits)
      return;
    }
    setTimeout(look, 2000);
  };
  updateOpen();
  setTimeout(look, 1000);
}

// -- recent sessions, the feed -------------------------------------------------------------------

async function refreshRecent() {
  if (!state.agent || state.signedOut) return;
  const agent = state.agent;
  let sessions;
  try {
    ({ sessions } = await state.api.get(`/v1/agents/${encodeURIComponent(agent)}/sessions?limit=15`));
  } catch {
    return;
  }
  const recent = sessions.map((/** @type {any} */ session) => ({ agent, session }));
  renderSessions($("recent"), $("recent-empty"), recent, currentKey());
}

function currentKey() {
  return state.sessionId ? `${state.agent}/${state.sessionId}` : null;
}

function markCurrent() {
  const key = currentKey();
  for (const item of document.querySelectorAll(".session-item")) {
    const a = /** @type {HTMLElement} */ (item.querySelector("a"));
    if (/** @type {HTMLElement} */ (item).dataset.key === key) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
}

function startFeed() {
  /** @type {Record<string, string>} */
  const label = { live: "live", reconnecting: "reconnecting…", unauthorized: "signed out", connecting: "connecting…" };
  let was = "connecting";
  state.feed = state.api.feed(onFeedEvent, (s) => {
    $("feed-state").dataset.state = s;
    $("feed-state").textContent = label[s] || s;
    if (s === "live" && was === "reconnecting") {
      reach.up(); // back: send what waited, and read what was missed
      inbox.refresh();
      sync();
    } else if (s === "reconnecting" && was !== "reconnecting") {
      state.api.reachable().then((up) => { if (!up) reach.down(); }); // say so only when the server is gone
    }
    was = s;
  });
}

/** The feed's events that change what waits in a session (for whom, until when): the inbox reads it again. */
const CHANGES_WHAT_WAITS = new Set(["approval", "answer", "expiry", "escalation"]);

/**
 * The feed's news. Of the session shown, every kind (pause, answer, approval, expiry, escalation,
 * decision, grant, turn_end) is read again: whatever happened, the cards, notes and the audit
 * trail show the session as it is now. Of another session, what changes what waits.
 * @param {string} name @param {any} data
 */
async function onFeedEvent(name, data) {
  const isHere = () => data.agent === state.agent && data.session_id === state.sessionId;
  if (name === "pause") {
    await inbox.refreshOne(data.agent, data.session_id);
    const title = data.interrupt.view ? data.interrupt.view.title : data.interrupt.name;
    if (!isHere() && !state.busy) {
      toast(`New pause: ${title} (${data.agent})`);
      const item = document.querySelector(`.session-item[data-key="${CSS.escape(data.agent + "/" + data.session_id)}"]`);
      if (item) item.classList.add("is-new");
    } else if (isHere() && !state.busy && !state.cards.has(pauseKey(data.interrupt))) {
      // paused by another client while we watch: show that turn and its card (without taking focus)
      await catchUp();
    }
  } else if (!isHere()) {
    if (CHANGES_WHAT_WAITS.has(name)) await inbox.refreshOne(data.agent, data.session_id);
  } else if (!state.busy) { // (our own turn reads the session once it ends)
    await newsHere(name, data);
  }
}

/**
 * News of the session shown, other than a pause: read it again. An answer or an expiry from
 * elsewhere settles an open card, and the agent goes on: show what it did next.
 * @param {string} name @param {any} data
 */
async function newsHere(name, data) {
  if (name !== "answer" && name !== "expiry") {
    await sync(); // an approval counted, a turn's end, an escalation, a call the policy decided, a grant given or revoked
    return;
  }
  const card = state.cards.get(pauseKey(data.entry));
  const ours = state.sent.has(data.entry.idempotency_key); // this page's answer: its turn showed what followed
  const wasOpen = !ours && !!(card && (card.open || card.el.dataset.state === "expiring") && !card.answering);
  await sync();
  if (wasOpen && card && !card.open) await catchUp();
}

/** @param {string} text */
function announce(text) {
  $("announce").textContent = text;
}

/**
 * Tell a screen reader of each pause once, when it opens, in words that fit whoever reads
 * (however the card came: a turn, the feed, a reload); once nothing waits, nothing is said to.
 * @param {InterruptCard[]} open
 */
function announceOpen(open) {
  const fresh = open.filter((card) => !state.announced.has(pauseKey(card.pause)));
  for (const card of fresh) state.announced.add(pauseKey(card.pause));
  if (!open.length) announce("");
  if (!fresh.length) return;
  const titles = fresh.map((card) => card.view.title).join("; ");
  announce(state.canAnswer ? `The agent is waiting for your answer: ${titles}`
    : `The agent is waiting for an answer you may not give: ${titles}`);
}

/** @type {ReturnType<typeof setTimeout> | undefined} */
let toastTimer;
/** @param {string} text */
function toast(text) {
  const el = $("toast");
  el.textContent = text;
  el.dataset.show = "true";
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { el.dataset.show = "false"; }, 6000);
}

boot();
