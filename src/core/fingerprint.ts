import { hash } from "node:crypto";

/**
 * Canonical JSON: object keys sorted by code unit, no whitespace, and iterative so a deeply
 * nested value cannot overflow the stack. Two payloads that differ only in key order or
 * formatting produce the same text; any change of a value changes it.
 */
export function canonicalJson(value: unknown): string {
  const flatKeys = flatObjectKeys(value);
  if (flatKeys) return writeFlat(value as Record<string, unknown>, flatKeys);
  const out: string[] = [];
  // Work stack of either values to write or literal text to emit.
  const stack: Array<{ value: unknown } | string> = [{ value }];
  while (stack.length > 0) {
    const item = stack.pop()!;
    if (typeof item === "string") {
      out.push(item);
      continue;
    }
    const v = item.value;
    if (v === null || v === undefined) {
      out.push("null");
    } else if (typeof v === "string" || typeof v === "boolean") {
      out.push(JSON.stringify(v));
    } else if (typeof v === "number") {
      out.push(Number.isFinite(v) ? JSON.stringify(v) : "null");
    } else if (typeof v === "bigint") {
      out.push(v.toString());
    } else if (Array.isArray(v)) {
      stack.push("]");
      for (let i = v.length - 1; i >= 0; i--) {
        stack.push({ value: v[i] });
        if (i > 0) stack.push(",");
      }
      out.push("[");
    } else if (typeof v === "object") {
      const keys = Object.keys(v).sort();
      stack.push("}");
      for (let i = keys.length - 1; i >= 0; i--) {
        const key = keys[i]!;
        stack.push({ value: (v as Record<string, unknown>)[key] });
        stack.push(JSON.stringify(key) + ":");
        if (i > 0) stack.push(",");
      }
      out.push("{");
    } else {
      out.push("null");
    }
  }
  return out.join("");
}

/**
 * A flat object (the usual event) in one native call, written exactly as the general walk below
 * writes it. JSON.stringify writes an object's own keys in insertion order, so a copy that
 * receives them sorted prints canonically, and cheaper than passing the sorted keys as
 * JSON.stringify's property list (which looks every key up in the list as it writes). Two kinds of key cannot go in the copy: integer-like keys
 * ("10", "9"), which every object enumerates first and in numeric order, and "__proto__", which
 * would set the copy's prototype. Objects with such keys take the property-list form.
 */
function writeFlat(value: Record<string, unknown>, sortedKeys: readonly string[]): string {
  const copy: Record<string, unknown> = {};
  for (const key of sortedKeys) {
    const first = key.charCodeAt(0);
    if ((first >= 48 && first <= 57) || key === "__proto__") return JSON.stringify(value, sortedKeys as string[]);
    copy[key] = value[key];
  }
  return JSON.stringify(copy);
}

/**
 * The sorted keys of a plain object whose values are all null, booleans, strings or finite
 * numbers; else null. Exported for its test: a null where keys are right only sends the value
 * through the general walk (same text, more work), which no other test can see.
 */
export function flatObjectKeys(value: unknown): string[] | null {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return null;
  const keys = Object.keys(value);
  for (const key of keys) {
    const v = (value as Record<string, unknown>)[key];
    if (v !== null && typeof v !== "string" && typeof v !== "boolean" && !(typeof v === "number" && Number.isFinite(v))) return null;
  }
  return sortedInPlace(keys);
}

/** Keys at most that the insertion sort takes; more go to Array.prototype.sort. */
const INSERTION_SORT_MAX = 16;

/**
 * Sorts by code unit, as `Array.prototype.sort()` does without a comparator. An event has a
 * handful of keys, and for those an insertion sort allocates nothing where the built-in sort
 * allocates a work array on every call.
 */
export function sortedInPlace(keys: string[]): string[] {
  if (keys.length > INSERTION_SORT_MAX) return keys.sort();
  for (let i = 1; i < keys.length; i++) {
    const key = keys[i]!;
    let j = i - 1;
    while (j >= 0 && keys[j]! > key) {
      keys[j + 1] = keys[j]!;
      j--;
    }
    keys[j + 1] = key;
  }
  return keys;
}

/** SHA-256 (hex) of the canonical JSON of a decoded event: the default payload fingerprint. */
export function fingerprintOf(value: unknown): string {
  return sha256Hex(canonicalJson(value));
}

/** One-shot `crypto.hash` (Node >= 20.12): no Hash object to create and finalize, which dominates for small inputs. */
export function sha256Hex(data: Buffer | string): string {
  return hash("sha256", data, "hex");
}

/**
 * SHA-256 (hex) of an id scoped to one event: the JSON array of `fields`, with the event's
 * `version` appended when it replaced an applied version through accept-new, so that version's
 * ids and keys differ from the replaced one's while every other id keeps its value. Outbox
 * message ids and `ctx.idempotencyKey()` are both built this way.
 */
export function eventScopedHash(fields: readonly unknown[], version: string | undefined): string {
  return sha256Hex(JSON.stringify(version === undefined ? fields : [...fields, version]));
}
