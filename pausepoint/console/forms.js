// @ts-check
// Forms generated from a JSON Schema (a tool's input or output schema): render the fields, read
// what was typed, and show errors next to their fields. Judging a value is the server's job
// (POST /v1/agents/{agent}/tools/{tool}/validate, the same check a real answer goes through):
// this module only reports what it cannot even read (malformed JSON in a JSON field).

import { h, humanize } from "./dom.js";

/**
 * @typedef {{path: (string|number)[], message: string, type?: string}} Problem
 * @typedef {{kind: string, name: string, path: (string|number)[], label: string, schema: any,
 *   required: boolean, nullable: boolean, el: HTMLElement, error: HTMLElement, start: any,
 *   read: () => {value?: any, problem?: string}, controls: HTMLElement[]}} Field
 */

const NUMBER = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;
/** The parts of a number as typed: sign, whole digits, fraction digits, exponent. */
const NUMBER_PARTS = /^([+-]?)(\d*)\.?(\d*)(?:[eE]([+-]?\d+))?$/;
/** An exponent past this is left as typed (the server judges it): no number of a thousand zeros. */
const MOST_SHIFT = 100;

/**
 * A number as its plain digits, exactly: "1e2" → "100", "1.25E1" → "12.5", "5e-1" → "0.5",
 * "0012.50" → "12.50", "+3" → "3" (never rounded, trailing zeros kept). What is not a number,
 * or shifts its point too far, comes back as typed.
 * @param {string} text
 */
export function plainNumber(text) {
  const found = NUMBER.test(text) ? text.match(NUMBER_PARTS) : null;
  if (!found) return text;
  const [, sign, whole, fraction, exponent = "0"] = found;
  const shift = Number(exponent);
  if (Math.abs(shift) > MOST_SHIFT) return text;
  let digits = whole + fraction;
  let point = whole.length + shift;
  if (point < 0) {
    digits = "0".repeat(-point) + digits;
    point = 0;
  }
  digits = digits.padEnd(point, "0");
  const integer = digits.slice(0, point).replace(/^0+(?=\d)/, "") || "0";
  const rest = digits.slice(point);
  return `${sign === "-" ? "-" : ""}${integer}${rest ? `.${rest}` : ""}`;
}

/**
 * Resolve a local $ref ("#/$defs/Name") against the root schema.
 * @param {any} schema @param {any} root
 */
function resolve(schema, root) {
  let found = schema;
  for (let i = 0; found && found.$ref && i < 10; i++) {
    const name = String(found.$ref).split("/").pop() || "";
    found = (root.$defs || root.definitions || {})[name];
  }
  return found || {};
}

/**
 * What control a property needs, and whether it may be null.
 * @param {any} raw @param {any} root
 * @returns {{kind: string, schema: any, nullable: boolean}}
 */
function classify(raw, root) {
  let schema = resolve(raw, root);
  let nullable = false;
  const options = schema.anyOf || schema.oneOf;
  if (options) {
    const real = options.map((/** @type {any} */ o) => resolve(o, root)).filter((/** @type {any} */ o) => o.type !== "null");
    nullable = real.length < options.length;
    const types = new Set(real.map((/** @type {any} */ o) => o.type));
    if (types.has("number") && types.has("string") && types.size === 2) {
      return { kind: "decimal", schema: { ...schema, ...real.find((/** @type {any} */ o) => o.type === "number") }, nullable };
    }
    if (real.length !== 1) return { kind: "json", schema, nullable };
    schema = { ...real[0], title: schema.title || real[0].title, description: schema.description || real[0].description,
      default: schema.default };
  }
  if (Array.isArray(schema.enum) && schema.enum.every((/** @type {any} */ v) => typeof v === "string")) {
    return { kind: "enum", schema, nullable };
  }
  if (schema.type === "string") return { kind: "text", schema, nullable };
  if (schema.type === "number" || schema.type === "integer") return { kind: "number", schema, nullable };
  if (schema.type === "boolean") return { kind: "default" in schema ? "checkbox" : "yesno", schema, nullable };
  return { kind: "json", schema, nullable };
}

// -- what a pattern expects, in words ---------------------------------------------------------------

/** @type {Record<string, [string, string]>} a character class: [one, many] */
const CLASSES = {
  "[A-Z]": ["capital letter", "capital letters"],
  "[a-z]": ["small letter", "small letters"],
  "[A-Za-z]": ["letter", "letters"],
  "[a-zA-Z]": ["letter", "letters"],
  "\\d": ["digit", "digits"],
  "[0-9]": ["digit", "digits"],
  "[A-Z0-9]": ["capital letter or digit", "capital letters or digits"],
  "[A-Za-z0-9]": ["letter or digit", "letters or digits"],
  "[a-zA-Z0-9]": ["letter or digit", "letters or digits"],
  "[a-z0-9]": ["small letter or digit", "small letters or digits"],
};
const PART = /^(?:\(\?P?<(\w+)>)?(\[[^\]]+\]|\\d)(\{(\d+)(?:,(\d+))?\}|\+|\*|\?)?\)?/;

/**
 * A simple pattern in words: "^(?P<country>[A-Z]{2})(?P<check>\d{2})$" → "2 capital letters
 * (country), then 2 digits (check)"; null for one it cannot say (then the description is used).
 * @param {string} pattern
 */
export function patternWords(pattern) {
  let rest = pattern.replace(/^\^/, "").replace(/\$$/, "");
  const parts = [];
  while (rest) {
    const m = rest.match(PART);
    if (!m || !(m[2] in CLASSES)) return null;
    const [one, many] = CLASSES[m[2]];
    const count = m[4] !== undefined ? (m[5] !== undefined ? `${m[4]} to ${m[5]}` : m[4])
      : m[3] === "+" ? "one or more" : m[3] === "*" ? "any number of" : m[3] === "?" ? "an optional" : "1";
    const single = count === "1" || count === "an optional";
    parts.push(`${count} ${single ? one : many}${m[1] ? ` (${m[1]})` : ""}`);
    rest = rest.slice(m[0].length);
  }
  if (!parts.length) return null;
  return parts.length === 1 ? parts[0] : `${parts.slice(0, -1).join(", ")}, then ${parts[parts.length - 1]}`;
}

/**
 * What a field's pattern expects, in a sentence with an example where the field started with a
 * value that fits (the call's own input), or null.
 * @param {Field} field
 */
function expectedFormat(field) {
  const pattern = field.schema && typeof field.schema.pattern === "string" ? field.schema.pattern : null;
  if (!pattern) return null;
  const words = patternWords(pattern);
  const said = words ? `${words}, with no spaces` : field.schema.description ? field.schema.description.replace(/\.$/, "") : null;
  if (!said) return null;
  let example = "";
  try {
    const regex = new RegExp(pattern.replace(/\(\?P</g, "(?<"));
    if (typeof field.start === "string" && regex.test(field.start)) example = `; for example ${field.start}`;
  } catch {
    /* a pattern JavaScript cannot read: no example */
  }
  return `Expected: ${said}${example}.`;
}

export class SchemaForm {
  /**
   * @param {any} schema the root JSON schema (null: any JSON value)
   * @param {any} initial the value to start from (undefined: the schema's defaults)
   * @param {string} id a prefix for element ids, unique in the page
   * @param {string} [rootLabel] the label of a form that is one value, not an object
   */
  constructor(schema, initial, id, rootLabel = "Value (JSON)") {
    this.root = schema || {};
    this.id = id;
    /** @type {Field[]} */
    this.fields = [];
    this.formError = h("ul", { class: "form-errors", role: "alert", hidden: true });
    const object = resolve(this.root, this.root);
    const properties = object.type === "object" && object.properties && !object.additionalProperties
      ? object.properties : null;
    if (properties && Object.keys(properties).length) {
      this.isObject = true;
      const required = new Set(object.required || []);
      for (const [name, raw] of Object.entries(properties)) {
        const value = initial && typeof initial === "object" ? initial[name] : undefined;
        this.fields.push(this.field(name, [name], raw, value, required.has(name)));
      }
    } else {
      this.isObject = false;
      this.fields.push(this.field("value", [], this.root, initial, true, rootLabel));
    }
    this.el = h("div", { class: "schema-form" }, ...this.fields.map((f) => f.el), this.formError);
  }

  /**
   * @param {string} name @param {(string|number)[]} path @param {any} raw @param {any} value
   * @param {boolean} required @param {string} [label]
   * @returns {Field}
   */
  field(name, path, raw, value, required, label) {
    const { kind, schema, nullable } = classify(raw, this.root);
    const id = `${this.id}-${name}`;
    const title = label || schema.title || raw.title || humanize(name);
    const start = value !== undefined ? value : schema.default;
    const error = h("p", { id: `${id}-error`, class: "field-error", hidden: true });
    const help = schema.description ? h("p", { id: `${id}-help`, class: "field-help", text: schema.description }) : null;
    const describedBy = [help ? `${id}-help` : "", `${id}-error`].filter(Boolean).join(" ");
    const mark = required ? null : h("span", { class: "field-optional", text: " (optional)" });
    /** @type {HTMLElement[]} */
    let controls;
    /** @type {() => {value?: any, problem?: string}} */
    let read;
    /** @type {HTMLElement} */
    let el;

    if (kind === "yesno") {
      const yes = h("input", { type: "radio", name: id, id: `${id}-yes`, value: "yes", "aria-describedby": describedBy });
      const no = h("input", { type: "radio", name: id, id: `${id}-no`, value: "no", "aria-describedby": describedBy });
      if (start === true) /** @type {HTMLInputElement} */ (yes).checked = true;
      if (start === false) /** @type {HTMLInputElement} */ (no).checked = true;
      controls = [yes, no];
      read = () => {
        if (/** @type {HTMLInputElement} */ (yes).checked) return { value: true };
        if (/** @type {HTMLInputElement} */ (no).checked) return { value: false };
        return {};
      };
      el = h("fieldset", { class: "field field-choice" },
        h("legend", {}, title, mark),
        h("div", { class: "choices" },
          h("label", { for: `${id}-yes` }, yes, " Yes"),
          h("label", { for: `${id}-no` }, no, " No")),
        help, error);
    } else {
      /** @type {HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement} */
      let control;
      if (kind === "checkbox") {
        const box = /** @type {HTMLInputElement} */ (h("input", { type: "checkbox", id, "aria-describedby": describedBy }));
        box.checked = start === true;
        control = box;
        read = () => ({ value: box.checked });
      } else if (kind === "enum") {
        const select = /** @type {HTMLSelectElement} */ (h("select", { id, class: "select", "aria-describedby": describedBy },
          required && start !== undefined ? null : h("option", { value: "", text: "—" }),
          ...schema.enum.map((/** @type {string} */ v) => h("option", { value: v, text: v }))));
        if (typeof start === "string") select.value = start;
        control = select;
        read = () => (select.value === "" ? this.empty(required, nullable) : { value: select.value });
      } else if (kind === "json") {
        const area = /** @type {HTMLTextAreaElement} */ (h("textarea", { id, class: "json-editor", rows: "4", spellcheck: "false",
          "aria-describedby": describedBy }));
        area.value = start === undefined ? "" : JSON.stringify(start, null, 2);
        area.rows = Math.min(12, Math.max(3, area.value.split("\n").length + 1));
        control = area;
        read = () => {
          if (!area.value.trim()) return this.empty(required, nullable);
          try {
            return { value: JSON.parse(area.value) };
          } catch (e) {
            return { problem: `Not valid JSON: ${e instanceof Error ? e.message : e}` };
          }
        };
      } else {
        const input = /** @type {HTMLInputElement} */ (h("input", { type: "text", id, autocomplete: "off", spellcheck: "false",
          inputmode: kind === "text" ? null : "decimal", "aria-describedby": describedBy }));
        input.value = start === undefined || start === null ? "" : String(start);
        control = input;
        read = () => {
          const text = kind === "text" ? input.value : input.value.trim();
          if (text === "" && (kind !== "text" || !required)) return this.empty(required, nullable);
          if (kind === "number" && NUMBER.test(text)) return { value: Number(text) };
          // a decimal stays a string (exact), in plain digits as a number field's value is ("1e2" is
          // 100); anything else is the server's to judge
          return { value: kind === "decimal" ? plainNumber(text) : text };
        };
      }
      controls = [control];
      el = h("div", { class: `field field-${kind}` },
        kind === "checkbox"
          ? h("label", { for: id, class: "field-check" }, control, " ", title, mark)
          : h("label", { for: id }, title, mark),
        kind === "checkbox" ? null : control,
        help, error);
    }
    el.dataset.field = name;
    return { kind, name, path, label: title, schema, required, nullable, el, error, start, read, controls };
  }

  /** @param {boolean} required @param {boolean} nullable */
  empty(required, nullable) {
    return required && nullable ? { value: null } : {};
  }

  /**
   * What the form holds: the value to send, and what could not be read.
   * @returns {{value: any, problems: Problem[]}}
   */
  read() {
    /** @type {Problem[]} */
    const problems = [];
    if (!this.isObject) {
      const got = this.fields[0].read();
      if (got.problem) problems.push({ path: [], message: got.problem });
      return { value: got.value === undefined ? null : got.value, problems };
    }
    /** @type {Record<string, any>} */
    const value = {};
    for (const field of this.fields) {
      const got = field.read();
      if (got.problem) problems.push({ path: field.path, message: got.problem });
      else if (got.value !== undefined) value[field.name] = got.value;
    }
    return { value, problems };
  }

  /**
   * Show each problem next to its field (the rest above the buttons); clears the old ones.
   * @param {Problem[]} problems
   */
  showErrors(problems) {
    /** @type {Map<Field, string[]>} */
    const byField = new Map();
    /** @type {string[]} */
    const rest = [];
    for (const problem of problems) {
      const field = this.isObject
        ? this.fields.find((f) => problem.path.length && f.name === String(problem.path[0]))
        : this.fields[0];
      const deeper = problem.path.slice(this.isObject ? 1 : 0);
      const where = deeper.map((p) => (typeof p === "number" ? `[${p}]` : `.${p}`)).join("").replace(/^\./, "");
      const message = problem.type === "string_pattern_mismatch" && field && !deeper.length
        ? expectedFormat(field) || problem.message : problem.message;
      const text = where ? `${where}: ${message}` : message;
      if (field) byField.set(field, [...(byField.get(field) || []), text]);
      else rest.push(problem.path.length ? `${problem.path.join(".")}: ${problem.message}` : problem.message);
    }
    for (const field of this.fields) {
      const messages = byField.get(field) || [];
      field.error.textContent = messages.join(" ");
      field.error.hidden = !messages.length;
      for (const control of field.controls) control.setAttribute("aria-invalid", messages.length ? "true" : "false");
    }
    this.formError.replaceChildren(...rest.map((text) => h("li", { text })));
    this.formError.hidden = !rest.length;
  }

  /** The first control, to focus when the form opens. */
  first() {
    return this.fields.length ? this.fields[0].controls[0] : null;
  }

  /** @param {boolean} disabled */
  setDisabled(disabled) {
    for (const field of this.fields) for (const control of field.controls) {
      /** @type {HTMLInputElement} */ (control).disabled = disabled;
    }
  }
}
