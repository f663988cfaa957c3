import { firstDuplicateKey, flatObjectKeyCount } from "./duplicate-keys.js";
import { InvalidEventError } from "./errors.js";

/** Limits applied to every message body before any handler code sees it. */
export interface DecodeLimits {
  /** Largest body accepted, in bytes. Default 1 MiB. Larger bodies are quarantined as `invalid`. */
  maxBodyBytes: number;
  /** Deepest nesting of arrays/objects accepted. Default 32. */
  maxDepth: number;
  /** Most keys + array elements in the whole document. Default 10 000. */
  maxNodes: number;
}

export const defaultDecodeLimits: DecodeLimits = { maxBodyBytes: 1024 * 1024, maxDepth: 32, maxNodes: 10_000 };

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });

/** Keys that turn into prototype pollution once a consumer merges the event into another object. */
const FORBIDDEN_KEYS = new Set(["__proto__"]);

/**
 * An unpaired UTF-16 surrogate (valid JSON as a `\u` escape, but not Unicode). UTF-8 encoders
 * (pg, better-sqlite3, hashing) turn every one into U+FFFD, so `"e-\ud800"` and `"e-\udc00"`
 * would become the same event id and the same fingerprint.
 */
export const LONE_SURROGATE = /\p{Cs}/u;

/** Escapes control characters, so text quoted from the input stays printable and storable. */
function escapeControls(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/[\u0000-\u001f\u007f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/**
 * Decodes a message body into a plain JSON object, refusing anything a handler should never
 * have to defend against: non-JSON content types, compressed bodies, invalid UTF-8, oversize or
 * too deeply nested documents, duplicate keys, prototype-pollution keys and NUL characters
 * (which PostgreSQL text cannot store). Throws InvalidEventError with a readable detail.
 */
export function decodeJsonBody(
  body: Buffer,
  properties: { contentType?: string | undefined; contentEncoding?: string | undefined },
  limits: DecodeLimits = defaultDecodeLimits,
): Record<string, unknown> {
  if (properties.contentType && !isJsonContentType(properties.contentType)) {
    throw new InvalidEventError(`content type ${JSON.stringify(properties.contentType)} is not JSON (use application/json)`);
  }
  const encoding = properties.contentEncoding?.toLowerCase().trim();
  if (encoding && encoding !== "identity" && encoding !== "utf-8" && encoding !== "utf8") {
    throw new InvalidEventError(`content encoding ${JSON.stringify(properties.contentEncoding)} is not supported`);
  }
  if (body.length === 0) throw new InvalidEventError("body is empty");
  if (body.length > limits.maxBodyBytes) {
    throw new InvalidEventError(`body is ${body.length} bytes, over the limit of ${limits.maxBodyBytes}`);
  }
  let text: string;
  try {
    text = utf8.decode(body);
  } catch (cause) {
    throw new InvalidEventError("body is not valid UTF-8", { cause });
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (cause) {
    // V8 quotes the input in some messages: a raw NUL there would fail the quarantine insert.
    throw new InvalidEventError(`body is not valid JSON: ${escapeControls((cause as Error).message)}`, { cause });
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new InvalidEventError(`body must be a JSON object, got ${value === null ? "null" : Array.isArray(value) ? "an array" : typeof value}`);
  }
  const flat = isValidFlatObject(value, limits);
  if (!flat) checkShape(value, limits);
  // A flat object's keys are counted without building anything; any other is scanned.
  const duplicate = flat && flatObjectKeyCount(text) === Object.keys(value).length ? null : firstDuplicateKey(text);
  if (duplicate !== null) {
    throw new InvalidEventError(`body has the key ${JSON.stringify(escapeControls(duplicate))} twice in one object: parsers disagree on which value counts`);
  }
  return value as Record<string, unknown>;
}

/**
 * The media types taken for JSON: `application/json`, any `+json` type
 * (`application/cloudevents+json`), `text/json` and `text/plain` (what command-line publishers
 * send), with or without parameters (`; charset=utf-8`). Not every type that merely contains
 * "json": `application/jsonp` is JavaScript, `application/json-seq` is a sequence of documents.
 */
export function isJsonContentType(contentType: string): boolean {
  // The value nearly every producer sends, decided without splitting and lower-casing a copy.
  if (contentType === "application/json") return true;
  const mediaType = contentType.split(";")[0]!.trim().toLowerCase();
  return mediaType === "application/json" || mediaType === "text/json" || mediaType === "text/plain" || /^[a-z0-9!#$&^_.-]+\/[a-z0-9!#$&^_.+-]+\+json$/.test(mediaType);
}

/**
 * The checks of checkShape for the usual event, a flat object of scalars, without building the
 * walk's nodes. False means "not flat, or something to refuse": checkShape then decides, and
 * words the error. Exported for its test: a false where true is right costs nothing but the
 * walk, so only a test of this function sees the usual event lose its fast path.
 */
export function isValidFlatObject(root: object, limits: DecodeLimits): boolean {
  if (limits.maxDepth < 1) return false;
  const keys = Object.keys(root);
  if (keys.length > limits.maxNodes) return false;
  for (const key of keys) {
    if (FORBIDDEN_KEYS.has(key) || key.includes("\u0000") || LONE_SURROGATE.test(key)) return false;
    const value = (root as Record<string, unknown>)[key];
    if (typeof value === "string") {
      if (value.includes("\u0000") || LONE_SURROGATE.test(value)) return false;
    } else if (typeof value === "number") {
      if (!Number.isFinite(value)) return false;
    } else if (value !== null && typeof value !== "boolean") {
      return false;
    }
  }
  return true;
}

/** A node of the walk: its path is built only for an error message. */
interface Visit {
  value: unknown;
  depth: number;
  parent: Visit | null;
  step: string | number;
}

function pathOf(visit: Visit): string {
  const steps: string[] = [];
  for (let v: Visit | null = visit; v?.parent; v = v.parent) {
    steps.push(typeof v.step === "number" ? `[${v.step}]` : `.${v.step.length > 64 ? v.step.slice(0, 64) + "…" : v.step}`);
  }
  return "$" + steps.reverse().join("");
}

/** Iterative walk (no recursion: a 100 000-deep document must not overflow the stack). */
function checkShape(root: object, limits: DecodeLimits): void {
  const stack: Visit[] = [{ value: root, depth: 1, parent: null, step: "" }];
  let nodes = 0;
  while (stack.length > 0) {
    const visit = stack.pop()!;
    const { value, depth } = visit;
    if (typeof value === "string") {
      if (value.includes("\u0000")) throw new InvalidEventError(`${pathOf(visit)} contains a NUL character`);
      if (LONE_SURROGATE.test(value)) throw new InvalidEventError(`${pathOf(visit)} contains an unpaired UTF-16 surrogate`);
      continue;
    }
    if (typeof value === "number") {
      // JSON.parse turns 1e400 into Infinity, which canonical JSON (and JSON.stringify) write as null.
      if (!Number.isFinite(value)) throw new InvalidEventError(`${pathOf(visit)} is a number out of range`);
      continue;
    }
    if (value === null || typeof value !== "object") continue;
    if (depth > limits.maxDepth) throw new InvalidEventError(`nesting deeper than ${limits.maxDepth} at ${pathOf(visit)}`);
    if (Array.isArray(value)) {
      nodes += value.length;
      if (nodes > limits.maxNodes) throw new InvalidEventError(`more than ${limits.maxNodes} values in the document`);
      for (let i = 0; i < value.length; i++) stack.push({ value: value[i], depth: depth + 1, parent: visit, step: i });
      continue;
    }
    const keys = Object.keys(value);
    nodes += keys.length;
    if (nodes > limits.maxNodes) throw new InvalidEventError(`more than ${limits.maxNodes} values in the document`);
    for (const key of keys) {
      if (FORBIDDEN_KEYS.has(key)) throw new InvalidEventError(`forbidden key ${JSON.stringify(key)} at ${pathOf(visit)}`);
      if (key.includes("\u0000")) throw new InvalidEventError(`a key at ${pathOf(visit)} contains a NUL character`);
      if (LONE_SURROGATE.test(key)) throw new InvalidEventError(`a key at ${pathOf(visit)} contains an unpaired UTF-16 surrogate`);
      if (key === "prototype" && visit.step === "constructor" && visit.parent) {
        throw new InvalidEventError(`forbidden key "constructor.prototype" at ${pathOf(visit)}`);
      }
      stack.push({ value: (value as Record<string, unknown>)[key], depth: depth + 1, parent: visit, step: key });
    }
  }
}
