import { LONE_SURROGATE } from "./decode.js";
import { InvalidEventError } from "./errors.js";

/** The identity of a business event within one handler's dedup scope. */
export interface EventKey {
  tenant: string;
  eventId: string;
}

/** What a handler's `parse` returns: the typed event and its identity. */
export interface ParsedEvent<E> {
  key: EventKey;
  event: E;
  /**
   * The value fingerprinted for conflict detection. Defaults to the decoded body. Override to
   * exclude fields a producer may legitimately change on retry (e.g. a `sent_at`).
   */
  fingerprintSource?: unknown;
}

/** Largest tenant or event id accepted (characters). Longer ids are rejected as `invalid`. */
export const MAX_ID_LENGTH = 256;

/**
 * Whatever the checks of readId refuse by content: a control character, white space at either end
 * (`\s` is the set `trim()` removes) or an unpaired surrogate.
 */
// eslint-disable-next-line no-control-regex
const SUSPECT_ID = /[\u0000-\u001f\u007f]|^\s|\s$|\p{Cs}/u;

/** Reads a required identifier field: a non-empty string of printable characters. */
export function readId(body: Record<string, unknown>, field: string): string {
  const value = body[field];
  if (typeof value !== "string") {
    throw new InvalidEventError(`${field} must be a string, got ${value === null ? "null" : typeof value}`);
  }
  if (value.length === 0) throw new InvalidEventError(`${field} must not be empty`);
  if (value.length > MAX_ID_LENGTH) throw new InvalidEventError(`${field} is longer than ${MAX_ID_LENGTH} characters`);
  // One pass for the usual, clean id; the checks below name what is wrong with a suspect one.
  if (!SUSPECT_ID.test(value)) return value;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(value)) throw new InvalidEventError(`${field} contains control characters`);
  if (value.trim() !== value) throw new InvalidEventError(`${field} has leading or trailing spaces`);
  // A lone surrogate becomes U+FFFD in every driver: two distinct ids would collide.
  if (LONE_SURROGATE.test(value)) throw new InvalidEventError(`${field} contains an unpaired UTF-16 surrogate`);
  return value;
}

/** Default identity: `tenant` and `event_id` fields of the JSON body. */
export function defaultEventKey(body: Record<string, unknown>): EventKey {
  return { tenant: readId(body, "tenant"), eventId: readId(body, "event_id") };
}

export function eventKeyString(key: EventKey): string {
  return JSON.stringify([key.tenant, key.eventId]);
}
