import { discardQuarantineEntry } from "../quarantine/discard.js";
import type { AuditRecord } from "../core/store-contract/quarantine-admin.js";
import { replayQuarantineEntry } from "../quarantine/replay.js";
import type { DedupSummary, PurgeHorizon, QuarantineHold } from "../core/store-contract/retention-admin.js";
import type { ConsoleContext } from "./console-context.js";
import type { ConsoleFilter } from "./console-filter.js";
import { ConsoleRequestError } from "./console-request-error.js";
import type { BulkAction, BulkBody, ReplayBody } from "./console-schemas.js";
import type { BulkResult } from "../quarantine/bulk-operation.js";
import { type BulkRequest, discardBulk, replayBulk } from "./quarantine-selection.js";

/** What the audit keeps of an operator's reason. */
const REASON_CHARS = 500;
const kept = (reason: string | undefined) => (reason ?? "").slice(0, REASON_CHARS);

export async function replayOne(ctx: ConsoleContext, id: number, actor: string, body: ReplayBody): Promise<AuditRecord> {
  const { acceptNew, acceptStale, again } = body;
  const reason = kept(body.reason) || "replayed from the console";
  const [operations, publish] = await Promise.all([ctx.operations(), ctx.publish()]);
  return (await replayQuarantineEntry(operations, publish, { id, actor, reason, acceptNew, acceptStale, again })).audit;
}

export async function discardOne(ctx: ConsoleContext, id: number, actor: string, reason: string): Promise<AuditRecord> {
  return discardQuarantineEntry(await ctx.operations(), { id, actor, reason: kept(reason) });
}

/** A bulk request as the schemas read it; a dry run needs only the filter. */
export type BulkAsked = Pick<BulkBody, "dryRun"> & Partial<Omit<BulkBody, "filter" | "dryRun" | "action" | "background">> & { filter: ConsoleFilter };

/**
 * A bulk replay or discard over the entries a filter selects (held ones only). A real run comes
 * with `expected`, the count the operator confirmed after a dry run: when the selection changed
 * in between, nothing is done and the new count is reported instead.
 */
export async function runBulk(ctx: ConsoleContext, action: BulkAction, actor: string, asked: BulkAsked): Promise<BulkResult> {
  return (await prepareBulk(ctx, action, actor, asked))({});
}

/** What a prepared bulk run can be given: a signal that cancels it, a callback for its progress. */
export type BulkRun = (extras: Pick<BulkRequest, "signal" | "onProgress">) => Promise<BulkResult>;

/**
 * Checks that a real run's selection still holds the confirmed count and returns the run, to
 * await or to start in the background.
 */
export async function prepareBulk(ctx: ConsoleContext, action: BulkAction, actor: string, asked: BulkAsked): Promise<BulkRun> {
  const { filter, dryRun, limit, ratePerSecond } = asked;
  const request = {
    filter, actor, reason: dryRun ? "" : kept(asked.reason), dryRun,
    ...(limit !== undefined ? { limit } : {}), ...(ratePerSecond !== undefined ? { ratePerSecond } : {}),
    acceptNew: asked.acceptNew ?? false, acceptStale: asked.acceptStale ?? false,
  };
  const operations = await ctx.operations();
  if (!dryRun) {
    const preview = await (action === "replay" ? replayBulk(operations, () => Promise.resolve(), { ...request, dryRun: true }) : discardBulk(operations, { ...request, dryRun: true }));
    if (preview.selected !== asked.expected) {
      throw new ConsoleRequestError("RI_CONSOLE_SELECTION_CHANGED",
        `the selection changed since the dry run: it now holds ${preview.selected} entries, not ${asked.expected}; look again and confirm the new count`);
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
