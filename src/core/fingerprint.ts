import { createHash } from "node:crypto";

/**
 * Canonical JSON: object keys sorted by code unit, no whitespace, and iterative so a deeply
 * nested value cannot overflow the stack. Two payloads that differ only in key order or
 * formatting produce the same text; any change of a value changes it.
 */
export function canonicalJson(value: unknown): string {
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

/** SHA-256 (hex) of the canonical JSON of a decoded event: the default payload fingerprint. */
export function fingerprintOf(value: unknown): string {
  return createHash("sha256").update(canonicalJson(value)).digest("hex");
}

export function sha256Hex(data: Buffer | string): string {
  return createHash("sha256").update(data).digest("hex");
}
