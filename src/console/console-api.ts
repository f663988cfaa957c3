import { groupsOf } from "./quarantine-selection.js";
import type { IncomingMessage, ServerResponse } from "node:http";
import { diffConflict } from "../quarantine/conflict-diff.js";
import { currentFingerprint } from "../quarantine/current-fingerprint.js";
import { QuarantineOperationError } from "../quarantine/quarantine-operation-error.js";
import { jobJson, jobOf, startBulkJob } from "./bulk-job-page.js";
import { discardOne, replayOne, retentionPanel, runBulk } from "./console-actions.js";
import type { ConsoleContext } from "./console-context.js";
import { ConsoleRequestError, parseFilter, positiveParam } from "./console-filter.js";
import { auditJson, bulkJson, diffJson, entrySummaryJson, entryWithAuditJson, groupJson } from "../quarantine/quarantine-json.js";
import { outboxJson } from "./console-json.js";
import type { Caller } from "./console-sessions.js";
import { readFields, sendJson } from "./http-io.js";

const iso = (d: Date | null | undefined) => (d ? d.toISOString() : null);

/** Failing outbox rows the panel lists (the count covers them all). */
export const FAILING_ROWS_SHOWN = 20;

/** `/quarantine/12/diff` -> 12 */
export function idIn(path: string, pattern: RegExp): number | null {
  const match = pattern.exec(path);
  if (!match) return null;
  const id = Number(match[1]);
  return Number.isSafeInteger(id) && id > 0 ? id : null;
}

/**
 * The JSON API under `/api`: reads are GET, every change is a POST (the handler has checked the
 * caller, and the CSRF token of a session, before this runs). Returns false for a path it does
 * not know.
 */
export async function serveApi(ctx: ConsoleContext, req: IncomingMessage, res: ServerResponse, path: string, query: URLSearchParams, caller: Caller): Promise<boolean> {
  const method = req.method ?? "GET";
  if (method === "GET") {
    const value = await readRoute(ctx, path, query);
    if (value === undefined) return false;
    sendJson(res, 200, value);
    return true;
  }
  if (method !== "POST") return false;
  let id: number | null;
  if ((id = idIn(path, /^\/quarantine\/(\d+)\/replay$/)) !== null) {
    sendJson(res, 200, { audit: auditJson(await replayOne(ctx, id, caller.actor, await readFields(req))) });
  } else if ((id = idIn(path, /^\/quarantine\/(\d+)\/discard$/)) !== null) {
    sendJson(res, 200, { audit: auditJson(await discardOne(ctx, id, caller.actor, await readFields(req))) });
  } else if (path === "/bulk/replay" || path === "/bulk/discard") {
    const fields = await readFields(req);
    const action = path === "/bulk/replay" ? "replay" : "discard";
    if (fields.background === true) {
      const job = await startBulkJob(ctx, caller.actor, { ...fields, action });
      sendJson(res, 202, jobJson(job), { location: ctx.href(`/api/jobs/${job.id}`) });
    } else {
      sendJson(res, 200, bulkJson(await runBulk(ctx, action, caller.actor, fields)));
    }
  } else if (/^\/jobs\/[\w-]+\/cancel$/.test(path)) {
    const job = jobOf(ctx, path.split("/")[2]!);
    job.cancel();
    sendJson(res, 200, jobJson(job));
  } else {
    return false;
  }
  return true;
}

async function readRoute(ctx: ConsoleContext, path: string, query: URLSearchParams): Promise<unknown> {
  const operations = await ctx.operations();
  const filterOf = () => parseFilter((name) => query.get(name) ?? undefined);
  if (path === "/quarantine") {
    const filter = filterOf();
    const entries = await operations.listQuarantineEntries(filter);
    return { entries: entries.map(entrySummaryJson), next_after: entries.length === filter.limit ? entries.at(-1)!.id : null };
  }
  let id: number | null;
  if ((id = idIn(path, /^\/quarantine\/(\d+)$/)) !== null) {
    const entry = await operations.getQuarantineEntry(id);
    if (!entry) throw new ConsoleRequestError(`no quarantine entry #${id}`, 404);
    const [audit, current] = await Promise.all([operations.quarantineAudit(id), currentFingerprint(operations, entry)]);
    return entryWithAuditJson(entry, audit, current);
  }
  if ((id = idIn(path, /^\/quarantine\/(\d+)\/diff$/)) !== null) {
    if (!(await operations.getQuarantineEntry(id))) throw new ConsoleRequestError(`no quarantine entry #${id}`, 404);
    return diffJson(await diffConflict(operations, id));
  }
  if (/^\/jobs\/[\w-]+$/.test(path)) return jobJson(jobOf(ctx, path.split("/")[2]!));
  if (path === "/groups") return { groups: (await groupsOf(operations, filterOf())).map(groupJson) };
  if (path === "/audit") {
    const limit = positiveParam(query, "limit", 500) ?? 100;
    const before = positiveParam(query, "before");
    const records = await operations.auditLog({ limit, ...(before !== undefined ? { beforeId: before } : {}) });
    return { audit: records.map(auditJson), next_before: records.length === limit ? records.at(-1)!.id : null };
  }
  if (path === "/outbox") return outboxJson(...(await Promise.all([operations.outboxBacklog(), operations.failingOutboxRows(FAILING_ROWS_SHOWN)])));
  if (path === "/retention") {
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
  return undefined;
}

/** The HTTP status of a failure: the operator's mistake (4xx) or ours (500). */
export function statusOf(error: unknown): number {
  if (error instanceof ConsoleRequestError) return error.status;
  if (error instanceof QuarantineOperationError) return /^no quarantine entry/.test(error.message) ? 404 : 409;
  if (error instanceof RangeError) return 400;
  return 500;
}
