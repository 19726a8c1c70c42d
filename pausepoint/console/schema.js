// A small JSON Schema check for edited input: the keywords pydantic emits for tool inputs
// (type, properties, required, additionalProperties, items, enum, anyOf, $ref to $defs,
// minimum/maximum, minLength/maxLength). The server validates again; this gives early feedback.

export function schemaProblems(value, schema) {
  const problems = [];
  if (schema) check(value, schema, schema, "input", problems);
  return problems.slice(0, 5);
}

function typeOf(value) {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return typeof value;
}

function fits(type, actual) {
  return type === actual || (type === "number" && actual === "integer");
}

function check(value, schema, root, path, problems) {
  if (schema.$ref) {
    const name = schema.$ref.split("/").pop();
    const target = (root.$defs || root.definitions || {})[name];
    if (target) check(value, target, root, path, problems);
    return;
  }
  if (schema.anyOf || schema.oneOf) {
    const options = schema.anyOf || schema.oneOf;
    const ok = options.some((option) => {
      const found = [];
      check(value, option, root, path, found);
      return !found.length;
    });
    if (!ok) problems.push(`${path} does not match any allowed form`);
    return;
  }
  const actual = typeOf(value);
  if (schema.type) {
    const types = Array.isArray(schema.type) ? schema.type : [schema.type];
    if (!types.some((t) => fits(t, actual))) {
      problems.push(`${path} must be ${types.join(" or ")}, not ${actual}`);
      return;
    }
  }
  if (schema.enum && !schema.enum.some((option) => JSON.stringify(option) === JSON.stringify(value))) {
    problems.push(`${path} must be one of ${schema.enum.map((o) => JSON.stringify(o)).join(", ")}`);
  }
  if (actual === "string") {
    if (schema.minLength !== undefined && value.length < schema.minLength) problems.push(`${path} is too short`);
    if (schema.maxLength !== undefined && value.length > schema.maxLength) problems.push(`${path} is too long`);
    if (schema.pattern && !new RegExp(schema.pattern, "u").test(value)) problems.push(`${path} has the wrong format`);
  }
  if (actual === "number" || actual === "integer") {
    if (schema.minimum !== undefined && value < schema.minimum) problems.push(`${path} must be ≥ ${schema.minimum}`);
    if (schema.maximum !== undefined && value > schema.maximum) problems.push(`${path} must be ≤ ${schema.maximum}`);
  }
  if (actual === "object") {
    const properties = schema.properties || {};
    for (const name of schema.required || []) {
      if (!(name in value)) problems.push(`${path}.${name} is required`);
    }
    for (const [name, item] of Object.entries(value)) {
      if (properties[name]) check(item, properties[name], root, `${path}.${name}`, problems);
      else if (schema.additionalProperties === false) problems.push(`${path}.${name} is not allowed`);
    }
  }
  if (actual === "array" && schema.items) {
    value.forEach((item, i) => check(item, schema.items, root, `${path}[${i}]`, problems));
  }
}
