// @ts-check
// The console: sign in, pick an agent, chat, answer pauses, watch the inbox and the audit trail.
//
// The URL fragment names what is shown: #agent=<name>&session=<id>. A demo may add token=<token>;
// it is moved to sessionStorage (this tab only) and removed from the address bar at once.
//
// Focus belongs to the person: the console never moves it to a card. Typing while nothing in
// particular has focus goes to the composer; cards take shortcuts only once selected (cards.js).

import { Api, ApiError, newKey } from "./api.js";
import { InterruptCard } from "./cards.js";
import { pauseKey } from "./decisions.js";
import { TurnView, historyNodes, userMessage, waitingNote } from "./conversation.js";
import { h, shortId } from "./dom.js";
import { expiresText, renderAudit, renderSessions } from "./lists.js";

const TOKEN_KEY = "pausepoint.token";
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
  /** @type {Map<string, InterruptCard>} ref -> the card of this session's pause */
  cards: new Map(),
  /** @type {Set<string>} refs this page saw answered by someone else (kept when the log is redrawn) */
  elsewhere: new Set(),
  /** @type {Map<string, any>} "agent/session" -> {agent, session, interrupts} */
  inbox: new Map(),
  /** @type {any[]} */
  recent: [],
  busy: false,
  /** @type {{stop: () => void} | null} */
  feed: null,
  view: 0, // bumped whenever another session is shown: late replies for an old one are dropped
  canSend: true,
  canAnswer: true,
};

// -- start ------------------------------------------------------------------------------------

function route() {
  const params = new URLSearchParams(location.hash.slice(1));
  return { token: params.get("token"), agent: params.get("agent"), session: params.get("session") };
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
  const { token, agent, session } = route();
  if (token) {
    sessionStorage.setItem(TOKEN_KEY, token);
    setRoute(agent, session, { replace: true });
  }
  $("signin-form").addEventListener("submit", (e) => {
    e.preventDefault();
    signIn(/** @type {HTMLInputElement} */ ($("token-input")).value.trim());
  });
  const saved = sessionStorage.getItem(TOKEN_KEY);
  if (saved) await signIn(saved);
  else showSignIn();
}

function showSignIn(message = "") {
  $("app").hidden = true;
  $("signin").hidden = false;
  $("signin-error").textContent = message;
  $("token-input").focus();
}

/** @param {string} token */
async function signIn(token) {
  if (!token) return showSignIn("Enter a token.");
  const api = new Api(token);
  let listing;
  try {
    listing = await api.get("/v1/agents");
  } catch (error) {
    sessionStorage.removeItem(TOKEN_KEY);
    const text = error instanceof ApiError && error.status === 401 ? "That token was not accepted."
      : error instanceof Error ? error.message : String(error);
    return showSignIn(text);
  }
  sessionStorage.setItem(TOKEN_KEY, token);
  state.api = api;
  state.principal = listing.principal || "";
  state.agents = listing.agents;
  $("signin").hidden = true;
  $("app").hidden = false;
  $("who").textContent = state.principal;
  $("agent-select").replaceChildren(...state.agents.map((name) => h("option", { value: name, text: name })));
  wireUp();
  startFeed();
  await refreshInbox();
  await applyRoute();
}

function signOut() {
  sessionStorage.removeItem(TOKEN_KEY);
  if (state.feed) state.feed.stop();
  location.hash = "";
  location.reload();
}

let wired = false;
function wireUp() {
  if (wired) return;
  wired = true;
  window.addEventListener("hashchange", () => applyRoute());
  $("agent-select").addEventListener("change", (e) => setRoute(/** @type {HTMLSelectElement} */ (e.target).value, null));
  $("new-chat").addEventListener("click", () => setRoute(state.agent, null));
  $("sign-out").addEventListener("click", signOut);
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
  if (target instanceof Element && target.closest(".card, button, a, summary, details, form, [contenteditable]")) return;
  if ($("composer").hidden) return;
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
}

const narrow = () => matchMedia("(max-width: 760px)").matches;

async function applyRoute() {
  const { agent, session } = route();
  const name = agent && state.agents.includes(agent) ? agent : state.agents[0];
  if (!name) {
    $("conv-title").textContent = "No agents";
    $("conv-sub").textContent = "This server serves no agents.";
    return;
  }
  if (name === state.agent && session === state.sessionId && session) return;
  state.view += 1;
  state.agent = name;
  state.sessionId = session || null;
  state.cards.clear();
  state.elsewhere.clear();
  closeCancel();
  showNotice("");
  /** @type {HTMLSelectElement} */ ($("agent-select")).value = name;
  /** @type {HTMLTextAreaElement} */ ($("message")).placeholder = `Message ${name}…`;
  $("log").replaceChildren();
  renderAudit($("audit"), $("audit-empty"), []);
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
    // one column, the lists above: bring what the person came for into view
    const first = [...state.cards.values()].find((c) => c.open);
    (first ? first.el : $("main")).scrollIntoView({ block: "start" });
  }
}

/**
 * Show a stored session: its history with the cards of its pauses, its audit trail.
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
    $("log").replaceChildren(h("p", { class: "turn-error", role: "alert", text: error instanceof Error ? error.message : String(error) }));
    return;
  }
  if (view !== state.view) return;
  setPermissions(detail.can_send !== false, detail.can_answer !== false, detail.session.owner);
  const info = await agentInfo(agent);
  state.cards.clear();
  const placed = new Set();
  // Each tool call's pauses, where the call is: the answered ones as the audit trail recorded
  // them, then the one still open.
  const cardsFor = (/** @type {string} */ callRef) => {
    const cards = [];
    // (a call the policy decided never paused: it is in the audit trail, not a card)
    for (const entry of entries.filter((/** @type {any} */ e) => e.call_ref === callRef && answers(e) && e.via !== "policy")) {
      const card = makeCard({ name: entry.name, ref: entry.ref, pause_id: entry.pause_id, input: entry.input,
        metadata: null, view: entry.view, call_ref: entry.call_ref }, info);
      card.markAnswered(entry, { elsewhere: state.elsewhere.has(pauseKey(entry)) });
      cards.push(card.el);
    }
    for (const pause of detail.interrupts.filter((/** @type {any} */ p) => p.call_ref === callRef)) {
      cards.push(addCard(pause, info).el);
      placed.add(pauseKey(pause));
    }
    return cards;
  };
  const owner = detail.session.owner;
  $("log").replaceChildren(...historyNodes(messages, cardsFor, owner && owner !== state.principal ? owner : "You"));
  const rest = detail.interrupts.filter((/** @type {any} */ p) => !placed.has(pauseKey(p)));
  if (rest.length) $("log").append(h("div", { class: "turn-cards" }, ...rest.map((/** @type {any} */ p) => addCard(p, info).el)));
  renderAudit($("audit"), $("audit-empty"), entries);
  updateOpen();
  scrollToEnd(true);
}

async function refreshAudit() {
  if (!state.sessionId || !state.agent) return [];
  const view = state.view;
  const { entries } = await state.api.get(sessionPath(state.agent, state.sessionId) + "/audit");
  if (view === state.view) renderAudit($("audit"), $("audit-empty"), entries);
  return entries;
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
  /** @type {HTMLButtonElement} */ ($("send")).disabled = busy;
  $("composer").setAttribute("aria-busy", busy ? "true" : "false");
}

function openCards() {
  return [...state.cards.values()].filter((c) => c.open);
}

/** The "cancel open pauses" control and the composer's notice follow what is open. */
function updateOpen() {
  const open = openCards();
  $("cancel-open").hidden = !(open.length && state.canAnswer);
  if (!open.length) {
    showNotice("");
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

async function send() {
  const box = /** @type {HTMLTextAreaElement} */ ($("message"));
  const text = box.value.trim();
  if (!text || state.busy || !state.agent) return;
  const open = openCards();
  if (open.length) {
    const what = open.length === 1 ? "A pause is" : `${open.length} pauses are`;
    showNotice(`${what} waiting for an answer: the agent goes on once it has one. `, state.canAnswer);
    return;
  }
  showNotice("");
  box.value = "";
  autosize(box);
  const log = $("log");
  const empty = log.querySelector(".log-empty");
  if (empty) empty.remove();
  log.append(userMessage(text));
  const path = state.sessionId
    ? sessionPath(state.agent, state.sessionId) + "/messages"
    : `/v1/agents/${encodeURIComponent(state.agent)}/sessions`;
  try {
    await runTurn(path, { message: text }, null, { restoreText: text });
  } catch {
    /* shown in the log or as a toast */
  }
}

/**
 * Runs a turn (a send or an answer), streaming it into the log. Returns the response, or throws
 * the ApiError of a refusal (after putting the log back as it was).
 * @param {string} path @param {any} body @param {string | null} key @param {{restoreText?: string, answered?: boolean}} [options]
 */
async function runTurn(path, body, key, { restoreText, answered = false } = {}) {
  const view = state.view;
  const agent = /** @type {string} */ (state.agent);
  setBusy(true);
  const turn = new TurnView($("log"));
  scrollToEnd(true);
  /** @type {any[]} */
  const pending = [];
  /** @type {any} */
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
    const message = error instanceof Error ? error.message : String(error);
    if (error instanceof ApiError && error.status >= 400 && error.status < 500 && !turn.text) {
      turn.el.remove(); // refused before anything happened
      if (restoreText !== undefined) {
        $("log").lastElementChild?.remove();
        const box = /** @type {HTMLTextAreaElement} */ ($("message"));
        if (!box.value) box.value = restoreText;
        toast(message);
      }
      throw error;
    }
    turn.finish(null, message);
    throw error;
  } finally {
    setBusy(false);
  }
  if (view !== state.view) return response;
  const isNew = !state.sessionId;
  state.sessionId = response.session_id;
  if (isNew) {
    setRoute(agent, response.session_id, { replace: true });
    $("conv-title").textContent = `Session ${shortId(response.session_id)}`;
  }
  turn.finish(response);
  const info = await agentInfo(agent);
  const open = response.interrupts.length ? response.interrupts : pending;
  const added = [];
  for (const pause of open) {
    if (!state.cards.has(pauseKey(pause))) {
      turn.addCard(addCard(pause, info));
      added.push(pause);
    }
  }
  if (answered && response.finish_reason === "interrupted" && !turn.text && !added.length && response.interrupts.length) {
    turn.note(waitingNote(response.interrupts, showCard));
  }
  if (added.length) announce(`The agent is waiting for your answer: ${added.map((p) => p.view ? p.view.title : p.name).join("; ")}`);
  updateOpen();
  scrollToEnd(true);
  if (!document.activeElement || document.activeElement === document.body) {
    if (state.canSend && !narrow()) $("message").focus(); // focus was nowhere: give it back to the composer
  }
  await Promise.all([refreshAudit(), refreshSession(agent, response.session_id), refreshRecent()]);
  markCurrent();
  return response;
}

/**
 * Whether an audit entry answered a pause (or decided a call): not a grant given or revoked, an
 * escalation, or one approval of several counted while the pause stayed open.
 * @param {any} e
 */
function answers(e) {
  if (e.decision === "grant" || e.decision === "revoke" || e.decision === "escalate") return false;
  return !(e.decision === "approve" && e.via !== "policy" && e.required > 1 && e.approvals < e.required);
}

/** The audit entry that answered a card's pause. @param {any[]} entries @param {InterruptCard} card */
function entryOf(entries, card) {
  // the last answer: a quorum's resolving approval, not a grant given with it
  return [...entries].reverse().find((e) => pauseKey(e) === pauseKey(card.pause) && answers(e));
}

/** Scroll to a card and select it (the person asked for it). @param {string} key */
function showCard(key) {
  const card = state.cards.get(key);
  if (!card) return;
  card.el.scrollIntoView({ block: "center" });
  card.el.focus({ preventScroll: true });
}

/** @param {any} pause @param {any} info */
function makeCard(pause, info) {
  const tool = info.tools.find((/** @type {any} */ t) => t.name === pause.name) || null;
  return new InterruptCard(pause, tool, {
    approve: (c, body) => answer(c, "approve", body),
    respond: (c, output) => answer(c, "respond", { output }),
    deny: (c, reason) => answer(c, "deny", { reason }),
    validate: (toolName, kind, value) => state.api.post(
      `/v1/agents/${encodeURIComponent(info.name)}/tools/${encodeURIComponent(toolName)}/validate`, { [kind]: value }),
    expired: (c) => watchExpired(c),
    confirmAll: () => /** @type {HTMLInputElement} */ ($("confirm-all")).checked,
    canAnswer: state.canAnswer,
    principal: state.principal,
  });
}

/** @param {any} pause @param {any} info */
function addCard(pause, info) {
  const card = makeCard(pause, info);
  state.cards.set(pauseKey(pause), card);
  return card;
}

/**
 * @param {InterruptCard} card @param {"approve" | "respond" | "deny"} action @param {any} body
 */
async function answer(card, action, body) {
  if (state.busy) throw new Error("Wait for the agent to finish this turn.");
  if (!state.agent || !state.sessionId) throw new Error("No session.");
  const path = `${sessionPath(state.agent, state.sessionId)}/interrupts/${encodeURIComponent(card.pause.ref)}/${action}`;
  // The card's own pause: if the call paused again since, showing something else, the server
  // refuses this answer instead of applying it to what the person has not seen.
  const answered = card.pause.pause_id ? { ...body, pause_id: card.pause.pause_id } : body;
  let response;
  try {
    response = await runTurn(path, answered, newKey(), { answered: true });
  } catch (error) {
    if (error instanceof ApiError && (error.code === "already_resolved" || error.code === "interrupt_expired")) {
      const entries = await refreshAudit();
      card.markAnswered(entryOf(entries, card), { elsewhere: true });
      state.elsewhere.add(pauseKey(card.pause));
      updateOpen();
      return;
    }
    throw error;
  }
  const still = response && response.interrupts.find((/** @type {any} */ p) => pauseKey(p) === pauseKey(card.pause));
  if (still) { // an approval a quorum counted: the pause waits for the others
    const shown = still.view && still.view.approval;
    card.stillOpen(still, shown ? `Your approval is counted: ${shown.progress}. ${shown.waiting_for}` : "");
    updateOpen();
    return;
  }
  const entries = await refreshAudit();
  card.markAnswered(entryOf(entries, card));
  card.el.focus({ preventScroll: true }); // its buttons are gone: keep the person where they were
  updateOpen();
}

// -- cancelling the open pauses -------------------------------------------------------------------

function openCancel() {
  const open = openCards();
  if (!open.length || !state.canAnswer) return;
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
  if (!state.agent || !state.sessionId || state.busy) return;
  const reasonBox = /** @type {HTMLInputElement} */ ($("cancel-reason"));
  const reason = reasonBox.value.trim() || `cancelled by ${state.principal || "the approver"}`;
  const submit = /** @type {HTMLButtonElement} */ ($("cancel-submit"));
  const cancelling = openCards();
  submit.disabled = true;
  for (const card of cancelling) card.setBusy(true, "Cancelling…"); // the feed's news of it is ours
  try {
    await state.api.post(`${sessionPath(state.agent, state.sessionId)}/cancel`, { reason });
  } catch (error) {
    $("cancel-status").textContent = error instanceof Error ? error.message : String(error);
    for (const card of cancelling) card.setBusy(false, "");
    return;
  } finally {
    submit.disabled = false;
  }
  reasonBox.value = "";
  const entries = await refreshAudit();
  for (const card of cancelling) card.markAnswered(entryOf(entries, card));
  closeCancel();
  updateOpen();
  await refreshSession(state.agent, state.sessionId);
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
    if (view !== state.view || state.busy) return; // another session, or our own turn will show it
    const detail = await state.api.get(sessionPath(agent, sessionId));
    if (view !== state.view || state.busy) return;
    if (detail.last_response && detail.last_response.version === detail.session.version) {
      if ([...state.cards.values()].some((c) => c.panel || c.answering)) return;
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
    if (view !== state.view || card.el.dataset.state !== "expiring" || tries++ > 40) return;
    const entries = await refreshAudit();
    const entry = entryOf(entries, card);
    if (entry && card.el.dataset.state === "expiring") {
      card.markAnswered(entry);
      updateOpen();
      if (state.agent && state.sessionId) await refreshSession(state.agent, state.sessionId);
      await catchUp();
      return;
    }
    setTimeout(look, 2000);
  };
  updateOpen();
  setTimeout(look, 1000);
}

// -- inbox, recent sessions, the feed ---------------------------------------------------------

async function refreshInbox() {
  const found = await Promise.all(state.agents.map(async (agent) => {
    const { sessions } = await state.api.get(`/v1/agents/${encodeURIComponent(agent)}/sessions?pending=true&limit=50`);
    return sessions.map((/** @type {any} */ session) => ({ agent, session }));
  }));
  state.inbox.clear();
  await Promise.all(found.flat().map((item) => refreshSession(item.agent, item.session.session_id, false)));
  renderInbox();
}

/**
 * Re-reads one session for the inbox.
 * @param {string} agent @param {string} sessionId @param {boolean} [render]
 */
async function refreshSession(agent, sessionId, render = true) {
  const key = `${agent}/${sessionId}`;
  let detail;
  try {
    detail = await state.api.get(sessionPath(agent, sessionId));
  } catch {
    state.inbox.delete(key);
    if (render) renderInbox();
    return;
  }
  if (detail.session.pending > 0) state.inbox.set(key, { agent, session: detail.session, interrupts: detail.interrupts });
  else state.inbox.delete(key);
  if (render) renderInbox();
}

function renderInbox() {
  const items = [...state.inbox.values()].sort((a, b) => b.session.updated_at.localeCompare(a.session.updated_at));
  renderSessions($("inbox"), $("inbox-empty"), items, currentKey(), { showPauses: true });
  $("inbox-count").textContent = String(items.length);
  $("inbox-count").dataset.zero = items.length ? "false" : "true";
  document.title = items.length ? `(${items.length}) pausepoint console` : "pausepoint console";
}

async function refreshRecent() {
  if (!state.agent) return;
  const agent = state.agent;
  const { sessions } = await state.api.get(`/v1/agents/${encodeURIComponent(agent)}/sessions?limit=15`);
  state.recent = sessions.map((/** @type {any} */ session) => ({ agent, session }));
  renderSessions($("recent"), $("recent-empty"), state.recent, currentKey(), { showPauses: false });
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
  state.feed = state.api.feed(onFeedEvent, (s) => {
    $("feed-state").dataset.state = s;
    $("feed-state").textContent = label[s] || s;
  });
}

/** @param {string} name @param {any} data */
async function onFeedEvent(name, data) {
  const isHere = () => data.agent === state.agent && data.session_id === state.sessionId;
  if (name === "pause") {
    await refreshSession(data.agent, data.session_id);
    const title = data.interrupt.view ? data.interrupt.view.title : data.interrupt.name;
    if (!isHere() && !state.busy) {
      toast(`New pause: ${title} (${data.agent})`);
      const item = document.querySelector(`.session-item[data-key="${CSS.escape(data.agent + "/" + data.session_id)}"]`);
      if (item) item.classList.add("is-new");
    } else if (isHere() && !state.busy && !state.cards.has(pauseKey(data.interrupt))) {
      // paused by another client while we watch: show that turn and its card (without taking focus)
      announce(`The agent is waiting for your answer: ${title}`);
      await catchUp();
    }
  } else if (name === "approval") { // one approval of several counted: the pause stays open, its progress moves on
    await refreshSession(data.agent, data.session_id);
    if (isHere()) {
      const card = state.cards.get(pauseKey(data.entry));
      if (card && card.open && !card.answering) {
        const open = await state.api.get(`${sessionPath(data.agent, data.session_id)}/interrupts`);
        const still = open.interrupts.find((/** @type {any} */ p) => pauseKey(p) === pauseKey(card.pause));
        if (still) card.stillOpen(still, "");
      }
      await refreshAudit();
    }
  } else if (name === "answer") {
    await refreshSession(data.agent, data.session_id);
    if (isHere()) {
      const card = state.cards.get(pauseKey(data.entry));
      if (card && !card.answering && (card.open || card.el.dataset.state === "expiring")) {
        card.markAnswered(data.entry, { elsewhere: data.entry.decision !== "expire" });
        if (data.entry.decision !== "expire") state.elsewhere.add(pauseKey(data.entry));
        updateOpen();
        await refreshAudit();
        await catchUp(); // what the agent did next
      } else {
        await refreshAudit();
      }
    }
  }
}

/** @param {string} text */
function announce(text) {
  $("announce").textContent = text;
}

/** @type {ReturnType<typeof setTimeout> | undefined} */
let toastTimer;
/** @param {string} text */
function toast(text) {
  const el = $("toast");
  el.textContent = text;
  el.dataset.show = "true";
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { el.dataset.show = "false"; }, 5000);
}

boot();
