import { TransientStoreError } from "../../src/core/errors.js";
import type { EventKey } from "../../src/core/event.js";
import { eventKeyString } from "../../src/core/event.js";
import type { ClaimResult, DatabaseHealth, InboxClaim, OutboxRecord, QuarantineEntry, QuarantineRecord, Store, StoreTransaction } from "../../src/core/store-contract/store.js";

/**
 * A Store held in memory, for tests of the pipeline and the consumer that need to control what
 * the database does (fail every transaction, lose a COMMIT's answer) and to see what reached it
 * (each claim call's keys, in the order the store received them). Commits are all or nothing:
 * a transaction whose work or commit throws leaves nothing behind. The real stores are tested
 * by the conformance suite; this one only stands in for them where a failure must be scripted.
 */
export class MemoryStore implements Store<MemoryHandle> {
  readonly dialect = "memory";
  readonly maxConcurrentTransactions = 1;
  /** Committed dedup records: `(tenant, event id)` of each handler -> fingerprint. */
  readonly dedup = new Map<string, string>();
  readonly quarantined: QuarantineRecord[] = [];
  /** Business effects committed by handlers, via `handle.effects`. */
  readonly effects: string[] = [];
  /** The keys of every claim call, as the store received them. */
  readonly claimCalls: EventKey[][] = [];
  /** Transactions begun (attempts), committed or not. */
  transactions = 0;
  /**
   * Decides the fate of each transaction: throw to fail it before its work runs (an unreachable
   * database), or return "commit-unknown" to commit it and then throw what a store throws when
   * the connection died during COMMIT. Default: run normally.
   */
  script: (attempt: number) => "commit" | "commit-unknown" = () => "commit";
  /** What a "commit-unknown" transaction throws after committing. */
  commitUnknownError: Error = new Error("set commitUnknownError");
  /**
   * Optional parts of the Store contract, off by default (the pipeline must work without them).
   * `countRedeliveries`: transactions offer `countRedelivery`, counted per handler and key.
   */
  countRedeliveries = false;
  /** Committed redelivery counts, by handler and key (with `countRedeliveries`). */
  readonly redeliveries = new Map<string, number>();
  /** Outbox rows committed by transactions (transactions offer `writeOutbox` with `outbox`). */
  outbox: OutboxRecord[] | undefined;
  /**
   * The purge horizon of the stale fence: a claim whose key has no record and whose event time
   * is at or before it is refused as `stale`. Undefined: no fence.
   */
  horizon: Date | undefined;
  /** Claimed keys (eventKeyString) to report as replacing an applied version (an accept-new grant), with the fingerprint replaced. */
  readonly replacing = new Map<string, string>();
  /** The store's `resendOutbox`, when a test gives it one. */
  resendOutbox?: (handler: string, keys: readonly EventKey[]) => Promise<number>;
  /** The store's `databaseHealth`, when a test gives it one. */
  databaseHealth?: () => DatabaseHealth;

  migrate(): Promise<void> {
    return Promise.resolve();
  }

  async transaction<T>(work: (tx: StoreTransaction<MemoryHandle>) => Promise<T>, beforeCommit?: () => Promise<void> | void): Promise<T> {
    this.transactions++;
    const fate = this.script(this.transactions);
    const staged = { dedup: new Map<string, string>(), quarantine: [] as QuarantineRecord[], effects: [] as string[], outbox: [] as OutboxRecord[], redeliveries: new Map<string, number>() };
    const handle: MemoryHandle = { effects: staged.effects };
    const tx: StoreTransaction<MemoryHandle> = {
      handle,
      claim: (handler, claims) => Promise.resolve(this.claim(staged.dedup, handler, claims)),
      quarantine: (records) => {
        staged.quarantine.push(...records);
        return Promise.resolve();
      },
    };
    if (this.outbox) {
      tx.writeOutbox = (records) => {
        staged.outbox.push(...records);
        return Promise.resolve();
      };
    }
    if (this.countRedeliveries) {
      tx.countRedelivery = (handler, key) => {
        const id = `${handler}\u0000${eventKeyString(key)}`;
        const n = (staged.redeliveries.get(id) ?? this.redeliveries.get(id) ?? 0) + 1;
        staged.redeliveries.set(id, n);
        return Promise.resolve(n);
      };
    }
    const result = await work(tx);
    await beforeCommit?.();
    for (const [k, v] of staged.dedup) this.dedup.set(k, v);
    for (const [k, v] of staged.redeliveries) this.redeliveries.set(k, v);
    this.quarantined.push(...staged.quarantine);
    this.effects.push(...staged.effects);
    this.outbox?.push(...staged.outbox);
    if (fate === "commit-unknown") throw this.commitUnknownError;
    return result;
  }

  private claim(staged: Map<string, string>, handler: string, claims: readonly InboxClaim[]): ClaimResult[] {
    this.claimCalls.push(claims.map((c) => c.key));
    return claims.map((c) => {
      const id = `${handler}\u0000${eventKeyString(c.key)}`;
      const stored = this.dedup.get(id) ?? staged.get(id);
      if (stored !== undefined) return { status: "exists", fingerprint: stored };
      if (this.horizon && c.eventTime && c.eventTime.getTime() <= this.horizon.getTime()) return { status: "stale", horizon: this.horizon };
      staged.set(id, c.fingerprint);
      const replaced = this.replacing.get(eventKeyString(c.key));
      return replaced === undefined ? { status: "claimed" } : { status: "claimed", replaced };
    });
  }

  listQuarantine(): Promise<QuarantineEntry[]> {
    return Promise.resolve([]);
  }

  countInbox(handler: string): Promise<number> {
    return Promise.resolve([...this.dedup.keys()].filter((k) => k.startsWith(`${handler}\u0000`)).length);
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

/** The transaction handle a MemoryStore gives handlers: effects they record commit with the claim. */
export interface MemoryHandle {
  effects: string[];
}

/** A MemoryStore whose transactions offer `writeOutbox` (rows collected in `store.outbox`). */
export function memoryStoreWithOutbox(): MemoryStore {
  const store = new MemoryStore();
  store.outbox = [];
  return store;
}

/** A MemoryStore that cannot be reached (a lost-connection error with this text) while `down` holds; set `down` to false to bring it back. */
export function unreachableStore(error = "connect ECONNREFUSED 127.0.0.1:5432"): { store: MemoryStore; down: boolean } {
  const control = { store: new MemoryStore(), down: true };
  control.store.script = () => {
    if (control.down) throw new TransientStoreError(error, { kind: "connection" });
    return "commit";
  };
  return control;
}
