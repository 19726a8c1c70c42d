// @ts-check
// The confirmation step of a card: what is about to happen, in the card's words, and a yes.
//
// It opens with focus on "Back", so Enter there goes back. On a high-risk pause the yes must be
// held down — the mouse button, or Space or Enter held on it — for HOLD_MS: a click, a key
// press or any run of keys decides nothing (the hint says to hold). The hold ends with its key
// coming up anywhere, another key going down, or the button, window or tab losing focus. A key that is not Tab,
// Shift, Enter, Space or Escape closes the step with nothing decided (the card handles that).

import { h } from "./dom.js";

/** How long a high-risk yes is held down. */
export const HOLD_MS = 900;
/** Keys that may be pressed in a confirmation without closing it. */
export const CONFIRM_KEYS = new Set(["Enter", "Tab", "Shift", "Escape", " "]);

/**
 * @typedef {{title: string, text: string, lines: string[], yes: string, held: boolean,
 *   action: () => void}} Question
 */

export class Confirmation {
  /** @param {string} id a prefix for element ids @param {() => void} onBack */
  constructor(id, onBack) {
    this.title = h("p", { class: "confirm-title", id: `${id}-confirm-title` });
    this.text = h("p", { class: "confirm-text", id: `${id}-confirm-text` });
    this.list = h("ul", { class: "confirm-list" });
    this.fill = h("span", { class: "hold-fill", "aria-hidden": "true" });
    this.label = h("span", { class: "hold-label" });
    this.hint = h("p", { class: "hold-hint", id: `${id}-hold-hint` });
    this.yes = h("button", { type: "button", class: "btn btn-approve btn-hold", "aria-describedby": `${id}-confirm-text` },
      this.fill, this.label);
    this.back = h("button", { type: "button", class: "btn btn-quiet", onclick: onBack }, "Back");
    this.el = h("div", { class: "card-confirm", role: "group", "aria-labelledby": `${id}-confirm-title`, hidden: true },
      this.title, this.text, this.list, this.hint, h("div", { class: "card-form-actions" }, this.yes, this.back));
    /** @type {Question | null} */
    this.question = null;
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    this.timer = undefined;
    /** @type {string | null} the key that holds the yes down (null: the mouse button) */
    this.holdKey = null;
    // A hold ends when its key comes up anywhere, when another key goes down, and when the
    // button, the window or the tab loses focus: only a press held on the button decides.
    this.onKeyUp = (/** @type {KeyboardEvent} */ e) => {
      if (e.key === this.holdKey) this.release();
    };
    this.onKeyDown = (/** @type {KeyboardEvent} */ e) => {
      if (!(e.repeat && e.key === this.holdKey)) this.release();
    };
    this.onLost = () => this.release();
    this.wire();
  }

  wire() {
    const yes = this.yes;
    yes.addEventListener("pointerdown", (e) => {
      if (e.button === 0 && this.held()) this.press(null);
    });
    for (const name of ["pointerup", "pointerleave", "pointercancel"]) yes.addEventListener(name, () => this.release());
    yes.addEventListener("keydown", (e) => {
      if ((e.key === "Enter" || e.key === " ") && this.held()) {
        e.preventDefault(); // no click from the key: only the hold decides
        if (!e.repeat) this.press(e.key);
      }
    });
    yes.addEventListener("click", () => {
      if (!this.question) return;
      if (this.held()) this.nudge();
      else this.done();
    });
    // Tab and Shift+Tab move between Back and the yes, and stay there: the step is open until
    // it is answered or left (Escape, another key), never left behind with focus elsewhere.
    this.el.addEventListener("keydown", (e) => {
      if (e.key !== "Tab" || !this.question) return;
      e.preventDefault();
      (document.activeElement === this.yes ? this.back : this.yes).focus();
    });
  }

  held() {
    return !!(this.question && this.question.held);
  }

  /** Ask: show what will happen, and focus "Back". @param {Question} question */
  open(question) {
    this.question = question;
    this.title.textContent = question.title;
    this.text.textContent = question.text;
    this.list.replaceChildren(...question.lines.map((text) => h("li", { text })));
    this.list.hidden = !question.lines.length;
    this.label.textContent = question.yes;
    this.yes.dataset.held = question.held ? "true" : "false";
    this.hint.hidden = !question.held;
    this.hint.textContent = "High risk: press and hold the button (mouse, Space or Enter) to confirm. A click or a key press alone decides nothing.";
    this.hint.dataset.nudge = "false";
    if (question.held) this.yes.setAttribute("aria-describedby", `${this.text.id} ${this.hint.id}`);
    else this.yes.setAttribute("aria-describedby", this.text.id);
    this.el.hidden = false;
    this.back.focus();
  }

  close() {
    this.release();
    this.question = null;
    this.el.hidden = true;
  }

  /** Start a hold: by the key ``key`` held on the button, or (null) the mouse button. @param {string | null} key */
  press(key) {
    this.stopWatching();
    clearTimeout(this.timer);
    this.holdKey = key;
    this.yes.dataset.holding = "true";
    this.fill.style.transitionDuration = `${HOLD_MS}ms`;
    this.timer = setTimeout(() => this.done(), HOLD_MS);
    document.addEventListener("keyup", this.onKeyUp, true);
    document.addEventListener("keydown", this.onKeyDown, true);
    document.addEventListener("visibilitychange", this.onLost);
    window.addEventListener("blur", this.onLost);
    this.yes.addEventListener("blur", this.onLost);
  }

  stopWatching() {
    document.removeEventListener("keyup", this.onKeyUp, true);
    document.removeEventListener("keydown", this.onKeyDown, true);
    document.removeEventListener("visibilitychange", this.onLost);
    window.removeEventListener("blur", this.onLost);
    this.yes.removeEventListener("blur", this.onLost);
    this.holdKey = null;
  }

  release() {
    if (this.timer === undefined) return;
    this.stopWatching();
    clearTimeout(this.timer);
    this.timer = undefined;
    this.yes.dataset.holding = "false";
    if (this.question) this.nudge();
  }

  nudge() {
    this.hint.dataset.nudge = "true";
    this.hint.textContent = "Not yet: keep the button pressed until it fills. Nothing was decided.";
  }

  done() {
    this.stopWatching();
    this.timer = undefined;
    this.yes.dataset.holding = "false";
    const question = this.question;
    this.question = null;
    if (question) question.action();
  }
}
