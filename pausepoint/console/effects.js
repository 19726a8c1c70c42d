// @ts-check
// What a decision does, said in the card's own words — its title, amount and payee ("$700 will be
// sent to savings") — never in a tool's raw name or an answer's JSON. Everything here is read from
// what the server sends: the pause's view (the fields its tool declared, written for people), its
// approval status (what a yes also approves) and the agent's tool descriptions.
//
// Amounts: a field is an amount by its name (the server's rule: "amount", "*_amount",
// "totalAmount"). An amount that carries no currency takes the one the card's title writes beside
// the same number ("Transfer $700.00 to savings"); with none anywhere, it says so.

import { humanize, visible } from "./dom.js";

const AMOUNT = /(^|_)amount($|_)|[a-z]Amount$/i;
const RECIPIENT = /^(payee|recipient|beneficiary|creditor|to|to_account|toAccount|destination)$/i;
const IBAN = /(^|_)iban$/i;
/** @type {Record<string, string>} the symbols the server writes (tools/_display.py) */
const SYMBOLS = { USD: "$", EUR: "€", GBP: "£" };
/** Money as a person writes it: "$700", "€1,250.50", "1,250.50 CHF". */
const MONEY = /([$€£])\s?(\d[\d,]*(?:\.\d+)?)|(\d[\d,]*(?:\.\d+)?)\s?([A-Z]{3})\b/g;
export const NO_CURRENCY = "no currency given";

/** "1,250.50" → 1250.5 (NaN when it is not a number). @param {string} text */
function number(text) {
  return Number(String(text).replace(/,/g, ""));
}

/** Whether a field's text already says its currency ("€1,250.50", "1,250.50 CHF"). @param {string} text */
function hasCurrency(text) {
  return /[$€£]|\b[A-Z]{3}\b/.test(text);
}

/**
 * The money the title and summary write, each with its currency: [{value, text}].
 * @param {any} view
 */
function writtenMoney(view) {
  const found = [];
  for (const where of [view.title || "", view.summary || ""]) {
    for (const m of where.matchAll(MONEY)) {
      found.push({ value: number(m[2] || m[3]), text: m[0].trim() });
    }
  }
  return found;
}

/**
 * An amount as a person should read it: with its currency, taken from the card's own words when
 * the field has none; `known` is false when nothing says which currency it is.
 * @param {string} text the amount as the server wrote it ("700.00") @param {any} view
 * @returns {{text: string, known: boolean}}
 */
export function amountText(text, view) {
  if (hasCurrency(text)) return { text, known: true };
  const same = writtenMoney(view).find((m) => m.value === number(text));
  if (!same) return { text, known: false };
  const symbol = same.text.match(/[$€£]/);
  if (symbol) return { text: symbol[0] + text, known: true };
  const code = same.text.match(/[A-Z]{3}/);
  return { text: `${text} ${code ? code[0] : ""}`.trim(), known: true };
}

/**
 * A field's text as the card shows it: amounts with their currency (or saying there is none).
 * @param {{name: string, text: string}} field @param {any} view
 */
export function fieldText(field, view) {
  if (!AMOUNT.test(field.name) || !/\d/.test(field.text)) return field.text;
  const shown = amountText(field.text, view);
  return shown.known ? shown.text : `${shown.text} (${NO_CURRENCY})`;
}

/**
 * "1250.5" and "EUR" → "€1,250.50" (never rounds: "0.125" stays "0.125"); "" for what is not a number.
 * @param {any} raw @param {string | null | undefined} code
 */
export function formatMoney(raw, code) {
  const found = String(raw ?? "").trim().match(/^([+-]?)(\d+)(?:\.(\d+))?$/);
  if (!found) return "";
  const [, sign, whole, cents = ""] = found;
  const digits = `${whole.replace(/^0+(?=\d)/, "").replace(/\B(?=(\d{3})+(?!\d))/g, ",")}.${cents.padEnd(2, "0")}`;
  const minus = sign === "-" ? "-" : "";
  if (!code) return minus + digits;
  const upper = code.toUpperCase();
  return upper in SYMBOLS ? `${minus}${SYMBOLS[upper]}${digits}` : `${minus}${digits} ${upper}`;
}

/**
 * The money a call moves, in words, or null: "$700 will be sent to savings (IBAN …)".
 * @param {{amount: string, recipient: string, iban?: string | null}} money
 */
function moved(money) {
  const iban = money.iban && money.iban !== money.recipient ? ` (IBAN ${money.iban})` : "";
  return `${money.amount} will be sent to ${money.recipient}${iban}`;
}

/**
 * Who gets how much, from the view's fields. @param {any} view
 * @returns {{amount: string, recipient: string, iban: string | null} | null}
 */
function moneyOfView(view) {
  const fields = view.fields || [];
  const amount = fields.find((/** @type {any} */ f) => AMOUNT.test(f.name) && /\d/.test(f.text));
  const recipient = fields.find((/** @type {any} */ f) => RECIPIENT.test(f.name));
  if (!amount || !recipient) return null;
  const iban = fields.find((/** @type {any} */ f) => IBAN.test(f.name) && f !== recipient);
  return { amount: amountText(amount.text, view).text, recipient: recipient.text, iban: iban ? iban.text : null };
}

/**
 * Who gets how much from an input (an edited one): its own currency, else the card's.
 * @param {any} input @param {any} view
 */
export function moneyOfInput(input, view) {
  if (!input || typeof input !== "object") return null;
  const amountKey = Object.keys(input).find((k) => AMOUNT.test(k));
  const recipientKey = Object.keys(input).find((k) => RECIPIENT.test(k));
  if (!amountKey || !recipientKey) return null;
  const code = typeof input.currency === "string" ? input.currency : null;
  let amount = formatMoney(input[amountKey], code);
  if (!amount) return null;
  if (!code) amount = amountText(amount, view).text;
  const ibanKey = Object.keys(input).find((k) => IBAN.test(k) && k !== recipientKey);
  return { amount, recipient: visible(input[recipientKey]), iban: ibanKey ? visible(input[ibanKey]) : null };
}

/**
 * What a yes also approves (a grant the pause offers, e.g. the transfer an approval question is
 * about): who gets how much, written as the card writes it, or null.
 * @param {any} offer the pause's `approval.offer` @param {any} view
 */
function moneyOfOffer(offer, view) {
  const bounds = (offer && offer.bounds) || {};
  /** @type {Record<string, any>} */
  const values = {};
  for (const [name, conditions] of Object.entries(bounds)) {
    if (conditions && typeof conditions === "object" && "equals" in conditions) values[name] = conditions.equals;
  }
  const amountKey = Object.keys(values).find((k) => AMOUNT.test(k));
  const recipientKey = Object.keys(values).find((k) => RECIPIENT.test(k));
  if (!amountKey || !recipientKey) return null;
  // as the card's title writes that amount ("$700"), else as money ("700.00")
  const same = writtenMoney(view).find((m) => m.value === number(values[amountKey]));
  const amount = same ? same.text : amountText(formatMoney(values[amountKey], values.currency), view).text;
  return { amount, recipient: visible(values[recipientKey]), iban: null };
}

/** A tool's name as people read it ("transfer_money" → "Transfer money"). @param {string} name */
export function toolWords(name) {
  return humanize(name);
}

/**
 * The question a pause puts to a person for an MCP server (its `metadata.elicitation`: `message`,
 * and `requested_schema` or `url`), or null. Such a pause takes an answer, never a yes: whatever
 * the tool's `approval` says, Approve cannot answer it (the server refuses it, 422).
 * @param {any} pause @returns {{message: string, requested_schema?: any, url?: string} | null}
 */
export function questionOf(pause) {
  const asked = pause && pause.metadata ? pause.metadata.elicitation : null;
  return asked && typeof asked === "object" && !Array.isArray(asked) ? asked : null;
}

/**
 * @typedef {{approve: string, grant: string, edit: string, respond: string, deny: string,
 *   money: boolean, editedApprove: (input: any) => string, grantNote: string, offerNote: string}} Effects
 */

/**
 * What each answer to a pause does, in the card's words.
 * @param {any} pause the pending interrupt (with `view` and `approval`)
 * @param {any} view its view @param {any} tool the tool's description (or null)
 * @returns {Effects}
 */
export function effectsOf(pause, view, tool) {
  const subject = `“${view.title}”`;
  const question = questionOf(pause);
  const approval = question ? null : tool ? tool.approval : null;
  const shown = view.approval || null;
  const status = pause.approval || null;
  const selfPaused = !!(tool && !tool.pauses_only);
  const runs = !!approval && approval.kind === "restart";
  const fromView = moneyOfView(view);
  const fromOffer = status && status.offer ? moneyOfOffer(status.offer, view) : null;
  const money = fromView || fromOffer;
  const outcome = money ? moved(money) : runs ? `${subject} runs` : `${subject} goes ahead`;
  const more = shown && shown.required > 1 ? shown.required - shown.approvals : 0;
  const detail = view.summary && view.summary !== view.title ? ` (${view.summary})` : "";

  let approve = "";
  if (approval && more > 1) {
    const left = more - 1;
    approve = `Your approval is counted (${shown.approvals + 1} of ${shown.required}). Once ${left} more approve${left === 1 ? "s" : ""}, ${outcome}.`;
  } else if (approval && runs) {
    approve = money ? `${moved(money)} now.` : `${subject} runs now${detail}.`;
  } else if (approval) {
    approve = money ? `${moved(money)}.` : `The agent is told you said yes to ${subject}.`;
  }
  const later = `Later “${toolWords(pause.name)}” calls in this session run without asking, until the grant ends or is revoked.`;
  return {
    approve,
    grant: shown && shown.grantable ? `${approve} ${later}` : "",
    edit: `${subject} runs now, with your changes.`,
    respond: question ? `The server asks: “${question.message}” ${subject} goes on with your answer.`
      : selfPaused ? `${subject} does not run: the agent gets your answer instead.`
      : `Answer ${subject}: the agent goes on with your answer.`,
    deny: money ? "Nothing is sent: the agent is told you said no, and why."
      : selfPaused || runs ? `${subject} does not run: the agent is told you said no, and why.`
      : "The agent is told you said no, and why.",
    money: !!money,
    editedApprove: (input) => {
      const edited = moneyOfInput(input, view);
      return edited ? `${moved(edited)} now.` : `${subject} runs now, with your changes.`;
    },
    grantNote: shown && shown.grantable
      ? `An approval may also approve later “${toolWords(pause.name)}” calls in this session.` : "",
    offerNote: status && status.offer && !fromView ? offerWords(status.offer, fromOffer) : "",
  };
}

/**
 * What else a yes approves (the grant a pause offers), in words.
 * @param {any} offer @param {{amount: string, recipient: string} | null} money
 */
function offerWords(offer, money) {
  const what = `“${toolWords(offer.tool || "")}”`;
  const count = offer.uses === 1 ? `one ${what} call` : offer.uses ? `${offer.uses} ${what} calls` : `${what} calls`;
  const exactly = money ? `: ${money.amount} to ${money.recipient}` : "";
  const ttl = offer.ttl_seconds ? `, within the next ${duration(offer.ttl_seconds)}` : "";
  return `A yes also approves ${count}${exactly}${ttl}; nothing else.`;
}

/** @param {number} seconds */
function duration(seconds) {
  if (seconds % 3600 === 0) return seconds === 3600 ? "hour" : `${seconds / 3600} hours`;
  if (seconds % 60 === 0) return seconds === 60 ? "minute" : `${seconds / 60} minutes`;
  return `${seconds} seconds`;
}
