import { discardQuarantineEntry } from "../quarantine/discard.js";
import type { AuditRecord } from "../quarantine/quarantine-admin.js";
import { replayQuarantineEntry } from "../quarantine/replay.js";
import type { DedupSummary, PurgeHorizon, QuarantineHold } from "../retention/retention-store.js";
import type { ConsoleContext } from "./console-context.js";
import { ConsoleRequestError, parseFilter } from "./console-filter.js";
import type { BulkResult } from "../quarantine/bulk-operation.js";
import { type BulkRequest, discardBulk, replayBulk } from "./quarantine-selection.js";

/** What an operator's action is made of, from a form or a JSON body. */
type Fields = Record<string, unknown>;

const flag = (v: unknown) => v === true || v === "true" || v === "on" || v === "1";

function reasonOf(fields: Fields, required: boolean): string {
  const reason = typeof fields.reason === "string" ? fields.reason.trim() : "";
  if (required && reason === "") throw new ConsoleRequestError("say why (reason): it is kept in the audit");
  return reason.slice(0, 500);
}

function positiveOrUndefined(value: unknown, name: string): number | undefined {
  if (value === undefined || value === null || value === "") return undefined;
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new ConsoleRequestError(`${name} must be a positive number`);
  return n;
}

export async function replayOne(ctx: ConsoleContext, id: number, actor: string, fields: Fields): Promise<AuditRecord> {
  const acceptNew = flag(fields.acceptNew ?? fields.accept_new);
  const acceptStale = flag(fields.acceptStale ?? fields.accept_stale);
  const again = flag(fields.again);
  const reason = reasonOf(fields, acceptNew || acceptStale || again) || "replayed from the console";
  const [operations, publish] = await Promise.all([ctx.operations(), ctx.publish()]);
  return (await replayQuarantineEntry(operations, publish, { id, actor, reason, acceptNew, acceptStale, again })).audit;
}

export async function discardOne(ctx: ConsoleContext, id: number, actor: string, fields: Fields): Promise<AuditRecord> {
  return discardQuarantineEntry(await ctx.operations(), { id, actor, reason: reasonOf(fields, true) });
}

/**
 * A bulk replay or discard over the entries a filter selects (held ones only). A real run needs
 * `expected`, the count the operator confirmed after a dry run: when the selection changed in
 * between, nothing is done and the new count is reported instead.
 */
export async function runBulk(ctx: ConsoleContext, action: "replay" | "discard", actor: string, fields: Fields): Promise<BulkResult> {
  return (await prepareBulk(ctx, action, actor, fields))({});
}

/** What a prepared bulk run can be given: a signal that cancels it, a callback for its progress. */
export type BulkRun = (extras: Pick<BulkRequest, "signal" | "onProgress">) => Promise<BulkResult>;

/**
 * Checks a bulk request (its fields, and for a real run that the selection still holds the
 * confirmed count) and returns the run, to await or to start in the background.
 */
export async function prepareBulk(ctx: ConsoleContext, action: "replay" | "discard", actor: string, fields: Fields): Promise<BulkRun> {
  // JSON nests the filter under `filter`; a form names its fields `filter.<name>` (its own `reason` is the audit's).
  const raw = (fields.filter !== null && typeof fields.filter === "object" ? fields.filter
    : Object.fromEntries(Object.entries(fields).filter(([k]) => k.startsWith("filter.")).map(([k, v]) => [k.slice(7), v]))) as Fields;
  const filter = parseFilter((name) => raw[name]);
  const dryRun = flag(fields.dryRun ?? fields.dry_run);
  const limit = positiveOrUndefined(fields.limit, "limit");
  const ratePerSecond = positiveOrUndefined(fields.ratePerSecond ?? fields.rate_per_second, "ratePerSecond");
  const request = {
    filter, actor, reason: dryRun ? "" : reasonOf(fields, true), dryRun,
    ...(limit !== undefined ? { limit: Math.trunc(limit) } : {}), ...(ratePerSecond !== undefined ? { ratePerSecond } : {}),
    acceptNew: flag(fields.acceptNew ?? fields.accept_new), acceptStale: flag(fields.acceptStale ?? fields.accept_stale),
  };
  const operations = await ctx.operations();
  if (!dryRun) {
    const expected = positiveOrUndefined(fields.expected, "expected");
    if (expected === undefined) throw new ConsoleRequestError("a bulk action needs expected: the count its dry run showed");
    const preview = await (action === "replay" ? replayBulk(operations, () => Promise.resolve(), { ...request, dryRun: true }) : discardBulk(operations, { ...request, dryRun: true }));
    if (preview.selected !== expected) {
      throw new ConsoleRequestError(`the selection changed since the dry run: it now holds ${preview.selected} entries, not ${expected}; look again and confirm the new count`, 409);
    }
  }
  if (action === "discard") return (extras) => discardBulk(operations, { ...request, ...extras });
  const publish = dryRun ? () => Promise.resolve() : await ctx.publish();
  return (extras) => replayBulk(operations, publish, { ...request, ...extras });
}

export interface RetentionPanel {
  now: Date;
  handlers: Array<DedupSummary & { purgeHorizon: PurgeHorizon | null }>;
  totalRecords: number;
  hold: QuarantineHold | null;
  /** With a configured replay window: the cutoff cleanup would use, and where the hold stops it. */
  replayWindowMs: number | null;
  cutoff: Date | null;
}

export async function retentionPanel(ctx: ConsoleContext): Promise<RetentionPanel> {
  const operations = await ctx.operations();
  const [now, summary, horizons, hold] = await Promise.all([operations.now(), operations.dedupSummary(), operations.purgeHorizons(), operations.quarantineHold()]);
  const names = [...new Set([...summary.map((s) => s.handler), ...horizons.map((h) => h.handler)])].sort();
  const handlers = names.map((handler) => ({
    ...(summary.find((s) => s.handler === handler) ?? { handler, records: 0, oldest: null, newest: null }),
    purgeHorizon: horizons.find((h) => h.handler === handler) ?? null,
  }));
  const windowMs = ctx.options.replayWindowMs ?? null;
  return {
    now, handlers, totalRecords: handlers.reduce((n, h) => n + h.records, 0), hold, replayWindowMs: windowMs,
    cutoff: windowMs === null ? null : new Date(now.getTime() - windowMs),
  };
}
