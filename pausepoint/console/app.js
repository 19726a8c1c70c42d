// The console: sign in, pick an agent, chat, answer pauses, watch the inbox and the audit trail.
//
// The URL fragment names what is shown: #agent=<name>&session=<id>. A demo may add token=<token>;
// it is moved to sessionStorage (this tab only) and removed from the address bar at once.

import { Api, ApiError, newKey } from "./api.js";
import { InterruptCard } from "./cards.js";
import { TurnView, historyNodes, userMessage } from "./conversation.js";
import { h, shortId } from "./dom.js";
import { renderAudit, renderSessions } from "./lists.js";

const TOKEN_KEY = "pausepoint.token";
const $ = (id) => document.getElementById(id);

const state = {
  api: null,
  principal: "",
  agents: [],
  info: new Map(), // agent name -> GET /v1/agents/{agent}
  agent: null,
  sessionId: null,
  cards: new Map(), // ref -> InterruptCard (this session's)
  inbox: new Map(), // "agent/session" -> {agent, session, interrupts}
  recent: [],
  busy: false,
  feed: null,
  view: 0, // bumped whenever another session is shown: late replies for an old one are dropped
};

// -- start ------------------------------------------------------------------------------------

function route() {
  const params = new URLSearchParams(location.hash.slice(1));
  return { token: params.get("token"), agent: params.get("agent"), session: params.get("session") };
}

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
    signIn($("token-input").value.trim());
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

async function signIn(token) {
  if (!token) return showSignIn("Enter a token.");
  const api = new Api(token);
  let listing;
  try {
    listing = await api.get("/v1/agents");
  } catch (error) {
    sessionStorage.removeItem(TOKEN_KEY);
    const text = error instanceof ApiError && error.status === 401 ? "That token was not accepted." : error.message;
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
  $("agent-select").addEventListener("change", (e) => setRoute(e.target.value, null));
  $("new-chat").addEventListener("click", () => setRoute(state.agent, null));
  $("sign-out").addEventListener("click", signOut);
  $("composer").addEventListener("submit", (e) => { e.preventDefault(); send(); });
  const box = $("message");
  box.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); send(); }
  });
  box.addEventListener("input", () => autosize(box));
  document.addEventListener("keydown", globalKeys);
}

function autosize(box) {
  box.style.height = "auto";
  box.style.height = Math.min(box.scrollHeight, 200) + "px";
}

function globalKeys(e) {
  const target = e.target;
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  if (target instanceof HTMLInputElement || target instanceof HTMLTextAreaElement || target instanceof HTMLSelectElement) return;
  if (target instanceof Element && target.closest(".card")) return; // the card's own keys
  if (e.key === "n") { e.preventDefault(); setRoute(state.agent, null); }
  else if (e.key === "/") { e.preventDefault(); $("message").focus(); }
  else if (e.key === "j" || e.key === "k") {
    const open = [...document.querySelectorAll('.card[data-state="open"]')];
    if (open.length) { e.preventDefault(); (e.key === "j" ? open[0] : open[open.length - 1]).focus(); }
  }
}

// -- agents and sessions ------------------------------------------------------------------------

async function agentInfo(name) {
  if (!state.info.has(name)) state.info.set(name, await state.api.get(`/v1/agents/${encodeURIComponent(name)}`));
  return state.info.get(name);
}

function sessionPath(agent, sessionId) {
  return `/v1/agents/${encodeURIComponent(agent)}/sessions/${encodeURIComponent(sessionId)}`;
}

async function applyRoute() {
  const { agent, session } = route();
  const name = state.agents.includes(agent) ? agent : state.agents[0];
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
  $("agent-select").value = name;
  $("message").placeholder = `Message ${name}…`;
  $("log").replaceChildren();
  renderAudit($("audit"), $("audit-empty"), []);
  const info = await agentInfo(name);
  $("conv-sub").textContent = info.description;
  if (session) await showSession(name, session);
  else {
    $("conv-title").textContent = "New conversation";
    $("log").append(h("div", { class: "log-empty" },
      h("p", { text: `Start a conversation with ${name}.` }),
      h("p", { class: "muted", text: "When one of its tools needs a person, the call pauses here as a card for you to answer." })));
    $("message").focus();
  }
  await refreshRecent();
  markCurrent();
}

async function showSession(agent, sessionId) {
  const view = state.view;
  $("conv-title").textContent = `Session ${shortId(sessionId)}`;
  let detail;
  let messages;
  try {
    [detail, { messages }] = await Promise.all([
      state.api.get(sessionPath(agent, sessionId)),
      state.api.get(sessionPath(agent, sessionId) + "/history"),
    ]);
  } catch (error) {
    if (view !== state.view) return;
    $("log").replaceChildren(h("p", { class: "turn-error", role: "alert", text: error.message }));
    return;
  }
  if (view !== state.view) return;
  const info = await agentInfo(agent);
  $("log").replaceChildren(...historyNodes(messages));
  if (detail.interrupts.length) {
    const waiting = h("div", { class: "turn-cards" });
    for (const pause of detail.interrupts) waiting.append(addCard(pause, info).el);
    $("log").append(waiting);
  }
  await refreshAudit();
  scrollToEnd(true);
  const first = document.querySelector('.card[data-state="open"]');
  if (first) first.focus({ preventScroll: true });
}

async function refreshAudit() {
  if (!state.sessionId) return [];
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

function setBusy(busy) {
  state.busy = busy;
  $("send").disabled = busy;
  $("composer").setAttribute("aria-busy", busy ? "true" : "false");
}

async function send() {
  const box = $("message");
  const text = box.value.trim();
  if (!text || state.busy) return;
  const openCards = [...state.cards.values()].filter((c) => c.open);
  if (openCards.length) {
    toast("Answer the open cards first: the agent is waiting for them.");
    openCards[0].el.focus();
    return;
  }
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
  if (![...state.cards.values()].some((c) => c.open)) box.focus();
}

// Runs a turn (a send or an answer), streaming it into the log. Returns the response, or throws
// the ApiError of a refusal (after putting the log back as it was).
async function runTurn(path, body, key, { restoreText } = {}) {
  const view = state.view;
  const agent = state.agent;
  setBusy(true);
  const turn = new TurnView($("log"));
  scrollToEnd(true);
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
    if (error instanceof ApiError && error.status >= 400 && error.status < 500 && !turn.text) {
      turn.el.remove(); // refused before anything happened
      if (restoreText !== undefined) {
        $("log").lastElementChild?.remove();
        $("message").value = restoreText;
        toast(error.message);
      }
      throw error;
    }
    turn.finish(null, error.message);
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
  for (const pause of open) {
    if (!state.cards.has(pause.ref)) turn.addCard(addCard(pause, info));
  }
  scrollToEnd(true);
  const next = [...state.cards.values()].find((c) => c.open);
  if (next) next.el.focus({ preventScroll: true });
  await Promise.all([refreshAudit(), refreshSession(agent, response.session_id), refreshRecent()]);
  markCurrent();
  return response;
}

function addCard(pause, info) {
  const tool = info.tools.find((t) => t.name === pause.name) || null;
  const card = new InterruptCard(pause, tool, {
    approve: (c) => answer(c, "approve", {}),
    deny: (c, reason) => answer(c, "deny", { reason }),
    edit: (c, input) => answer(c, "approve", { replace_input: input }),
  });
  state.cards.set(pause.ref, card);
  return card;
}

async function answer(card, action, body) {
  if (state.busy) throw new Error("Wait for the agent to finish.");
  const path = `${sessionPath(state.agent, state.sessionId)}/interrupts/${encodeURIComponent(card.pause.ref)}/${action}`;
  card.answering = true;
  try {
    await runTurn(path, body, newKey());
  } catch (error) {
    card.answering = false;
    if (error instanceof ApiError && error.code === "already_resolved") {
      const entries = await refreshAudit();
      card.markElsewhere(entries.find((e) => e.ref === card.pause.ref));
      return;
    }
    throw error;
  }
  const entries = await refreshAudit();
  card.markAnswered(entries.find((e) => e.ref === card.pause.ref));
  card.answering = false;
}

// -- inbox, recent sessions, the feed ---------------------------------------------------------

async function refreshInbox() {
  const found = await Promise.all(state.agents.map(async (agent) => {
    const { sessions } = await state.api.get(`/v1/agents/${encodeURIComponent(agent)}/sessions?pending=true&limit=50`);
    return sessions.map((session) => ({ agent, session }));
  }));
  state.inbox.clear();
  await Promise.all(found.flat().map((item) => refreshSession(item.agent, item.session.session_id, false)));
  renderInbox();
}

// Re-reads one session for the inbox (and, if it is shown, its open cards).
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
  const { sessions } = await state.api.get(`/v1/agents/${encodeURIComponent(state.agent)}/sessions?limit=15`);
  state.recent = sessions.map((session) => ({ agent: state.agent, session }));
  renderSessions($("recent"), $("recent-empty"), state.recent, currentKey(), { showPauses: false });
}

function currentKey() {
  return state.sessionId ? `${state.agent}/${state.sessionId}` : null;
}

function markCurrent() {
  const key = currentKey();
  for (const link of document.querySelectorAll(".session-item")) {
    const a = link.querySelector("a");
    if (link.dataset.key === key) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
}

function startFeed() {
  const label = { live: "live", reconnecting: "reconnecting…", unauthorized: "signed out", connecting: "connecting…" };
  state.feed = state.api.feed(onFeedEvent, (s) => {
    $("feed-state").dataset.state = s;
    $("feed-state").textContent = label[s] || s;
  });
}

async function onFeedEvent(name, data) {
  const isHere = () => data.agent === state.agent && data.session_id === state.sessionId;
  if (name === "pause") {
    await refreshSession(data.agent, data.session_id);
    const here = isHere();
    if (!here && !state.busy) {
      toast(`New pause: ${data.interrupt.name} in ${data.agent} · ${shortId(data.session_id)}`);
      const item = document.querySelector(`.session-item[data-key="${CSS.escape(data.agent + "/" + data.session_id)}"]`);
      if (item) item.classList.add("is-new");
    } else if (!state.busy && !state.cards.has(data.interrupt.ref)) {
      // paused by another client while we watch: show its card too
      const info = await agentInfo(data.agent);
      const holder = h("div", { class: "turn-cards" }, addCard(data.interrupt, info).el);
      $("log").append(holder);
      scrollToEnd();
    }
  } else if (name === "answer") {
    await refreshSession(data.agent, data.session_id);
    if (isHere()) {
      const card = state.cards.get(data.entry.ref);
      if (card && card.open && !card.answering) card.markElsewhere(data.entry);
      await refreshAudit();
    }
  }
}

let toastTimer = null;
function toast(text) {
  const el = $("toast");
  el.textContent = text;
  el.dataset.show = "true";
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { el.dataset.show = "false"; }, 5000);
}

boot();
