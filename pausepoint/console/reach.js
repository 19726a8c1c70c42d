// @ts-check
// When the server cannot be reached: say so once, in a person's words, keep what was waiting to
// be sent (a message, a decision), look again every second, and send it once the server is back.
// Nothing queued here was decided: a decision carries its idempotency key, so sending it again
// can never decide twice.

import { Api } from "./api.js";

export class Reach {
  /** @param {HTMLElement} banner */
  constructor(banner) {
    this.banner = banner;
    /** @type {Api | null} */
    this.api = null;
    this.offline = false;
    /** @type {Map<string, () => Promise<void>>} what to send again, by what it is ("composer", a card's key;
     * "read:…" only reads what the server holds) */
    this.waiting = new Map();
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    this.timer = undefined;
    // What waits here lives in this page only: leaving it (a reload, closing the tab) would drop
    // a decision the person confirmed, so the browser asks first.
    window.addEventListener("beforeunload", (event) => {
      if ([...this.waiting.keys()].some((name) => !name.startsWith("read:"))) event.preventDefault();
    });
  }

  /** The server could not be reached: say so, and look again until it answers. */
  down() {
    if (this.offline) return;
    this.offline = true;
    this.banner.hidden = false;
    this.banner.textContent = "The console cannot reach the server. It keeps trying; nothing you typed is lost, "
      + "and what waits here is sent once the server is back.";
    this.look();
  }

  look() {
    clearTimeout(this.timer);
    this.timer = setTimeout(async () => {
      if (!this.offline) return;
      if (this.api && await this.api.reachable()) this.up();
      else this.look();
    }, 1000);
  }

  /** The server answers again: send what waited, oldest first. */
  async up() {
    if (!this.offline) return;
    this.offline = false;
    clearTimeout(this.timer);
    this.banner.hidden = true;
    const waiting = [...this.waiting.values()];
    this.waiting.clear();
    for (const send of waiting) {
      try {
        await send();
      } catch {
        /* each says its own failure where it belongs */
      }
    }
  }

  /** Send `send` once the server is back. @param {string} name @param {() => Promise<void>} send */
  queue(name, send) {
    this.waiting.set(name, send);
    this.down();
  }

  /** Forget what waited under `name` (the person took it back). @param {string} name */
  drop(name) {
    this.waiting.delete(name);
  }
}

/**
 * A card's answer whose reply never came (the server out of reach, or the connection broke on
 * the way back). It may have reached the server and been decided, so the card never says it was
 * not: it says the answer is sent again once the server is back — with the same idempotency key,
 * so the retry gets the first outcome and can never count twice — and "Don't send it" only reads
 * what the server holds. One telling for the console's cards and an approval link's page.
 * @param {Reach} reach
 * @param {import("./cards.js").InterruptCard} card
 * @param {"approve" | "respond" | "deny"} action
 * @param {{name: string, resend: () => Promise<void>, reread: () => Promise<void>}} how name: what waits
 *   (one per card); resend: the same answer under the same key; reread: show what the server holds
 */
export function sendAgainWhenBack(reach, card, action, { name, resend, reread }) {
  const what = { approve: "approval", respond: "answer", deny: "denial" }[action];
  card.setBusy(false);
  card.waitForServer(`The console cannot reach the server: your ${what} is sent again once it is back `
    + "(it can never count twice). If it reached the server already, it stands.",
    () => { reach.drop(name); reach.queue(`read:${name}`, reread); });
  reach.queue(name, async () => {
    if (!card.open) return reread(); // it shows what the server holds already: nothing to send
    card.setBusy(true, "Sending…");
    try {
      await resend();
    } catch (refused) { // e.g. an answer the server finds does not fit: said on its card, by its fields
      card.refused(refused instanceof Error ? refused.message : String(refused));
    }
  });
}
