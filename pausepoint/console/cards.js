// @ts-check
// An interrupt card: a paused call as the person deciding on it reads it (the server's view:
// title, summary, the fields that matter, risk, expiry; who asked), what each answer will do in
// the card's own words (effects.js), and the answers themselves — approve, approve for the
// session, respond with a value (only where a plain yes cannot answer), edit the input, deny —
// each with an optional comment kept in the audit trail.
//
// A card shows the state cardstate.js works out from the session's events (`apply`); it never
// settles itself from what it guesses.
//
// Safety rules (a decision never comes from a stray keystroke):
// - the console never moves focus to a card; single-key shortcuts act only on the card that has
//   focus, i.e. one the person clicked or tabbed to, and they only open a step, never decide;
// - a decision from a shortcut, on a high-risk pause, or with "confirm every decision" on, goes
//   through a confirmation step (confirm.js) that opens on "Back"; on a high-risk pause its yes
//   is held down; any other key there closes it with nothing decided;
// - Enter never submits a card's form (it is a newline, or nothing): click, or Ctrl+Enter.

import { CONFIRM_KEYS, Confirmation } from "./confirm.js";
import { decisionComment, decisionLabel, decisionSentence, decisionTone, editedFields } from "./decisions.js";
import { effectsOf, fieldText, questionOf } from "./effects.js";
import { mayRespond } from "./cardstate.js";
import { SchemaForm } from "./forms.js";
import { countdown, h, jsonView, localTime, plainText, visible } from "./dom.js";
import { unreachable } from "./api.js";

let counter = 0;

/**
 * @typedef {{answer: (card: InterruptCard, action: "approve" | "respond" | "deny", body: any) => Promise<void>,
 *   validate: (tool: string, kind: "input" | "output", value: any) => Promise<{valid: boolean, errors: any[]}>,
 *   expired: (card: InterruptCard) => void,
 *   confirmAll: () => boolean, canAnswer: boolean, principal?: string,
 *   asker: {who: string | null, at: string | null}}} CardContext
 * @typedef {import("./cardstate.js").CardState} CardState
 * @typedef {"approve" | "grant" | "respond" | "edit" | "deny"} Decision what a card's step decides
 */

export class InterruptCard {
  /**
   * @param {any} pause a pending interrupt (with its `view`), or an answered one rebuilt from the audit trail
   * @param {any} tool the tool's description from GET /v1/agents/{agent} (or null)
   * @param {CardContext} ctx
   */
  constructor(pause, tool, ctx) {
    this.pause = pause;
    this.tool = tool;
    this.ctx = ctx;
    this.view = pause.view || { title: pause.name, summary: "", fields: [], risk: "normal", on_expiry: null };
    this.id = `card-${++counter}`;
    this.answering = false;
    /** @type {null | "confirm" | "deny" | "respond" | "edit"} */
    this.panel = null;
    this.validation = 0;
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    this.validateTimer = undefined;
    const id = this.id;
    const view = this.view;
    this.effects = effectsOf(pause, view, tool);
    this.mayApprove = false;
    this.mayDeny = true;
    this.mayRespond = true;
    /** @type {Record<string, boolean>} which single-key shortcuts this card takes now */
    this.shortcuts = {};
    /** @type {Record<Decision, boolean>} what this person may decide on the card now (its buttons) */
    this.offered = { approve: false, grant: false, respond: false, edit: false, deny: false };
    /** @type {Decision | null} what the open step (a form, a confirmation) decides */
    this.deciding = null;
    /** @type {{form: SchemaForm, kind: "input" | "output"} | null} the form the last answer was made on */
    this.answeredFrom = null;

    this.badge = h("span", { class: "badge badge-wait" });
    this.status = h("p", { class: "card-status", role: "status" });
    this.expiry = pause.expires_at ? h("p", { class: "card-expiry" }) : null;
    this.approvalBox = h("div", { class: "card-approval", hidden: true });
    this.effectLine = h("p", { class: "card-effect" });
    this.comment = /** @type {HTMLInputElement} */ (h("input", { id: `${id}-comment`, type: "text", autocomplete: "off",
      maxlength: "500", placeholder: "Why you decided as you did" }));
    this.commentBox = h("div", { class: "card-comment" },
      h("label", { for: `${id}-comment`, text: "Comment for the audit trail (optional)" }), this.comment);
    this.actionsRow = h("div", { class: "card-actions" });
    this.confirmation = new Confirmation(id, () => this.back(""));
    this.keysHint = h("p", { class: "card-keys", "aria-hidden": "true" });

    // -- deny -----------------------------------------------------------------------------------
    this.reason = /** @type {HTMLTextAreaElement} */ (h("textarea", { id: `${id}-reason`, rows: "2",
      placeholder: "Why not? The agent reads this.", "aria-describedby": `${id}-deny-effect` }));
    this.denyForm = this.form("deny", `Deny “${view.title}”`, "Reason for denying (the agent reads it)", `${id}-reason`, this.reason,
      h("p", { class: "form-effect", id: `${id}-deny-effect`, text: this.effects.deny }),
      h("button", { type: "submit", class: "btn btn-deny" }, "Deny"));

    // -- respond with a value (a form from the output schema) -----------------------------------
    // an MCP server's question is answered by what it asks for (its requested_schema), not the tool's result
    this.question = questionOf(pause);
    const answerSchema = this.question ? this.question.requested_schema || null : tool ? tool.output_schema : null;
    this.respondSchema = new SchemaForm(answerSchema, undefined, `${id}-out`, "Answer (JSON)");
    this.respondForm = this.form("respond", `Respond to “${view.title}”`, `Your answer to “${view.title}”`, null,
      this.respondSchema.el, h("p", { class: "form-effect", text: this.effects.respond }),
      h("button", { type: "submit", class: "btn btn-primary" }, "Send answer"));
    this.watch(this.respondSchema, "output");

    // -- edit the input (a form from the input schema) ------------------------------------------
    this.editSchema = tool && tool.allow_input_edits ? new SchemaForm(tool.input_schema, pause.input, `${id}-in`, "Input (JSON)") : null;
    this.editForm = this.editSchema
      ? this.form("edit", `Edit “${view.title}”`, "Edit the input, then approve it", null, this.editSchema.el,
        h("p", { class: "form-effect", text: this.effects.edit }),
        h("button", { type: "submit", class: "btn btn-approve" }, "Approve with this input"))
      : null;
    if (this.editSchema) this.watch(this.editSchema, "input");

    // -- the card -------------------------------------------------------------------------------
    const fields = view.fields.length
      ? h("dl", { class: "card-fields" }, ...view.fields.map((/** @type {any} */ f) => h("div", { class: "card-field" },
        h("dt", { title: f.description || null, text: f.label }), h("dd", { text: fieldText(f, view) }))))
      : null;
    const why = pause.metadata && typeof pause.metadata.reason === "string"
      ? h("p", { class: "card-why" }, h("strong", { text: "Why it paused: " }), visible(pause.metadata.reason)) : null;
    const details = h("details", { class: "card-details" },
      h("summary", { text: "Details: tool, ref, raw input" }),
      h("p", { class: "card-tool" }, h("span", { class: "mono", text: pause.name }),
        tool && tool.description ? ` — ${tool.description}` : ""),
      h("p", { class: "card-ref" }, "ref ", h("span", { class: "mono", text: pause.ref })),
      jsonView(pause.input, "Input"),
      pause.metadata && Object.keys(pause.metadata).length ? jsonView(pause.metadata, "Metadata") : null);
    const risk = view.risk === "high" ? h("span", { class: "badge badge-risk", text: "High risk" })
      : view.risk === "low" ? h("span", { class: "badge badge-muted", text: "Low risk" }) : null;

    this.el = h("article", {
      class: "card", tabindex: "0", "aria-labelledby": `${id}-title`, "aria-describedby": `${id}-summary`,
      dataset: { ref: pause.ref, state: "open", tool: pause.name, risk: view.risk },
    },
      h("header", { class: "card-head" },
        h("div", { class: "card-badges" }, this.badge, risk),
        h("h3", { id: `${id}-title`, class: "card-title", text: view.title }),
        view.summary ? h("p", { id: `${id}-summary`, class: "card-summary", text: view.summary }) : null,
        this.askerLine()),
      fields, why, this.approvalBox, this.expiry, this.effectLine,
      ctx.canAnswer ? this.commentBox : null, ctx.canAnswer ? this.actionsRow : null,
      this.confirmation.el, this.denyForm, this.respondForm, this.editForm,
      this.status, ctx.canAnswer ? this.keysHint : null, details);
    this.el.addEventListener("keydown", (e) => this.onKey(e));
    this.reopen(pause);
    this.tick(Date.now());
  }

  /** "Asked by alice at 14:03:12" (or "by you (alice)"). */
  askerLine() {
    const { who, at } = this.ctx.asker;
    if (!who) return null;
    const name = who === this.ctx.principal ? `you (${who})` : who;
    return h("p", { class: "card-asker", title: at ? new Date(at).toString() : null,
      text: `Asked by ${name}${at ? ` at ${localTime(at)}` : ""}` });
  }

  get open() {
    return this.el.dataset.state === "open" || this.el.dataset.state === "counted";
  }

  // -- what the card shows while the pause waits ---------------------------------------------------

  /**
   * Show the pause as the server now has it: its view, where its approval stands, who may do what.
   * @param {any} pause
   */
  reopen(pause) {
    this.pause = pause;
    if (pause.view) this.view = pause.view;
    const shown = this.view.approval || null;
    const principal = this.ctx.principal || "";
    const approval = this.question ? null : this.tool ? this.tool.approval : null;
    this.effects = effectsOf(pause, this.view, this.tool);
    const counted = !!(shown && principal && shown.approved_by.includes(principal));
    const excluded = !!(shown && principal && shown.excluded.includes(principal));
    const outsider = !!(shown && principal && Array.isArray(shown.may_approve) && !shown.may_approve.includes(principal)
      && !shown.approved_by.includes(principal));
    this.mayApprove = !!approval && !excluded && !outsider;
    // Who may deny is the policy's too (an approver without the role may not: the server says 403).
    this.mayDeny = !(shown && principal && Array.isArray(shown.may_deny) && !shown.may_deny.includes(principal));
    this.mayRespond = mayRespond(shown, principal);
    const stillDeny = this.mayDeny ? " (you may still deny)." : ".";
    // the roles that may give what the pause waits for (not one that may only deny it)
    const approvers = shown && shown.approving_roles && shown.approving_roles.length ? shown.approving_roles.join(" or ") : "";
    this.el.dataset.state = counted ? "counted" : "open";
    this.renderApproval(shown, false);
    this.badge.className = "badge badge-wait";
    this.badge.textContent = !this.ctx.canAnswer ? "Waiting for an answer"
      : counted ? "Waiting for others"
      : excluded || outsider ? `Waiting for ${approvers || "someone else"}`
      : "Waiting for you";
    if (!this.ctx.canAnswer) this.effectLine.textContent = "You may see this pause, but not answer it.";
    else if (counted) this.effectLine.textContent = `Your approval is counted: the others decide now${stillDeny}`;
    else if (excluded || outsider) {
      // why not this person: separation of duties (they asked for it), or a role they do not hold
      this.effectLine.textContent = excluded && shown && shown.requested_by === principal
        ? `You asked for this call: someone else approves it${stillDeny}`
        : approvers ? `Approving this call takes ${approvers}, which you do not hold${stillDeny}`
        : `Someone else approves this call${stillDeny}`;
    } else if (this.effects.approve) {
      this.effectLine.replaceChildren(h("strong", { text: "If you approve: " }), this.effects.approve);
    } else this.effectLine.textContent = this.effects.respond;
    this.renderActions();
  }

  renderActions() {
    const approval = this.view.approval;
    const grantable = !!(approval && approval.grantable);
    // a yes is Approve: one way to say it (a question takes an answer, never a yes)
    const canRespond = (!!this.question || !(this.tool && this.tool.approval)) && this.mayRespond;
    // An edit is an approval of another input: only where the approval policy takes one (its
    // decisions say "edit"), and never under a quorum (every approver approves the same input).
    const mayEdit = !!(this.editForm && this.mayApprove)
      && !(approval && (approval.required > 1 || (approval.decisions.length && !approval.decisions.includes("edit"))));
    const buttons = [
      this.mayApprove ? h("button", { type: "button", class: "btn btn-approve", onclick: () => this.approve() }, "Approve") : null,
      this.mayApprove && grantable
        ? h("button", { type: "button", class: "btn", onclick: () => this.approve({ grant: true }) }, "Approve for this session") : null,
      canRespond ? h("button", { type: "button", class: "btn", onclick: () => this.openPanel("respond") }, "Respond…") : null,
      mayEdit ? h("button", { type: "button", class: "btn", onclick: () => this.openPanel("edit") }, "Edit input…") : null,
      this.mayDeny ? h("button", { type: "button", class: "btn btn-deny", onclick: () => this.openPanel("deny") }, "Deny…") : null,
    ];
    this.actionsRow.replaceChildren(...buttons.filter((b) => b !== null));
    this.offered = { approve: this.mayApprove, grant: this.mayApprove && grantable, respond: canRespond, edit: mayEdit,
      deny: this.mayDeny };
    this.shortcuts = { a: this.mayApprove, r: canRespond, e: mayEdit, d: this.mayDeny };
    const keys = [["a", "approve"], ["r", "respond"], ["e", "edit"], ["d", "deny"]].filter(([key]) => this.shortcuts[key]);
    this.keysHint.replaceChildren("Selected · ", ...keys.flatMap(([key, word]) => [h("kbd", { text: key }), ` ${word} · `]),
      h("kbd", { text: "Esc" }), " close");
  }

  /**
   * Where the approval stands: "1 of 2 approvals", who approved, who is still needed; settled,
   * only a quorum's final count.
   * @param {any} shown the view's `approval` (or null) @param {boolean} settled
   */
  renderApproval(shown, settled) {
    const box = this.approvalBox;
    if (!shown) {
      box.hidden = true;
      return;
    }
    const by = shown.approved_by.length ? ` · approved by ${shown.approved_by.join(", ")}` : "";
    const quorum = shown.required > 1;
    const notes = settled ? [] : [shown.escalated, this.effects.offerNote, this.effects.grantNote].filter(Boolean);
    const progress = quorum || shown.approved_by.length ? [h("p", { class: "approval-progress" }, h("strong", { text: shown.progress }), by)] : [];
    const waiting = !settled && (quorum || (shown.roles && shown.roles.length)) ? [h("p", { class: "approval-waiting", text: shown.waiting_for })] : [];
    box.replaceChildren(...progress, ...waiting, ...notes.map((text) => h("p", { class: "approval-note", text })));
    box.hidden = !box.childElementCount;
    box.dataset.settled = settled ? "true" : "false";
    box.dataset.approvals = String(shown.approvals);
    box.dataset.required = String(shown.required);
  }

  /**
   * A form that opens inside the card: Enter never submits it (Ctrl+Enter does).
   * @param {string} kind @param {string} name its accessible name @param {string} label its heading
   * @param {string | null} labelFor the control the heading labels
   * @param {HTMLElement} body @param {HTMLElement} effect @param {HTMLElement} submit
   */
  form(kind, name, label, labelFor, body, effect, submit) {
    const form = h("form", { class: "card-form", hidden: true, novalidate: true, "aria-label": name,
      onsubmit: (/** @type {Event} */ e) => { e.preventDefault(); this.submit(kind); } },
    labelFor ? h("label", { for: labelFor, class: "form-label", text: label }) : h("p", { class: "form-label", text: label }),
    body, effect,
    h("div", { class: "card-form-actions" }, submit,
      h("button", { type: "button", class: "btn btn-quiet", onclick: () => this.back("") }, "Back")));
    form.addEventListener("keydown", (e) => {
      if (e.key !== "Enter") return;
      if (e.ctrlKey || e.metaKey) { e.preventDefault(); this.submit(kind); }
      else if (e.target instanceof HTMLInputElement) e.preventDefault(); // no implicit submission
    });
    return form;
  }

  /** Validate as the person types (on the server, debounced). @param {SchemaForm} form @param {"input"|"output"} kind */
  watch(form, kind) {
    form.el.addEventListener("input", () => {
      clearTimeout(this.validateTimer);
      this.validateTimer = setTimeout(() => this.check(form, kind), 250);
    });
  }

  /**
   * Check the form's value; show every problem next to its field. Resolves with the value, or undefined.
   * @param {SchemaForm} form @param {"input"|"output"} kind
   */
  async check(form, kind) {
    const serial = ++this.validation;
    const { value, problems } = form.read();
    if (problems.length) {
      form.showErrors(problems);
      return undefined;
    }
    // the tool's schemas say nothing of an answer to the server's question: the server checks
    // it against the question's own schema when it is sent (a refusal shows on the card)
    if (this.question && form === this.respondSchema) return value;
    let result;
    try {
      result = await this.ctx.validate(this.pause.name, kind, value);
    } catch (error) {
      if (serial !== this.validation) return undefined;
      // The server is out of reach: the answer may still be confirmed and wait on the card, as
      // every decision does; the server checks it as it does every answer when it gets it.
      if (unreachable(error)) return value;
      form.showErrors([{ path: [], message: `Could not check: ${error instanceof Error ? error.message : error}` }]);
      return undefined;
    }
    if (serial !== this.validation) return undefined; // a newer check is under way
    form.showErrors(result.errors);
    return result.valid ? value : undefined;
  }

  // -- keys -------------------------------------------------------------------------------------

  /** @param {KeyboardEvent} e */
  onKey(e) {
    if (this.panel === "confirm" && !CONFIRM_KEYS.has(e.key)) {
      // anything but Enter/Space/Tab/Escape in a confirmation: nothing is decided
      e.preventDefault();
      e.stopPropagation();
      this.back("Not confirmed: nothing was decided.");
      return;
    }
    if (e.key === "Escape" && this.panel) {
      e.preventDefault();
      this.back("");
      return;
    }
    if (e.target !== this.el || !this.open || !this.ctx.canAnswer || this.answering) return;
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    const action = { a: "approve", d: "deny", r: "respond", e: "edit" }[e.key];
    if (!action || !this.shortcuts[e.key]) return;
    e.preventDefault();
    if (action === "approve") this.approve({ fromKey: true });
    else this.openPanel(/** @type {"deny"|"respond"|"edit"} */ (action));
  }

  // -- opening and closing steps ------------------------------------------------------------------

  /** @param {"deny" | "respond" | "edit"} kind */
  openPanel(kind) {
    if (!this.open || this.answering || !this.ctx.canAnswer) return;
    this.deciding = kind;
    this.show(kind);
    const target = kind === "deny" ? this.reason : kind === "respond" ? this.respondSchema.first() : this.editSchema && this.editSchema.first();
    if (target) target.focus();
    if (kind === "edit" && this.editSchema) this.check(this.editSchema, "input");
  }

  /** @param {null | "confirm" | "deny" | "respond" | "edit"} panel */
  show(panel) {
    this.panel = panel;
    if (panel !== "confirm") this.confirmation.close();
    this.denyForm.hidden = panel !== "deny";
    this.respondForm.hidden = panel !== "respond";
    if (this.editForm) this.editForm.hidden = panel !== "edit";
    this.actionsRow.hidden = panel !== null;
    this.el.dataset.panel = panel || "";
  }

  /** Close whatever step is open, back to the card. @param {string} note */
  back(note) {
    this.show(null);
    this.setStatus(note, note ? "note" : "");
    if (this.el.isConnected) this.el.focus({ preventScroll: true });
  }

  // -- deciding -----------------------------------------------------------------------------------

  /** What goes with every answer: the person's comment, kept in the audit trail. */
  metadata() {
    const comment = this.comment.value.trim();
    return comment ? { metadata: { comment } } : {};
  }

  /**
   * Approve: at once, or after the confirmation step when it must be confirmed.
   * @param {{fromKey?: boolean, grant?: boolean}} [how]
   */
  approve({ fromKey = false, grant = false } = {}) {
    if (!this.open || this.answering || !this.mayApprove) return;
    this.deciding = grant ? "grant" : "approve";
    if (grant) {
      // a grant always asks first: it approves more than the call in front of the person
      this.decide(`Approve “${this.view.title}” and later calls for this session?`, this.effects.grant, [],
        "approve for this session", () => this.send(null, "approve", { grant: {}, ...this.metadata() }),
        true, "Approving for this session");
      return;
    }
    this.decide(`Approve “${this.view.title}”?`, this.effects.approve, [], "approve",
      () => this.send(null, "approve", this.metadata()), fromKey, "Approving");
  }

  /**
   * Run `action` at once, or ask first: from a shortcut, on a high-risk pause (held), or with
   * "confirm every decision" on.
   * @param {string} title @param {string} effect @param {string[]} lines @param {string} verb
   * @param {() => Promise<void>} action @param {boolean} ask @param {string} busy
   */
  decide(title, effect, lines, verb, action, ask, busy) {
    const run = () => this.run(busy, action);
    const held = this.view.risk === "high";
    if (!(ask || held || this.ctx.confirmAll())) {
      run();
      return;
    }
    this.show("confirm");
    this.setStatus("", "");
    this.confirmation.open({ title, text: effect, lines, held, action: run,
      yes: held ? `Hold to ${verb}` : `Yes, ${verb}` });
  }

  /**
   * Give an answer (`from`: the form it was made on, whose fields a refusal marks).
   * @param {{form: SchemaForm, kind: "input" | "output"} | null} from
   * @param {"approve" | "respond" | "deny"} action @param {any} body
   */
  send(from, action, body) {
    this.answeredFrom = from;
    return this.ctx.answer(this, action, body);
  }

  /** @param {string} kind */
  async submit(kind) {
    if (!this.open || this.answering) return;
    this.setStatus("", ""); // what was said of an earlier try (a refusal) no longer holds
    if (kind === "deny") {
      const reason = this.reason.value.trim();
      if (!reason) {
        this.setStatus("Give a reason: the agent reads it to decide what to do next.", "error");
        this.reason.focus();
        return;
      }
      this.decide(`Deny “${this.view.title}”?`, this.effects.deny, [`Reason: “${reason}”`], "deny",
        () => this.send(null, "deny", { reason, ...this.metadata() }), false, "Denying");
    } else if (kind === "respond") {
      const value = await this.check(this.respondSchema, "output");
      if (value === undefined) return this.focusError(this.respondSchema);
      this.decide(`Send this answer to “${this.view.title}”?`, this.effects.respond, [plainText(value)], "send this answer",
        () => this.send({ form: this.respondSchema, kind: "output" }, "respond", { output: value, ...this.metadata() }),
        false, "Sending the answer");
    } else if (kind === "edit" && this.editSchema) {
      const edit = this.editSchema;
      const value = await this.check(edit, "input");
      if (value === undefined) return this.focusError(edit);
      const changes = editedFields({ ref: "", name: "", decision: "restart", at: "", principal: null, via: "",
        input: this.pause.input, replace_input: value, view: this.view });
      const lines = changes.length ? changes.map((c) => `${c.label}: ${c.from} → ${c.to}`) : ["Nothing was changed."];
      this.decide(`Approve “${this.view.title}” with the edited input?`, this.effects.editedApprove(value), lines,
        "approve the edited input",
        () => this.send({ form: edit, kind: "input" }, "approve", { replace_input: value, ...this.metadata() }),
        false, "Approving the edited input");
    }
  }

  /** @param {SchemaForm} form */
  focusError(form) {
    const bad = form.el.querySelector('[aria-invalid="true"]');
    if (bad instanceof HTMLElement) bad.focus();
  }

  /** @param {string} label @param {() => Promise<void>} action */
  async run(label, action) {
    if (!this.open || this.answering) return;
    this.show(null);
    this.setBusy(true, `${label}…`);
    try {
      await action();
    } catch (error) {
      if (this.open) this.refused(error instanceof Error ? error.message : String(error));
    }
  }

  /**
   * The server refused this card's answer: say why on the card, and check the form it was made
   * on again, so that each problem the server finds is shown next to its field when the form
   * opens again. @param {string} text
   */
  refused(text) {
    this.setBusy(false);
    this.setStatus(text, "error");
    if (this.answeredFrom) this.check(this.answeredFrom.form, this.answeredFrom.kind);
  }

  /** @param {boolean} busy @param {string} [text] */
  setBusy(busy, text) {
    this.answering = busy;
    for (const b of this.el.querySelectorAll("button, input, textarea, select")) {
      /** @type {HTMLButtonElement} */ (b).disabled = busy;
    }
    this.el.setAttribute("aria-busy", busy ? "true" : "false");
    if (text !== undefined) this.setStatus(text, "");
  }

  /** Nothing may be decided here any more (signed out): every control off. */
  freeze() {
    this.show(null);
    for (const b of this.el.querySelectorAll("button, input, textarea, select")) {
      /** @type {HTMLButtonElement} */ (b).disabled = true;
    }
  }

  /**
   * The answer waits for the server to be back: say so, and let the person take it back.
   * @param {string} text @param {() => void} takeBack
   */
  waitForServer(text, takeBack) {
    this.setStatus(text, "error");
    this.status.append(" ", h("button", { type: "button", class: "link-button", text: "Don't send it",
      onclick: () => {
        takeBack();
        this.setStatus("Not sent again. If it reached the server before the connection broke, it stands: "
          + "this card shows what the server holds once it answers.", "note");
      } }));
  }

  /** @param {string} text @param {string} kind */
  setStatus(text, kind) {
    this.status.textContent = text || "";
    this.status.dataset.kind = kind || "";
  }

  // -- time -------------------------------------------------------------------------------------

  /** Redraw the expiry countdown; at zero the card stops taking answers. @param {number} now */
  tick(now) {
    if (!this.expiry || !this.pause.expires_at || !this.open) return;
    const at = localTime(this.pause.expires_at);
    const after = this.view.on_expiry ? ` ${this.view.on_expiry}` : "";
    const left = countdown(this.pause.expires_at, now);
    if (left) {
      this.expiry.replaceChildren(h("strong", { text: `Expires in ${left}` }), ` (at ${at}). If nobody answers by then:${after}`);
      this.expiry.dataset.urgent = new Date(this.pause.expires_at).getTime() - now < 60_000 ? "true" : "false";
      return;
    }
    this.apply({ kind: "expiring", pause: this.pause, entry: null, approvers: [], required: 0, elsewhere: false });
    this.ctx.expired(this);
  }

  // -- the state the session's events give it ---------------------------------------------------------

  /** Show `state` (cardstate.js); a settled card never opens again. @param {CardState | undefined} state */
  apply(state) {
    if (!state) return;
    const settled = !this.open && this.el.dataset.state !== "expiring";
    if (state.kind === "open" || state.kind === "counted") {
      if (settled || this.answering) return;
      const was = this.el.dataset.state;
      if (was === "expiring" && !this.handedOn(state.pause)) return;
      this.reopen(state.pause);
      if (was === "expiring") this.unexpire();
      const counted = state.kind === "counted" && was !== "counted" && !!this.view.approval;
      if (counted) {
        this.setStatus(`Your approval is counted: ${this.view.approval.progress}. ${this.view.approval.waiting_for}`, "note");
      }
      if (this.panel && this.deciding && !this.offered[this.deciding]) this.withdraw(counted);
      return;
    }
    if (state.kind === "expiring") {
      if (settled) return;
      this.el.dataset.state = "expiring";
      this.badge.className = "badge badge-muted";
      this.badge.textContent = "Expired";
      if (this.expiry && this.pause.expires_at) {
        const after = this.view.on_expiry ? ` ${this.view.on_expiry}` : "";
        this.expiry.replaceChildren(h("strong", { text: `Expired at ${localTime(this.pause.expires_at)}.` }),
          ` It can no longer be answered.${after}`);
        this.expiry.dataset.urgent = "true";
      }
      for (const part of [this.actionsRow, this.keysHint, this.effectLine, this.commentBox]) part.remove();
      this.show(null);
      return;
    }
    this.settle(state);
  }

  /**
   * Whether `pause` (read from the server) waits past the time this card ran out at: an
   * escalation handed it to other approvers with a time of their own. @param {any} pause
   */
  handedOn(pause) {
    const until = pause && pause.expires_at ? new Date(pause.expires_at).getTime() : Infinity;
    return until > (this.pause.expires_at ? new Date(this.pause.expires_at).getTime() : Infinity);
  }

  /** The pause was handed on rather than expired: put back what the expired card took away. */
  unexpire() {
    (this.expiry || this.approvalBox).after(this.effectLine);
    if (this.ctx.canAnswer) {
      this.effectLine.after(this.commentBox, this.actionsRow);
      this.status.after(this.keysHint);
    }
    this.tick(Date.now());
  }

  /**
   * The open step decides something this person may no longer decide (their approval is counted
   * from another tab, the pause went to other approvers): close it with nothing decided, as an
   * expiry or an answer from elsewhere closes it, rather than leave a yes the server would refuse.
   * Focus in the step stays on the card. @param {boolean} counted the card says why already
   */
  withdraw(counted) {
    const focused = document.activeElement;
    const inStep = !!focused && focused !== this.el && this.el.contains(focused);
    this.show(null);
    if (!counted) this.setStatus("This is no longer yours to decide: the pause changed meanwhile. Nothing was decided.", "note");
    if (inStep) this.el.focus({ preventScroll: true });
  }

  /** Nothing is decided here any more: the card's controls and forms go, nothing is under way. */
  offerNothing() {
    this.answering = false;
    this.show(null);
    for (const part of [this.actionsRow, this.confirmation.el, this.denyForm, this.respondForm, this.editForm, this.keysHint,
      this.effectLine, this.expiry, this.commentBox]) {
      if (part) part.remove();
    }
    this.el.setAttribute("aria-busy", "false");
  }

  /** @param {CardState} state */
  settle(state) {
    const entry = state.entry;
    this.offerNothing();
    if (state.required > 1) {
      const progress = `${state.approvers.length} of ${state.required} approvals`;
      this.renderApproval({ progress, approved_by: state.approvers, approvals: state.approvers.length,
        required: state.required, roles: null }, true);
    } else this.approvalBox.remove();
    const label = decisionLabel(entry);
    const edits = editedFields(entry).map((c) => `${c.label}: ${c.from} → ${c.to}`);
    let text = decisionSentence(entry);
    if (edits.length) text = `${text.replace(/\.$/, "")}. Changed: ${edits.join("; ")}.`;
    const comment = decisionComment(entry);
    if (comment) text = `${text.replace(/\.$/, "")}. Comment: “${comment}”`;
    const kind = state.elsewhere ? "elsewhere" : state.kind;
    this.el.dataset.state = kind;
    this.badge.className = `badge badge-${state.kind === "answered" && !state.elsewhere ? decisionTone(entry) : "muted"}`;
    this.badge.textContent = state.elsewhere ? "Already answered" : label;
    this.setStatus(state.elsewhere ? `Already answered elsewhere: ${text}` : text, kind);
  }

  /**
   * The session is gone (deleted, or no longer the reader's): the server answers for it no more,
   * so nothing is offered, as a settled card offers nothing. Found by a probe: the card stayed
   * "Waiting for you" with Approve and Deny that the server refused.
   */
  gone() {
    if (this.el.dataset.state === "gone") return;
    this.offerNothing();
    this.el.dataset.state = "gone";
    this.badge.className = "badge badge-muted";
    this.badge.textContent = "Gone";
    this.setStatus("The session no longer exists (it was deleted): nothing here can be decided.", "note");
  }
}
