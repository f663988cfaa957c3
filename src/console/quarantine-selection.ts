import { describeError } from "../core/errors.js";
import { discardQuarantineEntry } from "../quarantine/discard.js";
import type { QuarantineAdmin, QuarantineDetail, QuarantineStatus } from "../quarantine/quarantine-admin.js";
import { type ConfirmedPublish, replayQuarantineEntry } from "../quarantine/replay.js";
import type { ConsoleFilter } from "./console-filter.js";

/** Entries grouped by handler, reason and a normalised cause. */
export interface ConsoleGroup {
  key: string;
  handler: string;
  reason: string;
  cause: string;
  status: QuarantineStatus;
  entries: number;
  firstSeen: Date;
  lastSeen: Date;
}

export interface BulkRequest {
  filter: ConsoleFilter;
  actor: string;
  reason: string;
  limit?: number;
  dryRun?: boolean;
  ratePerSecond?: number;
  acceptNew?: boolean;
  acceptStale?: boolean;
  /** Stops the run between two entries (what was done stays done, and audited). */
  signal?: AbortSignal;
  onProgress?: (progress: BulkProgressCounts) => void;
}

export interface BulkProgressCounts {
  selected: number;
  done: number;
  skipped: number;
  failed: number;
}

export interface BulkOutcome {
  dryRun: boolean;
  selected: number;
  byReason: Record<string, number>;
  done: number;
  skipped: Array<{ id: number; why: string }>;
  failed: Array<{ id: number; error: string }>;
  /** Why the run ended before the end of its selection (cancelled); null when it did not. */
  stopped?: string | null;
}

/**
 * What the console needs to select and act on many entries: the list, the groups and the bulk
 * actions. The console talks to this interface only, so the selection can move into the store
 * (keyset paging, SQL filters) without touching a page.
 */
export interface QuarantineSelection {
  list(admin: QuarantineAdmin, filter: ConsoleFilter): Promise<QuarantineDetail[]>;
  groups(admin: QuarantineAdmin, filter: ConsoleFilter): Promise<ConsoleGroup[]>;
  bulkReplay(admin: QuarantineAdmin, publish: ConfirmedPublish, request: BulkRequest): Promise<BulkOutcome>;
  bulkDiscard(admin: QuarantineAdmin, request: BulkRequest): Promise<BulkOutcome>;
}

/** The most entries the in-process selection reads to filter and group. */
const SCAN_LIMIT = 10_000;

/**
 * A cause without what varies from one occurrence to the next (numbers, ids, quoted values), so
 * that "account 17 missing" and "account 42 missing" fall in one group.
 */
export function normaliseCause(detail: string): string {
  return detail
    // Greedy: a quoted snippet of the body may itself hold quotes (and end in "...").
    .replace(/"[\s\S]*"(\.\.\.)?/, "\"…\"")
    .replace(/'[^']*'/g, "'…'")
    .replace(/\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/gi, "<uuid>")
    .replace(/\b(?=[0-9a-f]*\d)[0-9a-f]{8,}\b/gi, "<hex>")
    .replace(/\d+/g, "<n>")
    .replace(/\s+/g, " ")
    .trim()
    .slice(0, 200);
}

export const groupKeyOf = (e: Pick<QuarantineDetail, "handler" | "reason" | "detail">): string =>
  Buffer.from(JSON.stringify([e.handler, e.reason, normaliseCause(e.detail)])).toString("base64url");

function matches(e: QuarantineDetail, f: ConsoleFilter): boolean {
  return (f.tenant === undefined || e.tenant === f.tenant)
    && (f.since === undefined || e.firstSeen >= f.since)
    && (f.until === undefined || e.firstSeen < f.until)
    && (f.fingerprint === undefined || e.fingerprint === f.fingerprint || e.storedFingerprint === f.fingerprint)
    && (f.group === undefined || groupKeyOf(e) === f.group)
    && (f.text === undefined || e.detail.toLowerCase().includes(f.text.toLowerCase()))
    && (f.afterId === undefined || e.id > f.afterId);
}

async function select(admin: QuarantineAdmin, filter: ConsoleFilter, limit: number): Promise<QuarantineDetail[]> {
  const scanned = await admin.listQuarantineEntries({
    status: filter.status, limit: SCAN_LIMIT, ...(filter.handler ? { handler: filter.handler } : {}), ...(filter.reason ? { reason: filter.reason } : {}),
  });
  return scanned.filter((e) => matches(e, filter)).slice(0, limit);
}

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

/**
 * The selection over the single-entry operations every store has: the store filters by status,
 * handler and reason, the rest is filtered here over at most SCAN_LIMIT entries. Replays go one
 * by one through replayQuarantineEntry, so each has its audit record and its confirm.
 */
export const inProcessSelection: QuarantineSelection = {
  list: (admin, filter) => select(admin, filter, filter.limit),

  async groups(admin, filter) {
    const groups = new Map<string, ConsoleGroup>();
    for (const e of await select(admin, { ...filter, group: undefined, afterId: undefined }, SCAN_LIMIT)) {
      const key = groupKeyOf(e);
      const g = groups.get(`${key}/${e.status}`);
      if (!g) groups.set(`${key}/${e.status}`, { key, handler: e.handler, reason: e.reason, cause: normaliseCause(e.detail), status: e.status, entries: 1, firstSeen: e.firstSeen, lastSeen: e.lastSeen });
      else {
        g.entries++;
        if (e.firstSeen < g.firstSeen) g.firstSeen = e.firstSeen;
        if (e.lastSeen > g.lastSeen) g.lastSeen = e.lastSeen;
      }
    }
    return [...groups.values()].sort((a, b) => b.entries - a.entries || a.handler.localeCompare(b.handler));
  },

  async bulkReplay(admin, publish, request) {
    return bulk(admin, request, "replay", async (e) => {
      // A conflict replayed without a choice would only conflict again: it needs accept-new.
      if (e.reason === "conflict" && !request.acceptNew) return "a conflict: choose accept-new (the new version replaces the stored one) or leave it";
      await replayQuarantineEntry(admin, publish, {
        id: e.id, actor: request.actor, reason: request.reason,
        acceptNew: e.reason === "conflict" && (request.acceptNew ?? false), acceptStale: e.reason === "stale" && (request.acceptStale ?? false),
      });
      return null;
    });
  },

  async bulkDiscard(admin, request) {
    return bulk(admin, request, "discard", async (e) => {
      await discardQuarantineEntry(admin, { id: e.id, actor: request.actor, reason: request.reason });
      return null;
    });
  },
};

async function bulk(admin: QuarantineAdmin, request: BulkRequest, action: string, act: (e: QuarantineDetail) => Promise<string | null>): Promise<BulkOutcome> {
  // Only held entries can be acted on: a replayed one is on its way, a discarded one is final.
  const entries = await select(admin, { ...request.filter, status: "held" }, request.limit ?? SCAN_LIMIT);
  const byReason: Record<string, number> = {};
  for (const e of entries) byReason[e.reason] = (byReason[e.reason] ?? 0) + 1;
  const outcome: BulkOutcome = { dryRun: request.dryRun ?? false, selected: entries.length, byReason, done: 0, skipped: [], failed: [] };
  if (outcome.dryRun) return outcome;
  if (request.reason.trim() === "") throw new RangeError(`a bulk ${action} needs a reason`);
  const pauseMs = request.ratePerSecond ? 1000 / request.ratePerSecond : 0;
  for (const e of entries) {
    if (request.signal?.aborted) {
      outcome.stopped = "cancelled";
      break;
    }
    try {
      const why = await act(e);
      if (why) outcome.skipped.push({ id: e.id, why });
      else outcome.done++;
    } catch (error) {
      outcome.failed.push({ id: e.id, error: describeError(error) });
    }
    request.onProgress?.({ selected: outcome.selected, done: outcome.done, skipped: outcome.skipped.length, failed: outcome.failed.length });
    if (pauseMs > 0) await sleep(pauseMs);
  }
  return outcome;
}
