import type { EventKey } from "../core/event.js";
import type { HandedOffRow, OutboxHandoff } from "../core/store-contract/outbox-signal.js";
import type { HandedOffSettlement, OutboxClaim, OutboxRow } from "../core/store-contract/outbox-relay-store.js";

/** Ordering keys remembered at most; a key forgotten only sends its next row through a claim. */
const MAX_KEYS = 100_000;

export interface HandoffQueueOptions {
  leaseMs: number;
  /** The relay keeps no sent rows: the store may pack each transaction's rows (`OutboxHandoff.packs`). */
  packs?: boolean;
  /** Rows waiting in memory at most; beyond it, the rest go back to the claims at the next claim. */
  maxRows: number;
  /** A handoff arrived: the relay should build a claim. */
  wake: () => void;
  /** Writes what became of a claim's rows (the store's `settleHandedOff`). */
  settle: (settlement: HandedOffSettlement) => Promise<void>;
}

interface Handoff {
  rows: readonly HandedOffRow[];
  expiresAt: number;
}

/**
 * Rows committed by this process, waiting in memory for the relay. The relay turns them into
 * claims like the database's (`claim`), so they go out through the same publish, confirm and
 * mark steps and keep the same per-key order on its one channel.
 *
 * A row of an ordering key may go out from memory only when no earlier row of its key waits in
 * the database: the key's rows written before it (as its transaction saw them) must all be rows
 * this relay took from memory itself. `chain` remembers, per key, the newest such row; a row
 * whose key has an older unsent row that is not in the chain (a failed publish waiting for its
 * retry, a row of a process that died, another writer's row) goes back to the claims, due now,
 * and so do the key's later rows until the claims have sent what was waiting.
 */
export class HandoffQueue implements OutboxHandoff {
  readonly leaseMs: number;
  readonly packs: boolean;
  private readonly queued: Handoff[] = [];
  private queuedRows = 0;
  private readonly chain = new Map<string, number>();
  private accepting = true;
  /**
   * Rows out of `queued` whose settlement is not written yet (a claim's, or released ones): they
   * are still this process's to publish or to make due.
   */
  private readonly unsettled = new Set<readonly HandedOffRow[]>();
  /**
   * The events whose rows are in memory, built when a duplicate asks (`holdsRowsOf`) and dropped
   * at the next change: the hot path keeps no per-row index of them.
   */
  private sources: Set<string> | undefined;

  constructor(private readonly options: HandoffQueueOptions) {
    this.leaseMs = options.leaseMs;
    this.packs = options.packs ?? false;
  }

  take(rows: readonly HandedOffRow[], leasedAt: number): void {
    if (rows.length === 0) return;
    if (!this.accepting) {
      // Written while the relay was still attached, committed after it let go: to the claims.
      this.options.settle({ sent: [], failed: [], due: rows.map((r) => r.id), ...packedOf(rows) }).catch(() => undefined);
      return;
    }
    this.queued.push({ rows, expiresAt: leasedAt + this.leaseMs });
    this.queuedRows += rows.length;
    this.sources = undefined;
    this.options.wake();
  }

  holdsRowsOf(handler: string, key: EventKey): boolean {
    this.sources ??= this.heldSources();
    return this.sources.has(sourceKey(handler, key.tenant, key.eventId));
  }

  /** Rows waiting in memory. */
  get size(): number {
    return this.queuedRows;
  }

  /**
   * A claim of the waiting handoffs, whole ones up to about `limit` rows (at least one), or
   * null when none waits. Rows that may not go out from memory are not in its rows: its settle
   * makes them due. Past `maxRows`, every other waiting row joins them.
   */
  claim(limit: number): OutboxClaim | null {
    if (this.queued.length === 0) return null;
    const taken: HandedOffRow[] = [];
    let expiresAt = Infinity;
    while (this.queued.length > 0 && (taken.length === 0 || taken.length + this.queued[0]!.rows.length <= limit)) {
      const handoff = this.queued.shift()!;
      taken.push(...handoff.rows);
      expiresAt = Math.min(expiresAt, handoff.expiresAt);
    }
    const overflow: HandedOffRow[] = [];
    if (this.queuedRows - taken.length > this.options.maxRows) {
      for (const handoff of this.queued.splice(0)) overflow.push(...handoff.rows);
    }
    this.queuedRows -= taken.length + overflow.length;
    // Handoffs arrive in commit order; ids follow insert order, which concurrent transactions may not share.
    taken.sort((a, b) => a.id - b.id);
    const rows: OutboxRow[] = [];
    const held: number[] = overflow.map((r) => r.id);
    const stopped = new Set<string>();
    for (const row of overflow) if (row.record.orderingKey !== null) this.chain.delete(row.record.orderingKey);
    for (const row of taken) {
      if (this.mayPublish(row, stopped)) rows.push(outboxRowOf(row));
      else held.push(row.id);
    }
    const outOfQueue = overflow.length === 0 ? taken : [...taken, ...overflow];
    this.unsettled.add(outOfQueue);
    return this.claimOf(rows, held, outOfQueue, expiresAt);
  }

  /** Takes rows into memory again (after `release`). */
  accept(): void {
    this.accepting = true;
  }

  /**
   * Every waiting row back to the claims, due now (the broker is gone, or the relay stops), and
   * so is every row handed over later, until `accept`.
   */
  async release(): Promise<void> {
    this.accepting = false;
    const rows = this.queued.splice(0).flatMap((h) => h.rows);
    this.queuedRows = 0;
    this.chain.clear();
    this.unsettled.add(rows);
    try {
      if (rows.length > 0) await this.options.settle({ sent: [], failed: [], due: rows.map((r) => r.id), ...packedOf(rows) });
    } finally {
      this.forget(rows);
    }
  }

  /** The events of every row in memory: waiting, or taken and not settled yet. */
  private heldSources(): Set<string> {
    const sources = new Set<string>();
    const add = (rows: readonly HandedOffRow[]) => {
      for (const { record: { source } } of rows) if (source) sources.add(sourceKey(source.handler, source.tenant, source.eventId));
    };
    for (const handoff of this.queued) add(handoff.rows);
    for (const rows of this.unsettled) add(rows);
    return sources;
  }

  /** Rows whose settlement is written (or failed to be): no longer this process's. */
  private forget(rows: readonly HandedOffRow[]): void {
    this.unsettled.delete(rows);
    this.sources = undefined;
  }

  private mayPublish(row: HandedOffRow, stopped: Set<string>): boolean {
    const key = row.record.orderingKey;
    if (key === null) return true;
    if (stopped.has(key)) return false;
    const newest = this.chain.get(key);
    if (row.previousUnsent === null || (newest !== undefined && row.previousUnsent <= newest)) {
      this.chain.delete(key);
      this.chain.set(key, row.id);
      if (this.chain.size > MAX_KEYS) this.chain.delete(this.chain.keys().next().value!);
      return true;
    }
    stopped.add(key);
    this.chain.delete(key);
    return false;
  }

  private claimOf(rows: OutboxRow[], held: readonly number[], taken: readonly HandedOffRow[], expiresAt: number): OutboxClaim {
    let settled = false;
    return {
      rows,
      expiresAt,
      handedOff: true,
      settle: async (settlement) => {
        if (settled) throw new Error("a handed-off outbox claim was settled twice");
        settled = true;
        const sent = new Set(settlement.sent);
        const failed = new Set(settlement.failed.map((f) => f.id));
        const due = [...held, ...rows.filter((r) => !sent.has(r.id) && !failed.has(r.id)).map((r) => r.id)];
        // A key with a row that did not go out: its next rows wait for the claims.
        for (const row of rows) if (row.orderingKey !== null && !sent.has(row.id)) this.chain.delete(row.orderingKey);
        try {
          await this.options.settle({ ...settlement, due, ...packedOf(taken) });
        } finally {
          // Held until marked: a duplicate meanwhile would make rows due that are being marked.
          this.forget(taken);
        }
      },
    };
  }
}

/**
 * The packed rows that hold `rows`, as a settlement's `packed`: handoffs leave the queue whole,
 * so every message of each of them is among the rows settled with it.
 */
function packedOf(rows: readonly HandedOffRow[]): { packed?: number[] } {
  let packed: Set<number> | undefined;
  for (const row of rows) if (row.packedIn !== undefined) (packed ??= new Set()).add(row.packedIn);
  return packed ? { packed: [...packed] } : {};
}

/** Ids never hold U+0000 (the databases refuse it), so it separates them unambiguously. */
function sourceKey(handler: string, tenant: string, eventId: string): string {
  return `${handler}\u0000${tenant}\u0000${eventId}`;
}

function outboxRowOf(row: HandedOffRow): OutboxRow {
  const r = row.record;
  return {
    id: row.id, messageId: r.messageId, exchange: r.exchange, routingKey: r.routingKey, body: r.body,
    properties: parsedProperties(r.properties), orderingKey: r.orderingKey, attempts: 0,
  };
}

/**
 * Rows written in the same second without AMQP options share one properties text; it is parsed
 * once for all of them. The object is shared, so nothing may change it: the publish only reads it.
 */
const lastProperties = { text: "", parsed: {} as Readonly<Record<string, unknown>> };
function parsedProperties(text: string): Readonly<Record<string, unknown>> {
  if (text !== lastProperties.text) {
    lastProperties.parsed = Object.freeze(JSON.parse(text) as Record<string, unknown>);
    lastProperties.text = text;
  }
  return lastProperties.parsed;
}
