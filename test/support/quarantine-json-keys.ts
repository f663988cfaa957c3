/**
 * The fields of the quarantine's JSON, as scripts read them from `rabbit-inbox quarantine ...
 * --json` and from the console's API alike: the tests of both check their output against these.
 */
export const AUDIT_KEYS = ["action", "actor", "at", "failure", "id", "options", "published_at", "quarantine_id", "reason"];
export const GROUP_KEYS = ["cause", "entries", "example", "first_seen", "handler", "key", "last_seen", "reason", "status"];
export const BULK_KEYS = ["by_reason", "done", "dry_run", "failed", "resumed", "selected", "skipped", "stopped", "unconfirmed"];

export const keysOf = (value: unknown): string[] => Object.keys(value as object).sort();
