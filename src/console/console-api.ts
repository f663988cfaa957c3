import { diffConflict } from "../quarantine/conflict-diff.js";
import { currentFingerprint } from "../quarantine/current-fingerprint.js";
import { auditJson, bulkJson, diffJson, entrySummaryJson, entryWithAuditJson, groupJson } from "../quarantine/quarantine-json.js";
import { noSuchEntry } from "../quarantine/resolution-rules.js";
import { jobJson, startBulkJob } from "./bulk-job-page.js";
import { retentionPanel, runBulk } from "./console-actions.js";
import type { ConsoleContext } from "./console-context.js";
import type { ConsoleFilter } from "./console-filter.js";
import { outboxJson } from "./console-json.js";
import type { AUDIT_QUERY, BulkAction, BulkBody } from "./console-schemas.js";
import type { Parsed } from "./request-schema.js";
import type { Reply } from "./route.js";
import { groupsOf } from "./quarantine-selection.js";

/** The answers of the JSON API's reads and bulk actions: snake_case, as the command's `--json` prints them. */

const iso = (d: Date | null | undefined) => (d ? d.toISOString() : null);

/** Failing outbox rows the panel lists (the count covers them all). */
export const FAILING_ROWS_SHOWN = 20;

export async function entriesJson(ctx: ConsoleContext, filter: ConsoleFilter) {
  const entries = await (await ctx.operations()).listQuarantineEntries(filter);
  return { entries: entries.map(entrySummaryJson), next_after: entries.length === filter.limit ? entries.at(-1)!.id : null };
}

export async function entryJson(ctx: ConsoleContext, id: number) {
  const operations = await ctx.operations();
  const entry = await operations.getQuarantineEntry(id);
  if (!entry) throw noSuchEntry(id);
  const [audit, current] = await Promise.all([operations.quarantineAudit(id), currentFingerprint(operations, entry)]);
  return entryWithAuditJson(entry, audit, current);
}

export async function conflictJson(ctx: ConsoleContext, id: number) {
  return diffJson(await diffConflict(await ctx.operations(), id));
}

export async function groupsJson(ctx: ConsoleContext, filter: ConsoleFilter) {
  return { groups: (await groupsOf(await ctx.operations(), filter)).map(groupJson) };
}

export async function auditLogJson(ctx: ConsoleContext, { limit, before }: Parsed<typeof AUDIT_QUERY>) {
  const records = await (await ctx.operations()).auditLog({ limit, ...(before !== undefined ? { beforeId: before } : {}) });
  return { audit: records.map(auditJson), next_before: records.length === limit ? records.at(-1)!.id : null };
}

export async function outboxPanelJson(ctx: ConsoleContext) {
  const operations = await ctx.operations();
  return outboxJson(...(await Promise.all([operations.outboxBacklog(), operations.failingOutboxRows(FAILING_ROWS_SHOWN)])));
}

export async function retentionJson(ctx: ConsoleContext) {
  const r = await retentionPanel(ctx);
  return {
    now: iso(r.now), dedup_records: r.totalRecords, replay_window_ms: r.replayWindowMs, cutoff: iso(r.cutoff),
    handlers: r.handlers.map((h) => ({
      handler: h.handler, records: h.records, oldest: iso(h.oldest), newest: iso(h.newest),
      purged_through: iso(h.purgeHorizon?.purgedThrough), rows_purged: h.purgeHorizon?.rowsPurged ?? 0,
    })),
    hold: r.hold ? { quarantine_id: r.hold.quarantineId, handler: r.hold.handler, reason: r.hold.reason, hold_from: iso(r.hold.holdFrom) } : null,
  };
}

/** A bulk action: its result, or with `background` a 202 and the job to follow (`Location`). */
export async function bulkReply(ctx: ConsoleContext, action: BulkAction, actor: string, body: BulkBody): Promise<Reply> {
  if (!body.background) return { json: bulkJson(await runBulk(ctx, action, actor, body)) };
  const job = await startBulkJob(ctx, action, actor, body);
  return { json: jobJson(job), status: 202, headers: { location: ctx.href(`/api/jobs/${job.id}`) } };
}
