// @ts-check
// The REST API of the server that serves this console: JSON calls, streamed turns and the feed.
// Streams are read with fetch + ReadableStream (EventSource cannot send an Authorization header).

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
function apiBase(pathname = location.pathname) {
  const at = pathname.lastIndexOf("/console/");
  return at >= 0 ? pathname.slice(0, at) : "";
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
  }

  /** @param {Record<string, string>} [extra] @returns {Record<string, string>} */
  headers(extra = {}) {
    return { Authorization: `Bearer ${this.token}`, ...extra };
  }

  /** @param {string} path */
  async get(path) {
    const reply = await fetch(this.base + path, { headers: this.headers({ Accept: "application/json" }) });
    if (!reply.ok) throw await errorFrom(reply);
    return reply.json();
  }

  // A plain JSON POST (cancel, validate): the reply's JSON, or an ApiError.
  /** @param {string} path @param {any} body @param {{signal?: AbortSignal}} [options] */
  async post(path, body, { signal } = {}) {
    const headers = this.headers({ "Content-Type": "application/json", Accept: "application/json" });
    const reply = await fetch(this.base + path, { method: "POST", headers, body: JSON.stringify(body), signal });
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
    const reply = await fetch(this.base + path, { method: "POST", headers, body: JSON.stringify(body) });
    if (!reply.ok || !reply.body) throw await errorFrom(reply);
    let response = null;
    /** @type {ApiError | null} */
    let failure = null;
    await readEvents(reply.body, (name, data) => {
      if (name === "chunk") onChunk(data);
      else if (name === "response") response = data;
      else if (name === "error") {
        const e = data.error || {};
        failure = new ApiError(500, e.code || "error", e.message || "the turn failed", e.details);
      }
    });
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
          const reply = await fetch(this.base + "/v1/feed", {
            headers: this.headers(extra),
            signal: controller.signal,
          });
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
        }
        if (controller.signal.aborted) return;
        onState("reconnecting");
        await new Promise((resolve) => setTimeout(resolve, delay));
        delay = Math.min(delay * 2, 10000);
      }
    };
    run();
    return { stop: () => controller.abort() };
  }
}
