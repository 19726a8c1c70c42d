// @ts-check
// An interrupt card: a paused call as the person deciding on it reads it (the server's view:
// title, summary, the fields that matter, risk, expiry), what each answer will do, and the
// answers themselves — approve, respond with a value, edit the input, deny.
//
// Safety rules (a decision never comes from a stray keystroke):
// - the console never moves focus to a card; single-key shortcuts act only on the card that has
//   focus, i.e. one the person clicked or tabbed to, and they only open a step, never decide;
// - a decision from a shortcut, on a high-risk pause, or with "confirm every decision" on,
//   goes through a confirmation step; any other key there closes it with nothing decided;
// - Enter never submits a card's form (it is a newline, or nothing): click, or Ctrl+Enter.

import { decisionLabel, decisionSentence, decisionTone, editedFields } from "./decisions.js";
import { SchemaForm } from "./forms.js";
import { countdown, h, jsonView, localTime, plainText } from "./dom.js";

/** Keys that may be pressed in a confirmation step without closing it. */
const CONFIRM_KEYS = new Set(["Enter", "Tab", "Shift", "Escape"]);

let counter = 0;

/**
 * @typedef {{approve: (card: InterruptCard, body: any) => Promise<void>,
 *   respond: (card: InterruptCard, output: any) => Promise<void>,
 *   deny: (card: InterruptCard, reason: string) => Promise<void>,
 *   validate: (tool: string, kind: "input" | "output", value: any) => Promise<{valid: boolean, errors: any[]}>,
 *   expired: (card: InterruptCard) => void,
 *   confirmAll: () => boolean, canAnswer: boolean, principal?: string}} CardContext
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
    const name = pause.name;
    const approval = tool ? tool.approval : null;
    const canEdit = !!(tool && tool.allow_input_edits);

    // Under an approval policy: where the approval stands, and whether this person may give it
    // (not the requester under separation of duties; not someone whose approval is counted).
    const shown = view.approval || null;
    this.mayApprove = !(shown && ctx.principal && shown.excluded.includes(ctx.principal));
    this.canRespond = !shown || shown.decisions.includes("respond");
    this.approvalBox = shown ? h("div", { class: "card-approval" }) : null;
    this.renderApproval(shown);

    this.badge = h("span", { class: "badge badge-wait", text: ctx.canAnswer ? "Waiting for you" : "Waiting for an answer" });
    this.status = h("p", { class: "card-status", role: "status" });
    this.expiry = pause.expires_at ? h("p", { class: "card-expiry" }) : null;

    // -- what each answer does ------------------------------------------------------------------
    const selfPaused = tool && !tool.pauses_only;
    const more = shown && shown.required > 1 ? shown.required - shown.approvals : 0;
    /** @type {Record<string, string>} */
    this.effects = {
      approve: !approval ? ""
        : more > 1 ? `Your approval is counted (${shown.approvals + 1} of ${shown.required}); ${name} runs, on the input above, once ${more - 1} more approve.`
        : approval.kind === "restart" ? `${name} runs now, on the input above.`
        : `The agent is told: ${plainText(approval.output)}.`,
      grant: shown && shown.grantable ? `${name} runs now, on the input above; later calls of ${name} in this session run without asking, until the grant is revoked.` : "",
      respond: selfPaused ? `${name} does not run: the agent gets your answer as its result.`
        : "The agent gets your answer.",
      edit: `${name} runs now, on the input as you edit it.`,
      deny: selfPaused ? `${name} does not run: the agent is told it was denied, and why.`
        : "The agent is told you said no, and why.",
    };

    // -- actions --------------------------------------------------------------------------------
    this.approveBtn = approval && this.mayApprove
      ? h("button", { type: "button", class: "btn btn-approve", onclick: () => this.approve() }, "Approve")
      : null;
    this.grantBtn = approval && this.mayApprove && shown && shown.grantable
      ? h("button", { type: "button", class: "btn", onclick: () => this.approve({ grant: true }) }, "Approve for this session")
      : null;
    this.respondBtn = this.canRespond
      ? h("button", { type: "button", class: "btn", onclick: () => this.openPanel("respond") }, "Respond…") : null;
    this.editBtn = canEdit && this.mayApprove
      ? h("button", { type: "button", class: "btn", onclick: () => this.openPanel("edit") }, "Edit input…") : null;
    this.denyBtn = h("button", { type: "button", class: "btn btn-deny", onclick: () => this.openPanel("deny") }, "Deny…");
    this.actionsRow = h("div", { class: "card-actions" }, this.approveBtn, this.grantBtn, this.respondBtn, this.editBtn, this.denyBtn);

    // -- the confirmation step ------------------------------------------------------------------
    this.confirmTitle = h("p", { class: "confirm-title", id: `${id}-confirm-title` });
    this.confirmText = h("p", { class: "confirm-text" });
    this.confirmList = h("ul", { class: "confirm-list" });
    this.confirmYes = h("button", { type: "button", class: "btn btn-approve", onclick: () => this.confirmed() });
    this.confirmBox = h("div", { class: "card-confirm", role: "group", "aria-labelledby": `${id}-confirm-title`, hidden: true },
      this.confirmTitle, this.confirmText, this.confirmList,
      h("div", { class: "card-form-actions" }, this.confirmYes,
        h("button", { type: "button", class: "btn btn-quiet", onclick: () => this.back("") }, "Back")));
    /** @type {null | (() => Promise<void>)} */
    this.pending = null;

    // -- deny -----------------------------------------------------------------------------------
    this.reason = /** @type {HTMLTextAreaElement} */ (h("textarea", { id: `${id}-reason`, rows: "2",
      placeholder: "Why not? The agent reads this.", "aria-describedby": `${id}-deny-effect` }));
    this.denyForm = this.form("deny", `Deny “${view.title}”`, "Reason for denying (the agent reads it)", `${id}-reason`, this.reason,
      h("p", { class: "form-effect", id: `${id}-deny-effect`, text: this.effects.deny }),
      h("button", { type: "submit", class: "btn btn-deny" }, "Deny"));

    // -- respond with a value (a form from the output schema) -----------------------------------
    this.respondSchema = new SchemaForm(tool ? tool.output_schema : null, undefined, `${id}-out`, "Answer (JSON)");
    this.respondSubmit = h("button", { type: "submit", class: "btn btn-primary" }, "Send answer");
    this.respondForm = this.form("respond", `Respond to “${view.title}”`, `Your answer to “${view.title}”`, null,
      this.respondSchema.el,
      h("p", { class: "form-effect", text: this.effects.respond }), this.respondSubmit);
    this.watch(this.respondSchema, "output");

    // -- edit the input (a form from the input schema) ------------------------------------------
    if (canEdit) {
      this.editSchema = new SchemaForm(tool.input_schema, pause.input, `${id}-in`, "Input (JSON)");
      this.editSubmit = h("button", { type: "submit", class: "btn btn-approve" }, "Approve with this input");
      this.editForm = this.form("edit", `Edit “${view.title}”`, "Edit the input, then approve it", null, this.editSchema.el,
        h("p", { class: "form-effect", text: this.effects.edit }), this.editSubmit);
      this.watch(this.editSchema, "input");
    } else {
      this.editSchema = null;
      this.editSubmit = null;
      this.editForm = null;
    }

    // -- the card -------------------------------------------------------------------------------
    const fields = view.fields.length
      ? h("dl", { class: "card-fields" }, ...view.fields.map((/** @type {any} */ f) => h("div", { class: "card-field" },
        h("dt", { title: f.description || null, text: f.label }), h("dd", { text: f.text }))))
      : null;
    const why = pause.metadata && typeof pause.metadata.reason === "string"
      ? h("p", { class: "card-why" }, h("strong", { text: "Why it paused: " }), pause.metadata.reason) : null;
    this.effectLine = !this.mayApprove
      ? h("p", { class: "card-effect" }, shown && shown.approved_by.includes(ctx.principal)
        ? "Your approval is counted: the others decide now (you may still deny)."
        : "You asked for this call: someone else approves it (you may still deny).")
      : this.effects.approve
        ? h("p", { class: "card-effect" }, h("strong", { text: "If you approve: " }), this.effects.approve)
        : h("p", { class: "card-effect" }, "A plain yes cannot answer this: respond with a value, or deny.");
    this.keysHint = h("p", { class: "card-keys", "aria-hidden": "true" },
      "Selected · ", ...[this.approveBtn ? ["a", "approve"] : null, this.respondBtn ? ["r", "respond"] : null,
        this.editBtn ? ["e", "edit"] : null, ["d", "deny"]]
        .filter(Boolean).flatMap((pair) => [h("kbd", { text: /** @type {string[]} */ (pair)[0] }), ` ${/** @type {string[]} */ (pair)[1]} · `]),
      h("kbd", { text: "Esc" }), " close");
    const details = h("details", { class: "card-details" },
      h("summary", { text: "Details: tool, ref, raw input" }),
      h("p", { class: "card-tool" }, h("span", { class: "mono", text: name }),
        tool && tool.description ? ` — ${tool.description}` : ""),
      h("p", { class: "card-ref" }, "ref ", h("span", { class: "mono", text: pause.ref })),
      jsonView(pause.input, "Input"),
      pause.metadata && Object.keys(pause.metadata).length ? jsonView(pause.metadata, "Metadata") : null);
    const risk = view.risk === "high" ? h("span", { class: "badge badge-risk", text: "High risk" })
      : view.risk === "low" ? h("span", { class: "badge badge-muted", text: "Low risk" }) : null;

    this.el = h("article", {
      class: "card", tabindex: "0", "aria-labelledby": `${id}-title`, "aria-describedby": `${id}-summary`,
      dataset: { ref: pause.ref, state: "open", tool: name, risk: view.risk },
    },
      h("header", { class: "card-head" },
        h("div", { class: "card-badges" }, this.badge, risk),
        h("h3", { id: `${id}-title`, class: "card-title", text: view.title }),
        view.summary ? h("p", { id: `${id}-summary`, class: "card-summary", text: view.summary }) : null),
      fields, why, this.approvalBox, this.expiry,
      ctx.canAnswer ? this.effectLine : h("p", { class: "card-effect", text: "You may see this pause, but not answer it." }),
      ctx.canAnswer ? this.actionsRow : null,
      this.confirmBox, this.denyForm, this.respondForm, this.editForm,
      this.status, ctx.canAnswer ? this.keysHint : null, details);
    this.el.addEventListener("keydown", (e) => this.onKey(e));
    this.tick(Date.now());
  }

  get open() {
    return this.el.dataset.state === "open";
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
    let result;
    try {
      result = await this.ctx.validate(this.pause.name, kind, value);
    } catch (error) {
      if (serial === this.validation) form.showErrors([{ path: [], message: `Could not check: ${error instanceof Error ? error.message : error}` }]);
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
      // anything but Enter/Tab/Escape in a confirmation: nothing is decided
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
    if (!action || (action === "respond" && !this.respondBtn)) return;
    e.preventDefault();
    if (action === "approve") this.approve({ fromKey: true });
    else this.openPanel(/** @type {"deny"|"respond"|"edit"} */ (action));
  }

  // -- opening and closing steps ------------------------------------------------------------------

  /** @param {"deny" | "respond" | "edit"} kind */
  openPanel(kind) {
    if (!this.open || this.answering || !this.ctx.canAnswer) return;
    if ((kind === "edit" && !this.editBtn) || (kind === "respond" && !this.respondBtn)) return;
    this.show(kind);
    const target = kind === "deny" ? this.reason : kind === "respond" ? this.respondSchema.first() : this.editSchema && this.editSchema.first();
    if (target) target.focus();
    if (kind === "edit" && this.editSchema) this.check(this.editSchema, "input");
  }

  /** @param {null | "confirm" | "deny" | "respond" | "edit"} panel */
  show(panel) {
    this.panel = panel;
    this.confirmBox.hidden = panel !== "confirm";
    this.denyForm.hidden = panel !== "deny";
    this.respondForm.hidden = panel !== "respond";
    if (this.editForm) this.editForm.hidden = panel !== "edit";
    this.actionsRow.hidden = panel !== null;
    this.el.dataset.panel = panel || "";
  }

  /** Close whatever step is open, back to the card. @param {string} note */
  back(note) {
    this.pending = null;
    this.show(null);
    this.setStatus(note, note ? "note" : "");
    if (this.el.isConnected) this.el.focus({ preventScroll: true });
  }

  // -- deciding -----------------------------------------------------------------------------------

  /**
   * Approve: at once, or after the confirmation step when it must be confirmed.
   * @param {{fromKey?: boolean, grant?: boolean}} [how]
   */
  approve({ fromKey = false, grant = false } = {}) {
    if (!this.open || this.answering || !this.approveBtn) return;
    if (grant && this.grantBtn) {
      // a grant always asks first: it approves more than the call in front of the person
      this.decide(`Approve “${this.view.title}” and later calls for this session?`, this.effects.grant,
        [this.view.approval.grant_note], "Yes, approve for this session", () => this.ctx.approve(this, { grant: {} }),
        true, "Approving for this session");
      return;
    }
    this.decide(`Approve “${this.view.title}”?`, this.effects.approve, [], "Yes, approve",
      () => this.ctx.approve(this, {}), fromKey, "Approving");
  }

  /**
   * Where the approval stands: "1 of 2 approvals", who approved, who is still needed.
   * @param {any} shown the view's `approval` (or null)
   */
  renderApproval(shown) {
    if (!this.approvalBox || !shown) return;
    const by = shown.approved_by.length ? ` · approved by ${shown.approved_by.join(", ")}` : "";
    this.approvalBox.replaceChildren(
      h("p", { class: "approval-progress" }, h("strong", { text: shown.progress }), by),
      h("p", { class: "approval-waiting", text: shown.waiting_for }),
      ...[shown.escalated, shown.offer, shown.grant_note].filter(Boolean).map((text) => h("p", { class: "approval-note", text })));
    this.approvalBox.dataset.approvals = String(shown.approvals);
    this.approvalBox.dataset.required = String(shown.required);
  }

  /**
   * The pause is still open after this person's answer (a quorum counted their approval, or
   * another approval arrived): show where it stands now; their own approval cannot be given twice.
   * @param {any} pause the pending interrupt as the server now sends it
   * @param {string} note
   */
  stillOpen(pause, note) {
    this.pause = pause;
    if (pause.view) this.view = pause.view;
    const shown = this.view.approval || null;
    this.renderApproval(shown);
    if (this.answering) this.setBusy(false);
    if (shown && this.ctx.principal && shown.excluded.includes(this.ctx.principal)) {
      this.mayApprove = false;
      this.badge.textContent = "Waiting for others";
      for (const part of [this.approveBtn, this.grantBtn, this.editBtn]) if (part) part.remove();
      this.approveBtn = this.grantBtn = this.editBtn = null;
      this.effectLine.replaceChildren("Your approval is counted: the others decide now (you may still deny).");
      for (const key of this.keysHint.querySelectorAll("kbd")) {
        if (key.textContent === "a" || key.textContent === "e") { key.nextSibling?.remove(); key.remove(); }
      }
    }
    if (note) this.setStatus(note, "note"); // (the feed's later word on the same approval keeps it)
  }

  /**
   * @param {string} title @param {string} effect @param {string[]} lines @param {string} yes
   * @param {() => Promise<void>} action @param {boolean} fromKey @param {string} busy
   */
  decide(title, effect, lines, yes, action, fromKey, busy) {
    const run = () => this.run(busy, action);
    if (!(fromKey || this.view.risk === "high" || this.ctx.confirmAll())) {
      run();
      return;
    }
    this.pending = run;
    this.confirmTitle.textContent = title;
    this.confirmText.textContent = effect;
    this.confirmList.replaceChildren(...lines.map((text) => h("li", { text })));
    this.confirmList.hidden = !lines.length;
    this.confirmYes.textContent = yes;
    this.show("confirm");
    this.setStatus("", "");
    this.confirmYes.focus();
  }

  confirmed() {
    const pending = this.pending;
    this.pending = null;
    if (pending) pending();
  }

  /** @param {string} kind */
  async submit(kind) {
    if (!this.open || this.answering) return;
    if (kind === "deny") {
      const reason = this.reason.value.trim();
      if (!reason) {
        this.setStatus("Give a reason: the agent reads it to decide what to do next.", "error");
        this.reason.focus();
        return;
      }
      await this.run("Denying", () => this.ctx.deny(this, reason));
    } else if (kind === "respond") {
      const value = await this.check(this.respondSchema, "output");
      if (value === undefined) return this.focusError(this.respondSchema);
      const lines = [plainText(value)];
      this.decide(`Send this answer to “${this.view.title}”?`, this.effects.respond, lines, "Yes, send this answer",
        () => this.ctx.respond(this, value), false, "Sending the answer");
    } else if (kind === "edit" && this.editSchema) {
      const value = await this.check(this.editSchema, "input");
      if (value === undefined) return this.focusError(this.editSchema);
      const changes = editedFields({ ref: "", name: "", decision: "restart", at: "", principal: null, via: "",
        input: this.pause.input, replace_input: value, view: this.view });
      const lines = changes.length ? changes.map((c) => `${c.label}: ${c.from} → ${c.to}`) : ["Nothing was changed."];
      this.decide(`Approve “${this.view.title}” with the edited input?`, this.effects.edit, lines,
        "Yes, approve the edited input", () => this.ctx.approve(this, { replace_input: value }), false,
        "Approving the edited input");
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
      if (this.open) {
        this.setBusy(false);
        this.setStatus(error instanceof Error ? error.message : String(error), "error");
      }
    }
  }

  /** @param {boolean} busy @param {string} [text] */
  setBusy(busy, text) {
    this.answering = busy;
    for (const b of this.el.querySelectorAll("button")) /** @type {HTMLButtonElement} */ (b).disabled = busy;
    this.el.setAttribute("aria-busy", busy ? "true" : "false");
    if (text !== undefined) this.setStatus(text, "");
  }

  /** @param {string} text @param {string} kind */
  setStatus(text, kind) {
    this.status.textContent = text || "";
    this.status.dataset.kind = kind || "";
  }

  // -- time -------------------------------------------------------------------------------------

  /** Redraw the expiry countdown; at zero the card stops taking answers. @param {number} now */
  tick(now) {
    if (!this.expiry || !this.pause.expires_at) return;
    const at = localTime(this.pause.expires_at);
    const after = this.view.on_expiry ? ` ${this.view.on_expiry}` : "";
    if (!this.open) {
      this.expiry.remove();
      return;
    }
    const left = countdown(this.pause.expires_at, now);
    if (left) {
      this.expiry.replaceChildren(h("strong", { text: `Expires in ${left}` }), ` (at ${at}). If nobody answers by then:${after}`);
      this.expiry.dataset.urgent = new Date(this.pause.expires_at).getTime() - now < 60_000 ? "true" : "false";
      return;
    }
    this.expiry.replaceChildren(h("strong", { text: `Expired at ${at}.` }), ` It can no longer be answered.${after}`);
    this.expiry.dataset.urgent = "true";
    this.el.dataset.state = "expiring";
    this.badge.className = "badge badge-muted";
    this.badge.textContent = "Expired";
    this.show(null);
    this.actionsRow.remove();
    this.keysHint.remove();
    this.effectLine.remove();
    this.ctx.expired(this);
  }

  // -- settled ----------------------------------------------------------------------------------

  /** @param {string} state @param {string} badgeText @param {string} tone @param {string} text */
  settle(state, badgeText, tone, text) {
    this.answering = false;
    this.el.dataset.state = state;
    this.badge.className = `badge badge-${tone}`;
    this.badge.textContent = badgeText;
    for (const part of [this.actionsRow, this.confirmBox, this.denyForm, this.respondForm, this.editForm, this.keysHint,
      this.effectLine, this.expiry]) {
      if (part) part.remove();
    }
    this.el.setAttribute("aria-busy", "false");
    this.setStatus(text, state);
  }

  /**
   * Settle from its audit entry: answered here, elsewhere (another tab, person or process), or by expiry.
   * @param {any} entry @param {{elsewhere?: boolean}} [how]
   */
  markAnswered(entry, { elsewhere = false } = {}) {
    if (!entry) {
      this.settle(elsewhere ? "elsewhere" : "answered", elsewhere ? "Already answered" : "Answered", "muted",
        elsewhere ? "Already answered elsewhere." : "Answered.");
      return;
    }
    const label = decisionLabel(entry);
    const text = decisionSentence(entry);
    const edits = editedFields(entry).map((c) => `${c.label}: ${c.from} → ${c.to}`);
    const full = edits.length ? `${text.replace(/\.$/, "")}. Changed: ${edits.join("; ")}.` : text;
    if (entry.decision === "expire") this.settle("expired", label, "muted", full);
    else if (elsewhere) this.settle("elsewhere", "Already answered", "muted", `Already answered elsewhere: ${full}`);
    else this.settle("answered", label, decisionTone(entry), full);
  }
}
