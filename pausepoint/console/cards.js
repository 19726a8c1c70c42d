// An interrupt card: a paused tool call, its input and metadata, and the answers a person can give.

import { h, jsonView, shortTime } from "./dom.js";
import { schemaProblems } from "./schema.js";

const DECISIONS = {
  respond: "Approved",
  restart: "Approved",
  deny: "Denied",
  cancel: "Cancelled",
  expire: "Expired",
};

export function decisionLabel(entry) {
  if (entry.decision === "restart" && entry.replace_input !== null && entry.replace_input !== undefined) {
    return "Edited & approved";
  }
  if (entry.decision === "respond" && entry.output && entry.output.approved === false) return "Answered: no";
  return DECISIONS[entry.decision] || entry.decision;
}

export function answerSummary(entry) {
  const who = entry.principal || "someone";
  let text = `${decisionLabel(entry)} by ${who} via ${entry.via} at ${shortTime(entry.at)}`;
  if (entry.reason) text += ` — “${entry.reason}”`;
  return text;
}

let counter = 0;

// pause: a PendingInterrupt; tool: its description from GET /v1/agents/{agent} (or null);
// actions: {approve(card), deny(card, reason), edit(card, input)} returning promises.
export class InterruptCard {
  constructor(pause, tool, actions) {
    this.pause = pause;
    this.tool = tool;
    this.actions = actions;
    this.ready = true;
    const id = `card-${++counter}`;
    const canEdit = !!(tool && tool.allow_input_edits);

    this.badge = h("span", { class: "badge badge-wait", text: "Waiting for you" });
    this.status = h("p", { class: "card-status", role: "status" });
    this.approveBtn = h("button", { type: "button", class: "btn btn-approve", onclick: () => this.approve() },
      "Approve ", h("kbd", { text: "a" }));
    this.denyBtn = h("button", { type: "button", class: "btn btn-deny", onclick: () => this.openDeny() },
      "Deny… ", h("kbd", { text: "d" }));
    this.editBtn = canEdit
      ? h("button", { type: "button", class: "btn", onclick: () => this.openEdit() }, "Edit input… ", h("kbd", { text: "e" }))
      : null;
    this.actionsRow = h("div", { class: "card-actions" }, this.approveBtn, this.denyBtn, this.editBtn);

    this.reason = h("textarea", { id: `${id}-reason`, rows: "2", placeholder: "Why not? The agent reads this." });
    this.denyForm = h("form", { class: "card-form", hidden: true, onsubmit: (e) => { e.preventDefault(); this.deny(); } },
      h("label", { for: `${id}-reason`, text: "Reason for denying (the model sees it)" }),
      this.reason,
      h("div", { class: "card-form-actions" },
        h("button", { type: "submit", class: "btn btn-deny" }, "Deny"),
        h("button", { type: "button", class: "btn btn-quiet", onclick: () => this.closeForms() }, "Cancel")));
    this.reason.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); this.deny(); }
    });

    this.editor = h("textarea", { id: `${id}-input`, class: "json-editor", rows: "6", spellcheck: "false",
      "aria-describedby": `${id}-input-check` });
    this.editCheck = h("p", { id: `${id}-input-check`, class: "editor-check", role: "status" });
    this.editSubmit = h("button", { type: "submit", class: "btn btn-approve" }, "Approve with this input");
    this.editForm = h("form", { class: "card-form", hidden: true, onsubmit: (e) => { e.preventDefault(); this.edit(); } },
      h("label", { for: `${id}-input`, text: "Input (JSON), checked against the tool's schema" }),
      this.editor, this.editCheck,
      h("div", { class: "card-form-actions" }, this.editSubmit,
        h("button", { type: "button", class: "btn btn-quiet", onclick: () => this.closeForms() }, "Cancel")));
    this.editor.addEventListener("input", () => this.checkEdit());
    this.editor.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); this.edit(); }
    });

    const kind = tool && !tool.pauses_only ? "paused itself" : "asks for approval";
    const sections = [h("section", { class: "card-section" }, h("h4", { text: "Input" }), jsonView(pause.input, "Input"))];
    if (pause.metadata && Object.keys(pause.metadata).length) {
      sections.push(h("section", { class: "card-section" }, h("h4", { text: "Metadata" }), jsonView(pause.metadata, "Metadata")));
    }
    this.el = h("article", {
      class: "card", tabindex: "0", "aria-labelledby": `${id}-title`, "aria-describedby": `${id}-state`,
      dataset: { ref: pause.ref, state: "open", tool: pause.name },
    },
      h("header", { class: "card-head" },
        h("div", { class: "card-title" },
          h("h3", { id: `${id}-title` }, h("span", { class: "mono", text: pause.name }), h("span", { class: "card-kind", text: kind })),
          h("span", { class: "card-ref mono", title: "ref", text: pause.ref })),
        h("span", { id: `${id}-state` }, this.badge)),
      tool && tool.description ? h("p", { class: "card-desc", text: tool.description }) : null,
      ...sections,
      this.actionsRow, this.denyForm, this.editForm, this.status);
    this.el.addEventListener("keydown", (e) => this.onKey(e));
  }

  get open() {
    return this.el.dataset.state === "open";
  }

  onKey(e) {
    if (e.key === "Escape") { this.closeForms(); this.el.focus(); return; }
    if (!this.open || e.ctrlKey || e.metaKey || e.altKey) return;
    const typing = e.target instanceof HTMLTextAreaElement || e.target instanceof HTMLInputElement;
    if (typing) return;
    if (e.key === "a") { e.preventDefault(); this.approve(); }
    else if (e.key === "d") { e.preventDefault(); this.openDeny(); }
    else if (e.key === "e" && this.editBtn) { e.preventDefault(); this.openEdit(); }
  }

  setReady(ready) {
    this.ready = ready;
    this.setBusy(!ready);
  }

  openDeny() {
    if (!this.open) return;
    this.editForm.hidden = true;
    this.denyForm.hidden = false;
    this.reason.focus();
  }

  openEdit() {
    if (!this.open || !this.editBtn) return;
    this.denyForm.hidden = true;
    this.editForm.hidden = false;
    if (!this.editor.value) this.editor.value = JSON.stringify(this.pause.input, null, 2);
    this.editor.rows = Math.min(16, Math.max(4, this.editor.value.split("\n").length + 1));
    this.checkEdit();
    this.editor.focus();
  }

  closeForms() {
    this.denyForm.hidden = true;
    this.editForm.hidden = true;
  }

  checkEdit() {
    let value;
    try {
      value = JSON.parse(this.editor.value);
    } catch (error) {
      return this.showCheck(`Not valid JSON: ${error.message}`);
    }
    const problems = schemaProblems(value, this.tool && this.tool.input_schema);
    if (problems.length) return this.showCheck(problems.join("; "));
    this.showCheck(null);
    return value;
  }

  showCheck(problem) {
    this.editCheck.textContent = problem || "Valid input.";
    this.editCheck.dataset.ok = problem ? "false" : "true";
    this.editor.setAttribute("aria-invalid", problem ? "true" : "false");
    this.editSubmit.disabled = !!problem;
    return undefined;
  }

  setBusy(busy, text) {
    for (const b of this.el.querySelectorAll("button")) b.disabled = busy;
    if (!busy && !this.editForm.hidden) this.checkEdit();
    this.el.setAttribute("aria-busy", busy ? "true" : "false");
    if (text !== undefined) this.setStatus(text);
  }

  setStatus(text, kind) {
    this.status.textContent = text || "";
    this.status.dataset.kind = kind || "";
  }

  async run(label, action) {
    if (!this.open || !this.ready) return;
    this.setBusy(true, `${label}…`);
    try {
      await action();
    } catch (error) {
      if (this.open) {
        this.setBusy(false);
        this.setStatus(error.message, "error");
      }
    }
  }

  approve() {
    return this.run("Approving", () => this.actions.approve(this));
  }

  deny() {
    const reason = this.reason.value.trim();
    if (!reason) {
      this.setStatus("Give a reason: the agent reads it to decide what to do next.", "error");
      this.reason.focus();
      return undefined;
    }
    return this.run("Denying", () => this.actions.deny(this, reason));
  }

  edit() {
    const value = this.checkEdit();
    if (value === undefined) return undefined;
    return this.run("Approving the edited input", () => this.actions.edit(this, value));
  }

  settle(state, badgeText, badgeClass, text) {
    this.el.dataset.state = state;
    this.badge.className = `badge ${badgeClass}`;
    this.badge.textContent = badgeText;
    this.actionsRow.remove();
    this.denyForm.remove();
    this.editForm.remove();
    this.el.setAttribute("aria-busy", "false");
    this.setStatus(text, state);
  }

  // Answered from this page: who/what/when from the audit entry.
  markAnswered(entry) {
    const label = entry ? decisionLabel(entry) : "Answered";
    const cls = entry && entry.decision === "deny" ? "badge-deny" : "badge-ok";
    this.settle("answered", label, cls, entry ? answerSummary(entry) : "Answered.");
  }

  // Someone else answered first (409 already_resolved, or the feed said so).
  markElsewhere(entry) {
    const text = entry ? `Already answered elsewhere: ${answerSummary(entry)}.` : "Already answered elsewhere.";
    this.settle("elsewhere", "Already answered", "badge-muted", text);
  }
}
