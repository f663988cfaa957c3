import { escapeControlCharacters } from "../core/control-characters.js";

/**
 * Quarantine reasons the library itself gives: decode and validation (`invalid`), a payload
 * conflict, the stale fence, the poison threshold and the retries, a constraint or data error of
 * business SQL, a publish AMQP could not carry, a statement larger than the database takes.
 */
export const LIBRARY_QUARANTINE_REASONS: readonly string[] = [
  "invalid", "conflict", "stale", "retries_exhausted", "constraint_violation", "invalid_publish", "too_large",
];

/** The `reason` label of a quarantine whose reason is neither the library's nor one the handler declared. */
export const OTHER_REASON = "other";

/**
 * A label value as the exposition shows it: a name from configuration (a queue, a handler) may
 * hold characters a terminal or a dashboard acts on (ESC, a bidirectional override); they are
 * written as escapes, the same way the command line shows them.
 */
export function labelValue(text: string): string {
  return escapeControlCharacters(text);
}

/**
 * The `reason` label of a quarantine. A handler's reason is text it chose, and may carry an id
 * or a producer's words: one series per distinct text would grow without bound. So the label
 * takes a bounded set, the library's reasons and those the handler declares
 * (`quarantineReasons`); any other reason is counted as `other`, its text kept in the
 * quarantine row.
 */
export function reasonLabeller(declared: readonly string[] = []): (reason: string) => string {
  const known = new Map([...LIBRARY_QUARANTINE_REASONS, ...declared].map((reason) => [reason, labelValue(reason)]));
  return (reason) => known.get(reason) ?? OTHER_REASON;
}
