/** One difference between two JSON payloads, at a path such as `$.lines[2].amount_cents`. */
export interface PayloadChange {
  path: string;
  /** `changed`: both have the path; `removed`: only the stored version; `added`: only the new one. */
  kind: "changed" | "added" | "removed";
  stored?: unknown;
  incoming?: unknown;
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v);

/**
 * The differences between two decoded JSON values, path by path, in key order. Iterative, so a
 * deeply nested payload cannot overflow the stack; stops after `limit` changes.
 */
export function payloadChanges(stored: unknown, incoming: unknown, limit = 200): PayloadChange[] {
  const changes: PayloadChange[] = [];
  const stack: Array<{ path: string; a: unknown; b: unknown }> = [{ path: "$", a: stored, b: incoming }];
  while (stack.length > 0 && changes.length < limit) {
    const { path, a, b } = stack.pop()!;
    if (isObject(a) && isObject(b)) {
      const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort().reverse();
      for (const key of keys) {
        const child = /^[A-Za-z_$][\w$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`;
        if (!Object.hasOwn(a, key)) changes.push({ path: child, kind: "added", incoming: b[key] });
        else if (!Object.hasOwn(b, key)) changes.push({ path: child, kind: "removed", stored: a[key] });
        else stack.push({ path: child, a: a[key], b: b[key] });
      }
    } else if (Array.isArray(a) && Array.isArray(b)) {
      for (let i = Math.max(a.length, b.length) - 1; i >= 0; i--) {
        const child = `${path}[${i}]`;
        if (i >= a.length) changes.push({ path: child, kind: "added", incoming: b[i] });
        else if (i >= b.length) changes.push({ path: child, kind: "removed", stored: a[i] });
        else stack.push({ path: child, a: a[i], b: b[i] });
      }
    } else if (JSON.stringify(a) !== JSON.stringify(b)) {
      changes.push({ path, kind: "changed", stored: a, incoming: b });
    }
  }
  return changes.sort((x, y) => (x.path < y.path ? -1 : x.path > y.path ? 1 : 0));
}

/** The body as JSON when it is JSON, else its text (or base64 when it is not UTF-8). */
export function decodePayload(body: Buffer): { json: true; value: unknown } | { json: false; text: string } {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(body);
  } catch {
    return { json: false, text: `base64:${body.toString("base64")}` };
  }
  try {
    return { json: true, value: JSON.parse(text) as unknown };
  } catch {
    return { json: false, text };
  }
}
