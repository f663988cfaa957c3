import { type ConsoleFilter, FILTER } from "./console-filter.js";
import {
  type Parsed, type Schema, flag, nested, oneOf, positiveInteger, positiveNumber, rawText, required, schema, text, withDefault,
} from "./request-schema.js";

/** What the console's routes read besides the filter (console-filter.ts): each refuses what it cannot mean, naming the field. */

const SAY_WHY = "say why (reason): it is kept in the audit";

/** `/entries/:id`, `/api/quarantine/:id/...` */
export const ENTRY_PARAMS = schema({ id: required(positiveInteger()) });

/** `/jobs/:id`: a job's id is looked up as it is; an unknown one is a 404. */
export const JOB_PARAMS = schema({ id: required(text()) });

export const AUDIT_QUERY = schema({ limit: withDefault(positiveInteger({ max: 500 }), 100), before: positiveInteger() });

/** The audit page shows 50 at a time and pages with `before`. */
export const AUDIT_PAGE_QUERY = schema({ before: positiveInteger() });

const ACTION = withDefault(oneOf(["replay", "discard"]), "replay");
const BULK_ACTION = schema({ action: ACTION });

/** The bulk confirmation page: the selection, and what to do with it. */
export const BULK_PAGE_QUERY: Schema<Parsed<typeof BULK_ACTION> & { filter: ConsoleFilter }> = {
  names: [...FILTER.names, ...BULK_ACTION.names],
  parse: (source, prefix) => ({ ...BULK_ACTION.parse(source, prefix), filter: FILTER.parse(source, prefix) }),
};

export const REPLAY_BODY = schema({ reason: text(), acceptNew: flag(), acceptStale: flag(), again: flag() }, {
  aliases: { acceptNew: "accept_new", acceptStale: "accept_stale" },
  check(body, fail) {
    if (body.acceptNew && body.acceptStale) fail("acceptStale", "choose acceptNew or acceptStale, not both: acceptNew is for a conflict, acceptStale for a stale event");
    if ((body.acceptNew || body.acceptStale || body.again) && !body.reason) fail("reason", SAY_WHY);
  },
});

export const DISCARD_BODY = schema({ reason: required(text(), SAY_WHY) });

/**
 * A bulk replay or discard. A real run needs `expected`, the count the operator confirmed after
 * a dry run; a form names its action (`action`), the API its path.
 */
export const BULK_BODY = schema({
  filter: nested(FILTER), dryRun: flag(), reason: text(), expected: positiveInteger(), limit: positiveInteger(), ratePerSecond: positiveNumber(),
  acceptNew: flag(), acceptStale: flag(), background: flag(), action: ACTION,
}, {
  aliases: { dryRun: "dry_run", ratePerSecond: "rate_per_second", acceptNew: "accept_new", acceptStale: "accept_stale" },
  check(body, fail) {
    if (body.dryRun) return;
    if (!body.reason) fail("reason", SAY_WHY);
    if (body.expected === undefined) fail("expected", "a bulk action needs expected: the count its dry run showed");
  },
});

export const LOGIN_BODY = schema({ token: rawText(), name: text() });

export type ReplayBody = Parsed<typeof REPLAY_BODY>;
export type BulkBody = Parsed<typeof BULK_BODY>;
export type BulkAction = Parsed<typeof BULK_ACTION>["action"];
