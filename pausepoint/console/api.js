// @ts-check
// The REST API of the server that serves this console: JSON calls, streamed turns and the feed.
// Streams are read with fetch + ReadableStream (EventSource cannot send an Authorization header).
//
// A server that cannot be reached is an ApiError with status 0 ("unreachable"; "connection_lost"
// when a turn's stream broke off); a refused token (401) calls `onSignedOut` before it is thrown.
// `explain` says any of them in a person's words.

export class ApiError extends Error {
  /** @param {number} status @param {string} code @param {string} message @param {any} [details] */
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details || {};
  }
}

// The console lives at <base>/console/: the API is at <base>/v1/...
/** @param {string} [pathname] */
export function apiBase(pathname = location.pathname) {
  const at = pathname.lastIndexOf("/console/");
  return at >= 0 ? pathname.slice(0, at) : "";
}

/** Whether the server could not be reached (nothing it said, no status). @param {unknown} error */
export function unreachable(error) {
  return error instanceof ApiError && error.status === 0;
}

/**
 * An error as the person reads it: what happened, never a developer's hint.
 * @param {unknown} error
 */
export function explain(error) {
  if (error instanceof ApiError) {
    if (error.status === 0) return "The console cannot reach the server.";
    if (error.status === 401) return "Your sign-in is no longer accepted (the token was revoked or has expired).";
    if (error.code === "already_resolved") return "Someone answered this already.";
    if (error.code === "interrupt_expired") return "It expired before the answer arrived.";
    if (error.status >= 500) return `The server could not do this (${error.status}): ${error.message}`;
    return error.message.charAt(0).toUpperCase() + error.message.slice(1);
  }
  return error instanceof Error ? `Something went wrong in the console: ${error.message}` : String(error);
}

/**
 * Whether ``token`` can be sent at all: a header carries only Latin-1 characters, no NUL or line
 * break (fetch refuses anything else before any request — not a server out of reach).
 * @param {string} token
 */
export function sendableToken(token) {
  try {
    new Headers({ Authorization: `Bearer ${token}` });
    return true;
  } catch {
    return false;
  }
}

export function newKey() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** @param {Response} reply */
async function errorFrom(reply) {
  let body = null;
  try {
    body = await reply.json();
  } catch {
    /* not JSON: fall through */
  }
  const error = body && body.error;
  if (error) return new ApiError(reply.status, error.code, error.message, error.details);
  return new ApiError(reply.status, "http_" + reply.status, `the server answered ${reply.status} ${reply.statusText}`);
}

/**
 * Server-sent events from a byte stream: calls onEvent(name, data) for each complete event.
 * @param {ReadableStream<Uint8Array>} body
 * @param {(name: string, data: any) => void} onEvent
 * @param {AbortSignal} [signal]
 * @param {(id: string) => void} [onId] called with an event's id once it was handled
 */
async function readEvents(body, onEvent, signal, onId) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let name = "message";
  /** @type {string | null} */
  let id = null;
  /** @type {string[]} */
  let data = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.search(/\r?\n/)) >= 0) {
        const line = buffer.slice(0, cut);
        buffer = buffer.slice(cut + (buffer[cut] === "\r" ? 2 : 1));
        if (line === "") {
          if (data.length) onEvent(name, JSON.parse(data.join("\n")));
          if (id !== null && onId) onId(id); // handled: a reconnect resumes after it
          name = "message";
          id = null;
          data = [];
        } else if (line.startsWith(":")) {
          continue;
        } else if (line.startsWith("event:")) {
          name = line.slice(6).trim();
        } else if (line.startsWith("id:")) {
          id = line.slice(3).trim();
        } else if (line.startsWith("data:")) {
          data.push(line.slice(5).replace(/^ /, ""));
        }
      }
      if (signal && signal.aborted) break;
    }
  } finally {
    reader.releaseLock();
  }
}

export class Api {
  /** @param {string} token @param {string} [base] */
  constructor(token, base = apiBase()) {
    this.token = token;
    this.base = base;
    /** @type {() => void} called when the server refuses the token (401) */
    this.onSignedOut = () => {};
  }

  /**
   * fetch, with a server that cannot be reached as ApiError(0) and a refused token reported.
   * @param {string} path @param {RequestInit} init
   */
  async fetch(path, init) {
    let reply;
    try {
      reply = await fetch(this.base + path, init);
    } catch (error) {
      if (error instanceof DOMException && error.name === "AbortError") throw error;
      throw new ApiError(0, "unreachable", "The console cannot reach the server.");
    }
    if (reply.status === 401) this.onSignedOut();
    return reply;
  }

  /** Whether the server answers at all (its health check: no token needed). */
  async reachable() {
    try {
      const reply = await fetch(this.base + "/healthz", { cache: "no-store" });
      return reply.status < 500;
    } catch {
      return false;
    }
  }

  /** @param {Record<string, string>} [extra] @returns {Record<string, string>} */
  headers(extra = {}) {
    return { Authorization: `Bearer ${this.token}`, ...extra };
  }

  /** @param {string} path */
  async get(path) {
    const reply = await this.fetch(path, { headers: this.headers({ Accept: "application/json" }) });
    if (!reply.ok) throw await errorFrom(reply);
    return reply.json();
  }

  // A plain JSON POST (cancel, validate, an answer from a link's page): the reply's JSON, or an ApiError.
  /** @param {string} path @param {any} body @param {{signal?: AbortSignal, idempotencyKey?: string}} [options] */
  async post(path, body, { signal, idempotencyKey } = {}) {
    const headers = this.headers({ "Content-Type": "application/json", Accept: "application/json" });
    if (idempotencyKey) headers["Idempotency-Key"] = idempotencyKey;
    const reply = await this.fetch(path, { method: "POST", headers, body: JSON.stringify(body), signal });
    if (!reply.ok) throw await errorFrom(reply);
    return reply.json();
  }

  /**
   * A turn (send, or an answer): streams chunks to onChunk, resolves with the final AgentResponse.
   * Refusals arrive before the stream starts, as an ApiError.
   * @param {string} path @param {any} body @param {(chunk: any) => void} onChunk
   * @param {{idempotencyKey?: string | null}} [options]
   */
  async turn(path, body, onChunk, { idempotencyKey } = {}) {
    const headers = this.headers({ "Content-Type": "application/json", Accept: "text/event-stream" });
    if (idempotencyKey) headers["Idempotency-Key"] = idempotencyKey;
    const reply = await this.fetch(path, { method: "POST", headers, body: JSON.stringify(body) });
    if (!reply.ok || !reply.body) throw await errorFrom(reply);
    /** @type {any} the turn's AgentResponse (set by the stream's last event) */
    let response = null;
    /** @type {ApiError | null} */
    let failure = null;
    try {
      await readEvents(reply.body, (name, data) => {
        if (name === "chunk") onChunk(data);
        else if (name === "response") response = data;
        else if (name === "error") {
          const e = data.error || {};
          failure = new ApiError(500, e.code || "error", e.message || "the turn failed", e.details);
        }
      });
    } catch (error) {
      if (error instanceof SyntaxError) throw error;
      throw new ApiError(0, "connection_lost", "The connection to the server broke off.");
    }
    if (failure) throw failure;
    if (!response) throw new ApiError(0, "stream_ended", "the connection closed before the turn finished");
    return response;
  }

  /**
   * The live feed: onEvent(name, data) for "pause", "answer", "approval" (one of several counted),
   * "turn_end" and the rest the server sends; onState("live" |
   * "reconnecting"). Reconnects with backoff until stop() is called, from the last event it had.
   * @param {(name: string, data: any) => void} onEvent @param {(state: string) => void} onState
   */
  feed(onEvent, onState) {
    const controller = new AbortController();
    let delay = 500;
    /** @type {string | null} */
    let lastId = null; // a reconnect asks for what it missed (Last-Event-ID), nothing twice
    const run = async () => {
      while (!controller.signal.aborted) {
        try {
          /** @type {Record<string, string>} */
          const extra = { Accept: "text/event-stream" };
          if (lastId !== null) extra["Last-Event-ID"] = lastId;
          const reply = await this.fetch("/v1/feed", { headers: this.headers(extra), signal: controller.signal });
          if (!reply.ok || !reply.body) throw await errorFrom(reply);
          onState("live");
          delay = 500;
          await readEvents(reply.body, onEvent, controller.signal, (id) => { lastId = id; });
        } catch (error) {
          if (controller.signal.aborted) return;
          if (error instanceof ApiError && error.status === 401) {
            onState("unauthorized");
            return;
          }
          if (error instanceof ApiError && error.status === 400 && "last_event_id" in error.details) {
            lastId = null; // an id the feed no longer follows (its stores changed, or were reset): from now,
            // and the page reads what it missed once the feed is live again
          }
        }
        if (controller.signal.aborted) return;
        onState("reconnecting");
        await new Promise((resolve) => setTimeout(resolve, delay));
        delay = Math.min(delay * 2, 4000);
      }
    };
    run();
    return { stop: () => controller.abort() };
  }
}
