/**
 * The store conformance suite: one set of tests every Store implementation must pass, driven
 * through the real InboxPipeline against a real database. Each test gets its own database
 * (schema, file...) from the store's `open` function and removes it afterwards.
 *
 * How a store joins: add one small file `test/conformance/<dialect>.test.ts` that calls
 * `describeStoreConformance` with
 *   - `open`: creates an empty, isolated database and returns a fixture: the store on it (not
 *     migrated), `openPeer` to open another store instance on the SAME database (its own pool or
 *     connection: used for concurrency), `createBusinessTable` (run outside any inbox
 *     transaction: DDL commits implicitly on MySQL), and `cleanup` to close every store and drop
 *     the database;
 *   - `business`: a tiny adapter for the driver's transaction handle (what `StoreTransaction.handle`
 *     is for that store) that adds to a counter and reads it;
 *   - `concurrentStores`: how many store instances race in the concurrency tests.
 * For MySQL/MariaDB (handle = the store's MysqlConnection, a mysql2/promise PoolConnection), roughly:
 *
 *   type Rows = Array<Record<string, unknown>>;
 *   describeStoreConformance<MysqlConnection>("mysql", async () => {
 *     const db = await createMysqlDatabase();          // test/support/databases.ts
 *     const stores: MysqlStore[] = [];
 *     const open = async () => { const s = await MysqlStore.connect(db.url); stores.push(s); return s; };
 *     const store = await open();
 *     return {
 *       store, openPeer: open,
 *       createBusinessTable: async () => { const c = await mysql.createConnection(db.url); await c.query(
 *         `CREATE TABLE conformance_counters (account VARCHAR(64) COLLATE utf8mb4_bin PRIMARY KEY,
 *          value BIGINT NOT NULL, CHECK (value >= 0)) ENGINE=InnoDB`); await c.end(); },
 *       cleanup: async () => { for (const s of stores) await s.close(); await db.drop(); },
 *     };
 *   }, {
 *     concurrentStores: 5,
 *     business: {
 *       add: async (c, account, delta) => { await c.query(`INSERT INTO conformance_counters (account, value) VALUES (?, ?)
 *         ON DUPLICATE KEY UPDATE value = value + VALUES(value)`, [account, delta]); },
 *       read: async (c, account) => { const [rows] = await c.query("SELECT value FROM conformance_counters WHERE account = ?", [account]);
 *         return (rows as Rows).length ? Number((rows as Rows)[0]!.value) : null; },
 *       count: async (c, sql) => { const [rows] = await c.query(sql); return Number((rows as Rows)[0]!.n); },
 *     },
 *   });
 *
 * The counter table must refuse a negative value with a constraint error (CHECK), so the suite
 * can see how the store classifies a business constraint violation.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { InvalidEventError, PermanentEventError, TransientStoreError } from "../../src/core/errors.js";
import { type EventKey, defaultEventKey } from "../../src/core/event.js";
import { fingerprintOf, sha256Hex } from "../../src/core/fingerprint.js";
import type { BatchRejection, HandlerContext, InboxHandler } from "../../src/core/handler.js";
import type { Logger } from "../../src/core/logger.js";
import type { Outcome } from "../../src/core/outcome.js";
import { type FaultPoint, type IncomingMessage, InboxPipeline, type PipelineHook, type PipelineOptions } from "../../src/core/pipeline.js";
import type { InboxClaim, Store, StoreTransaction } from "../../src/core/store-contract/store.js";
import { purgeExpiredDedupRecords } from "../../src/operations.js";
import { type InboxOperations, hasOperations } from "../../src/core/store-contract/capabilities.js";
import { incomingMessage } from "../support/messages.js";

export interface StoreFixture<Tx> {
  /** A store on a fresh, empty database; not migrated yet. */
  store: Store<Tx>;
  /** Opens another store instance on the same database, with its own connection(s). */
  openPeer(): Promise<Store<Tx>>;
  /**
   * Creates `conformance_counters (account PRIMARY KEY, value integer NOT NULL CHECK (value >= 0))`
   * in the fixture's database, outside any inbox transaction.
   */
  createBusinessTable(): Promise<void>;
  /** Closes every store opened by the fixture and removes the database. */
  cleanup(): Promise<void>;
  /**
   * The operator's side of the same tables (purge, horizons), for a store that has no
   * `operations()` of its own. Default: the store's `operations()`.
   */
  operations?(): Promise<InboxOperations>;
}

/** Business SQL for one driver, run through the transaction handle the store gives handlers. */
export interface BusinessTable<Tx> {
  /** Adds `delta` to the account's counter, creating it at `delta` when absent. */
  add(tx: Tx, account: string, delta: number): Promise<void>;
  /** The counter, or null when the account has no row. */
  read(tx: Tx, account: string): Promise<number | null>;
  /** Runs a parameterless `SELECT ... AS n` returning one row, and returns `n` as a number. */
  count(tx: Tx, sql: string): Promise<number>;
}

export interface ConformanceOptions<Tx> {
  business: BusinessTable<Tx>;
  /** Store instances racing on one key in the concurrency tests (>= 2). */
  concurrentStores: number;
  /**
   * True when concurrent transactions lock rows (index entries), so that the order in which a
   * batch claims its keys decides whether two batches can deadlock; false for a database with
   * one writer at a time (SQLite), where a second writer waits or retries whatever the order.
   */
  rowLocks: boolean;
}

/** The suite's event: add `delta` to `account`. */
interface CounterEvent {
  account: string;
  delta: number;
}

type Mode = "handle" | "handleBatch";
const MODES: readonly Mode[] = ["handle", "handleBatch"];

/** Called after the business write of each event, inside the transaction. May throw. */
type AfterWrite<Tx> = (event: CounterEvent, ctx: HandlerContext<Tx>) => Promise<void> | void;

function counterHandler<Tx>(business: BusinessTable<Tx>, options: { name?: string; mode?: Mode; afterWrite?: AfterWrite<Tx> } = {}): InboxHandler<CounterEvent, Tx> {
  const { afterWrite } = options;
  const handler: InboxHandler<CounterEvent, Tx> = {
    name: options.name ?? "conformance",
    parse(body) {
      const key = defaultEventKey(body);
      const { account, delta } = body;
      if (typeof account !== "string" || account.length === 0) throw new InvalidEventError("account must be a non-empty string");
      if (typeof delta !== "number" || !Number.isSafeInteger(delta)) throw new InvalidEventError("delta must be a safe integer");
      return { key, event: { account, delta } };
    },
  };
  if ((options.mode ?? "handle") === "handle") {
    handler.handle = async (event, ctx) => {
      await business.add(ctx.tx, event.account, event.delta);
      await afterWrite?.(event, ctx);
    };
  } else {
    handler.handleBatch = async (items, tx) => {
      const rejections: BatchRejection[] = [];
      for (const [index, { event, ctx }] of items.entries()) {
        expect(ctx.tx).toBe(tx);
        await business.add(tx, event.account, event.delta);
        try {
          await afterWrite?.(event, ctx);
        } catch (error) {
          if (!(error instanceof PermanentEventError)) throw error;
          rejections.push({ index, reason: error.reason, detail: error.message });
        }
      }
      return rejections;
    };
  }
  return handler;
}

interface LogLine {
  level: "debug" | "info" | "warn" | "error";
  message: string;
  fields: Record<string, unknown> | undefined;
}

function recordingLogger(): Logger & { lines: LogLine[] } {
  const lines: LogLine[] = [];
  const at = (level: LogLine["level"]) => (message: string, fields?: Record<string, unknown>) => {
    lines.push({ level, message, fields });
  };
  return { lines, debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
}

/** The store, with the event ids of each claim call recorded in the order the store received them. */
function recordingClaims<Tx>(store: Store<Tx>, calls: string[][]): Store<Tx> {
  return Object.assign(Object.create(store) as Store<Tx>, {
    transaction: <T>(work: (tx: StoreTransaction<Tx>) => Promise<T>, beforeCommit?: () => Promise<void> | void) =>
      store.transaction((tx) => work(Object.assign(Object.create(tx) as StoreTransaction<Tx>, {
        claim: (handler: string, claims: readonly InboxClaim[]) => {
          calls.push(claims.map((c) => c.key.eventId));
          return tx.claim(handler, claims);
        },
      })), beforeCommit),
  });
}

/** A ledger-like event body. */
function body(tenant: string, eventId: string, account: string, delta: number, extra: Record<string, unknown> = {}) {
  return { type: "counter.added", tenant, event_id: eventId, account, delta, ...extra };
}

function message(tenant: string, eventId: string, account: string, delta: number, extra: Record<string, unknown> = {}): IncomingMessage {
  return incomingMessage(body(tenant, eventId, account, delta, extra));
}

function kinds(outcomes: readonly Outcome[]): string[] {
  return outcomes.map((o) => (o.kind === "quarantined" ? `quarantined:${o.reason}` : o.kind));
}

/** Small backoff so tests that retry stay fast; enough attempts for in-process lock waits. */
const fastRetry = { baseDelayMs: 2, maxDelayMs: 20 };
const patientRetry = { maxAttempts: 60, baseDelayMs: 5, maxDelayMs: 50, maxTotalMs: 30_000 };

export function describeStoreConformance<Tx>(name: string, open: () => Promise<StoreFixture<Tx>>, options: ConformanceOptions<Tx>): void {
  const { business } = options;

  describe(`store conformance: ${name}`, () => {
    let fx: StoreFixture<Tx>;
    let store: Store<Tx>;

    beforeEach(async () => {
      fx = await open();
      store = fx.store;
    });

    afterEach(async () => {
      await fx.cleanup();
    });

    const readCounter = (account: string, on: Store<Tx> = store) => on.transaction((tx) => business.read(tx.handle, account));
    const count = (sql: string, on: Store<Tx> = store) => on.transaction((tx) => business.count(tx.handle, sql));
    const quarantine = (handler = "conformance") => store.listQuarantine({ handler });

    function pipeline(handler: InboxHandler<CounterEvent, Tx>, extra: Partial<PipelineOptions<CounterEvent, Tx>> = {}, on: Store<Tx> = store) {
      return new InboxPipeline<CounterEvent, Tx>({ store: on, handler, logger: recordingLogger(), retry: fastRetry, ...extra });
    }

    describe("migrations", () => {
      const migrationRows = () => count("SELECT count(*) AS n FROM rabbit_inbox_migrations");
      const distinctVersions = () => count("SELECT count(DISTINCT version) AS n FROM rabbit_inbox_migrations");

      it("migrate creates the tables and is idempotent", async () => {
        await store.migrate();
        const versions = await migrationRows();
        expect(versions).toBeGreaterThanOrEqual(1);
        await store.migrate();
        expect(await migrationRows()).toBe(versions);
        expect(await distinctVersions()).toBe(versions);

        await fx.createBusinessTable();
        const p = pipeline(counterHandler(business));
        expect(kinds(await p.process([message("t1", "e-1", "a", 5)]))).toEqual(["applied"]);
        // Migrating again keeps the data.
        await store.migrate();
        expect(await store.countInbox("conformance")).toBe(1);
        expect(kinds(await p.process([message("t1", "e-1", "a", 5)]))).toEqual(["duplicate"]);
      });

      it("migrations run concurrently from two stores on one database", async () => {
        const peer = await fx.openPeer();
        const results = await Promise.allSettled([store.migrate(), peer.migrate(), store.migrate()]);
        expect(results.map((r) => r.status)).toEqual(["fulfilled", "fulfilled", "fulfilled"]);
        const versions = await migrationRows();
        expect(versions).toBeGreaterThanOrEqual(1);
        expect(await distinctVersions()).toBe(versions);
        expect(await store.countInbox("conformance")).toBe(0);
        expect(await peer.countInbox("conformance")).toBe(0);
      });
    });

    describe("with a migrated store", () => {
      beforeEach(async () => {
        await store.migrate();
        await fx.createBusinessTable();
      });

      describe("the Store contract", () => {
        const claim = (key: EventKey, fingerprint: string) => ({ key, fingerprint });

        it("claim reports claimed or exists per key, in order, with the stored fingerprint", async () => {
          const k1 = { tenant: "t1", eventId: "e-1" };
          const k2 = { tenant: "t1", eventId: "e-2" };
          const k3 = { tenant: "t2", eventId: "e-1" };
          expect(await store.transaction((tx) => tx.claim("h", [claim(k1, "f1"), claim(k2, "f2")]))).toEqual([{ status: "claimed" }, { status: "claimed" }]);
          const again = await store.transaction((tx) => tx.claim("h", [claim(k3, "f3"), claim(k2, "other"), claim(k1, "f1")]));
          expect(again).toEqual([{ status: "claimed" }, { status: "exists", fingerprint: "f2" }, { status: "exists", fingerprint: "f1" }]);
          // Another handler is another scope.
          expect(await store.transaction((tx) => tx.claim("h2", [claim(k1, "x")]))).toEqual([{ status: "claimed" }]);
          expect(await store.countInbox("h")).toBe(3);
          expect(await store.countInbox("h", k2)).toBe(1);
          expect(await store.countInbox("h", { tenant: "t9", eventId: "e-1" })).toBe(0);
          expect(await store.countInbox("h2")).toBe(1);
        });

        it("a claim of 600 keys, some already stored, reports each one in order (more keys than one statement takes)", async () => {
          const key = (i: number) => ({ tenant: "t1", eventId: `big-${String(i).padStart(4, "0")}` });
          // Every 7th key is stored first, every 14th of those with another fingerprint.
          const stored = Array.from({ length: 600 }, (_, i) => i).filter((i) => i % 7 === 3);
          await store.transaction((tx) => tx.claim("h", stored.map((i) => claim(key(i), i % 14 === 3 ? `old-${i}` : `f-${i}`))));
          const results = await store.transaction((tx) => tx.claim("h", Array.from({ length: 600 }, (_, i) => claim(key(i), `f-${i}`))));
          expect(results).toEqual(Array.from({ length: 600 }, (_, i) =>
            i % 7 !== 3 ? { status: "claimed" } : { status: "exists", fingerprint: i % 14 === 3 ? `old-${i}` : `f-${i}` }));
          expect(await store.countInbox("h")).toBe(600);
        });

        it("a transaction returns its work's result and commits the claim with the business write", async () => {
          const result = await store.transaction(async (tx) => {
            await tx.claim("h", [claim({ tenant: "t1", eventId: "e-1" }, "f")]);
            await business.add(tx.handle, "a", 7);
            return "done";
          });
          expect(result).toBe("done");
          expect(await store.countInbox("h")).toBe(1);
          expect(await readCounter("a")).toBe(7);
        });

        it("a throw inside the work rolls back the claim and the business write, and rethrows", async () => {
          const boom = new Error("boom");
          await expect(store.transaction(async (tx) => {
            await tx.claim("h", [claim({ tenant: "t1", eventId: "e-1" }, "f")]);
            await business.add(tx.handle, "a", 7);
            throw boom;
          })).rejects.toBe(boom);
          expect(await store.countInbox("h")).toBe(0);
          expect(await readCounter("a")).toBeNull();
          // The store is still usable afterwards.
          await store.transaction((tx) => business.add(tx.handle, "a", 1));
          expect(await readCounter("a")).toBe(1);
        });

        it("is one transaction whichever statement comes first: the handle's own SQL, or nothing at all", async () => {
          await expect(store.transaction(async (tx) => {
            await business.add(tx.handle, "a", 7);
            await tx.claim("h", [claim({ tenant: "t1", eventId: "e-1" }, "f")]);
            throw new Error("after both");
          })).rejects.toThrow("after both");
          expect(await readCounter("a")).toBeNull();
          expect(await store.countInbox("h")).toBe(0);
          expect(await store.transaction(async (tx) => {
            await business.add(tx.handle, "a", 7);
            await tx.claim("h", [claim({ tenant: "t1", eventId: "e-1" }, "f")]);
            return "both";
          })).toBe("both");
          expect(await readCounter("a")).toBe(7);
          expect(await store.countInbox("h")).toBe(1);
          expect(await store.transaction(() => Promise.resolve("nothing"))).toBe("nothing");
          await expect(store.transaction(() => Promise.reject(new Error("before any statement")))).rejects.toThrow("before any statement");
          // The store is still usable afterwards.
          await store.transaction((tx) => business.add(tx.handle, "a", 1));
          expect(await readCounter("a")).toBe(8);
        });

        it("a throw in beforeCommit rolls everything back", async () => {
          const order: string[] = [];
          await expect(store.transaction(async (tx) => {
            await tx.claim("h", [claim({ tenant: "t1", eventId: "e-1" }, "f")]);
            await business.add(tx.handle, "a", 7);
            order.push("work");
          }, () => {
            order.push("beforeCommit");
            throw new Error("injected before commit");
          })).rejects.toThrow("injected before commit");
          expect(order).toEqual(["work", "beforeCommit"]);
          expect(await store.countInbox("h")).toBe(0);
          expect(await readCounter("a")).toBeNull();
        });

        it("a business constraint violation is a permanent error", async () => {
          const error = await store.transaction((tx) => business.add(tx.handle, "a", -1)).then(() => null, (e: unknown) => e);
          expect(error).toBeInstanceOf(PermanentEventError);
          expect((error as PermanentEventError).reason).toBe("constraint_violation");
        });

        it("listQuarantine lists newest first, filters by handler and honours the limit", async () => {
          const p = pipeline(counterHandler(business));
          const other = pipeline(counterHandler(business, { name: "other" }));
          for (const text of ["bad-1", "bad-2", "bad-3"]) await p.process([incomingMessage(text)]);
          await other.process([incomingMessage("bad-x")]);
          const rows = await store.listQuarantine({ handler: "conformance" });
          expect(rows.map((r) => r.body.toString())).toEqual(["bad-3", "bad-2", "bad-1"]);
          expect((await store.listQuarantine({ handler: "conformance", limit: 2 })).map((r) => r.body.toString())).toEqual(["bad-3", "bad-2"]);
          expect((await store.listQuarantine()).map((r) => r.body.toString())).toEqual(["bad-x", "bad-3", "bad-2", "bad-1"]);
          expect((await store.listQuarantine({ handler: "other" })).map((r) => r.handler)).toEqual(["other"]);
        });
      });

      describe("poison detection: redeliveries counted before the event's transaction", () => {
        const k1 = { tenant: "t1", eventId: "e-1" };

        it("countRedelivery counts per (tenant, handler, event id), and a count survives a rollback that follows it", async () => {
          const count = (handler: string, key: EventKey) => store.transaction((tx) => tx.countRedelivery!(handler, key));
          expect(await store.transaction((tx) => Promise.resolve(typeof tx.countRedelivery))).toBe("function");
          expect(await count("h", k1)).toBe(1);
          expect(await count("h", k1)).toBe(2);
          expect(await count("h2", k1)).toBe(1);
          expect(await count("h", { tenant: "t2", eventId: "e-1" })).toBe(1);
          expect(await count("h", { tenant: "t1", eventId: "e-2" })).toBe(1);
          // The count commits in its own transaction: the event's transaction failing later does not undo it.
          await expect(store.transaction(async (tx) => { await tx.claim("h", [{ key: k1, fingerprint: "f" }]); throw new Error("crash stand-in"); })).rejects.toThrow("crash stand-in");
          expect(await count("h", k1)).toBe(3);
        });

        it("a count that fails does not hold the event back: it is logged and the broker's count decides", async () => {
          const logger = recordingLogger();
          // The store's own transactions, with a countRedelivery that fails (a lost session, say).
          const failing: Store<Tx> = {
            dialect: store.dialect, maxConcurrentTransactions: store.maxConcurrentTransactions,
            migrate: () => store.migrate(), close: () => Promise.resolve(),
            listQuarantine: (options) => store.listQuarantine(options), countInbox: (handler, key) => store.countInbox(handler, key),
            transaction: (work, beforeCommit) => store.transaction((tx) => work({
              handle: tx.handle, claim: (h, c) => tx.claim(h, c), quarantine: (r) => tx.quarantine(r),
              countRedelivery: () => Promise.reject(new TransientStoreError("count failed")),
            }), beforeCommit),
          };
          const p = pipeline(counterHandler(business), { logger, maxDeliveries: 1 }, failing);
          expect(kinds(await p.process([incomingMessage(body("t1", "e-1", "a", 5), { redelivered: true })]))).toEqual(["applied"]);
          expect(await readCounter("a")).toBe(5);
          expect(logger.lines.some((l) => l.level === "warn" && l.message.startsWith("could not count a redelivery"))).toBe(true);
        });

        it("a redelivered event is applied while under maxDeliveries, and quarantined as retries_exhausted once it reaches it", async () => {
          const p = pipeline(counterHandler(business), { maxDeliveries: 2 });
          const redelivered = (eventId: string, delta: number) => incomingMessage(body("t1", eventId, "a", delta), { redelivered: true });
          // Two earlier deliveries of e-1 died with their process (counted, never committed).
          await store.transaction((tx) => tx.countRedelivery!("conformance", k1));
          expect(kinds(await p.process([redelivered("e-1", 5), redelivered("e-2", 7), message("t1", "e-3", "a", 11)]))).toEqual(["quarantined:retries_exhausted", "applied", "applied"]);
          expect(await readCounter("a")).toBe(18);
          const [entry] = await quarantine();
          expect(entry).toMatchObject({ reason: "retries_exhausted", eventId: "e-1" });
          expect(entry!.detail).toContain("redelivered 2 times");
          // An event that already applied stays a duplicate however often it comes back.
          for (let i = 0; i < 3; i++) expect(kinds(await p.process([redelivered("e-2", 7)]))).toEqual(["duplicate"]);
          expect(await readCounter("a")).toBe(18);
        });
      });

      describe("applied, duplicate, conflict", () => {
        it("applies a new event once: dedup record and business write committed together", async () => {
          const p = pipeline(counterHandler(business));
          const outcomes = await p.process([message("t1", "e-1", "acct", 100)]);
          expect(outcomes).toEqual([{ kind: "applied", key: { tenant: "t1", eventId: "e-1" } }]);
          expect(await store.countInbox("conformance", { tenant: "t1", eventId: "e-1" })).toBe(1);
          expect(await readCounter("acct")).toBe(100);
          expect(await quarantine()).toEqual([]);
        });

        it("a redelivered identical event is a duplicate and changes nothing", async () => {
          const p = pipeline(counterHandler(business));
          await p.process([message("t1", "e-1", "acct", 100)]);
          // Same payload, other key order and formatting, redelivered flag set.
          const again = incomingMessage(' {"delta":100, "account":"acct",\n "event_id":"e-1","tenant":"t1","type":"counter.added"} ', { redelivered: true });
          expect(await p.process([again])).toEqual([{ kind: "duplicate", key: { tenant: "t1", eventId: "e-1" } }]);
          expect(kinds(await p.process([message("t1", "e-1", "acct", 100)]))).toEqual(["duplicate"]);
          expect(await readCounter("acct")).toBe(100);
          expect(await store.countInbox("conformance")).toBe(1);
          expect(await quarantine()).toEqual([]);
        });

        it("same id with another payload is a conflict: quarantined with both fingerprints, logged at error, not applied", async () => {
          const logger = recordingLogger();
          const p = pipeline(counterHandler(business), { logger });
          const first = body("t1", "e-1", "acct", 100);
          const second = body("t1", "e-1", "acct", 999);
          await p.process([incomingMessage(first)]);
          const [outcome] = await p.process([incomingMessage(second)]);
          expect(outcome).toMatchObject({ kind: "quarantined", reason: "conflict", key: { tenant: "t1", eventId: "e-1" } });

          expect(await readCounter("acct")).toBe(100);
          expect(await store.countInbox("conformance")).toBe(1);
          const rows = await quarantine();
          expect(rows).toHaveLength(1);
          expect(rows[0]).toMatchObject({
            handler: "conformance", tenant: "t1", eventId: "e-1", reason: "conflict", occurrences: 1,
            fingerprint: fingerprintOf(second), storedFingerprint: fingerprintOf(first), bodyTruncated: false,
          });
          expect(rows[0]!.fingerprint).not.toBe(rows[0]!.storedFingerprint);
          expect(rows[0]!.body.equals(Buffer.from(JSON.stringify(second)))).toBe(true);
          expect(rows[0]!.detail).toMatch(/seen before with another payload/);
          const alarms = logger.lines.filter((l) => l.level === "error" && /conflict/.test(l.message));
          expect(alarms).toHaveLength(1);
          expect(alarms[0]!.fields).toMatchObject({ tenant: "t1", eventId: "e-1", storedFingerprint: fingerprintOf(first), fingerprint: fingerprintOf(second) });

          // The original payload is still a plain duplicate; the conflicting one stays a conflict.
          expect(kinds(await p.process([incomingMessage(first)]))).toEqual(["duplicate"]);
          expect(kinds(await p.process([incomingMessage(second)]))).toEqual(["quarantined:conflict"]);
          expect((await quarantine())[0]!.occurrences).toBe(2);
          expect(await readCounter("acct")).toBe(100);
        });
      });

      describe("a failure before commit rolls back both the dedup record and the business write", () => {
        it("a hook that throws at before-commit on every attempt leaves nothing applied", async () => {
          const calls: Array<[FaultPoint, ReadonlyArray<EventKey | null>]> = [];
          const hook: PipelineHook = (point, keys) => {
            calls.push([point, keys]);
            if (point === "before-commit") throw new Error("injected failure before commit");
          };
          const p = pipeline(counterHandler(business), { hook, retry: { ...fastRetry, maxAttempts: 3 } });
          const outcomes = await p.process([message("t1", "e-1", "acct", 100)]);
          expect(kinds(outcomes)).toEqual(["quarantined:retries_exhausted"]);
          expect(calls.filter(([point]) => point === "before-commit")).toHaveLength(3);
          expect(calls.some(([point]) => point === "after-commit")).toBe(false);
          expect(calls[0]![1]).toEqual([{ tenant: "t1", eventId: "e-1" }]);
          expect(await store.countInbox("conformance")).toBe(0);
          expect(await readCounter("acct")).toBeNull();
        });

        it("after a before-commit failure the retry applies the batch exactly once", async () => {
          let failures = 0;
          const points: FaultPoint[] = [];
          const hook: PipelineHook = (point) => {
            points.push(point);
            if (point === "before-commit" && failures++ === 0) throw new Error("injected failure before commit");
          };
          const p = pipeline(counterHandler(business), { hook });
          const outcomes = await p.process([message("t1", "e-1", "acct", 100), message("t1", "e-2", "acct", 10), message("t1", "e-3", "other", 1)]);
          expect(kinds(outcomes)).toEqual(["applied", "applied", "applied"]);
          expect(points).toEqual(["before-commit", "before-commit", "after-commit"]);
          expect(await readCounter("acct")).toBe(110);
          expect(await readCounter("other")).toBe(1);
          expect(await store.countInbox("conformance")).toBe(3);
        });

        for (const mode of MODES) {
          it(`${mode}: a transient error after the business write rolls it back; the retry applies once`, async () => {
            let attempts = 0;
            const p = pipeline(counterHandler(business, {
              mode,
              afterWrite: () => {
                if (attempts++ === 0) throw new TransientStoreError("injected deadlock after the business write");
              },
            }));
            expect(kinds(await p.process([message("t1", "e-1", "acct", 100)]))).toEqual(["applied"]);
            expect(attempts).toBe(2);
            expect(await readCounter("acct")).toBe(100);
            expect(await store.countInbox("conformance")).toBe(1);
          });

          it(`${mode}: a transient error on every attempt leaves neither the dedup record nor the business write`, async () => {
            let attempts = 0;
            const p = pipeline(counterHandler(business, {
              mode,
              afterWrite: () => {
                attempts++;
                throw new Error("unclassified failure after the business write");
              },
            }), { retry: { ...fastRetry, maxAttempts: 2 } });
            const [outcome] = await p.process([message("t1", "e-1", "acct", 100)]);
            expect(outcome).toMatchObject({ kind: "quarantined", reason: "retries_exhausted", key: { tenant: "t1", eventId: "e-1" } });
            expect(attempts).toBe(2);
            expect(await store.countInbox("conformance")).toBe(0);
            expect(await readCounter("acct")).toBeNull();
            const rows = await quarantine();
            expect(rows).toHaveLength(1);
            expect(rows[0]).toMatchObject({ reason: "retries_exhausted", tenant: "t1", eventId: "e-1" });
            expect(rows[0]!.detail).toMatch(/unclassified failure after the business write/);
          });
        }
      });

      describe("permanent failures", () => {
        for (const mode of MODES) {
          it(`${mode}: a PermanentEventError rolls the event back and quarantines it; the rest of the batch applies once`, async () => {
            const p = pipeline(counterHandler(business, {
              mode,
              afterWrite: (event) => {
                if (event.account === "missing") throw new PermanentEventError("account_missing", `account ${event.account} was never opened`);
              },
            }));
            const batch = [message("t1", "e-1", "a", 1), message("t1", "e-2", "missing", 50), message("t1", "e-3", "a", 10), message("t2", "e-4", "b", 5)];
            expect(kinds(await p.process(batch))).toEqual(["applied", "quarantined:account_missing", "applied", "applied"]);
            expect(await readCounter("a")).toBe(11);
            expect(await readCounter("b")).toBe(5);
            expect(await readCounter("missing")).toBeNull();
            expect(await store.countInbox("conformance")).toBe(3);
            expect(await store.countInbox("conformance", { tenant: "t1", eventId: "e-2" })).toBe(0);
            const rows = await quarantine();
            expect(rows).toHaveLength(1);
            expect(rows[0]).toMatchObject({ reason: "account_missing", tenant: "t1", eventId: "e-2", detail: "account missing was never opened", occurrences: 1 });
            expect(rows[0]!.fingerprint).toBe(fingerprintOf(body("t1", "e-2", "missing", 50)));

            // The whole batch redelivered: no second application, the bad one counted again.
            expect(kinds(await p.process(batch))).toEqual(["duplicate", "quarantined:account_missing", "duplicate", "duplicate"]);
            expect(await readCounter("a")).toBe(11);
            expect(await readCounter("b")).toBe(5);
            expect(await quarantine()).toMatchObject([{ reason: "account_missing", occurrences: 2 }]);
          });

          it(`${mode}: a business constraint violation is quarantined as constraint_violation; the rest applies once`, async () => {
            const p = pipeline(counterHandler(business, { mode }));
            const batch = [message("t1", "e-1", "a", 5), message("t1", "e-2", "poor", -5), message("t1", "e-3", "a", 7)];
            expect(kinds(await p.process(batch))).toEqual(["applied", "quarantined:constraint_violation", "applied"]);
            expect(await readCounter("a")).toBe(12);
            expect(await readCounter("poor")).toBeNull();
            expect(await store.countInbox("conformance")).toBe(2);
            expect(await quarantine()).toMatchObject([{ reason: "constraint_violation", tenant: "t1", eventId: "e-2" }]);
          });
        }
      });

      describe("one key twice in a batch", () => {
        it("same payload: one applied, one duplicate", async () => {
          const p = pipeline(counterHandler(business));
          const outcomes = await p.process([message("t1", "e-1", "acct", 100), message("t1", "e-2", "acct", 1), message("t1", "e-1", "acct", 100)]);
          expect(kinds(outcomes)).toEqual(["applied", "applied", "duplicate"]);
          expect(await readCounter("acct")).toBe(101);
          expect(await store.countInbox("conformance")).toBe(2);
          expect(await quarantine()).toEqual([]);
        });

        it("different payload: one applied, one conflict with both fingerprints", async () => {
          const p = pipeline(counterHandler(business));
          const first = body("t1", "e-1", "acct", 100);
          const second = body("t1", "e-1", "acct", 5);
          expect(kinds(await p.process([incomingMessage(first), incomingMessage(second)]))).toEqual(["applied", "quarantined:conflict"]);
          expect(await readCounter("acct")).toBe(100);
          expect(await store.countInbox("conformance")).toBe(1);
          expect(await quarantine()).toMatchObject([{ reason: "conflict", fingerprint: fingerprintOf(second), storedFingerprint: fingerprintOf(first) }]);
        });
      });

      describe("invalid messages", () => {
        const bad: Array<[string, IncomingMessage]> = [
          ["broken JSON", incomingMessage('{"tenant":"t1","event_id":')],
          ["broken JSON quoting a raw NUL", incomingMessage(Buffer.from("nul\u0000l"))],
          ["broken JSON with control characters", incomingMessage(Buffer.from("{\u0001\u0002}"))],
          ["invalid UTF-8", incomingMessage(Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x7d]))],
          ["a JSON array", incomingMessage("[1,2]")],
          ["missing event_id", incomingMessage({ tenant: "t1", account: "a", delta: 1 })],
          ["numeric event_id", incomingMessage({ tenant: "t1", event_id: 7, account: "a", delta: 1 })],
          ["unsafe integer delta", incomingMessage('{"tenant":"t1","event_id":"e-9","account":"a","delta":9007199254740993}')],
          ["float delta", incomingMessage({ tenant: "t1", event_id: "e-9", account: "a", delta: 1.5 })],
          ["__proto__ key", incomingMessage('{"tenant":"t1","event_id":"e-9","account":"a","delta":1,"__proto__":{"x":1}}')],
          ["NUL in a value", incomingMessage('{"tenant":"t1","event_id":"e-9","account":"a\\u0000","delta":1}')],
          ["unpaired surrogate in the id", incomingMessage('{"tenant":"t1","event_id":"e-\\ud800","account":"a","delta":1}')],
          ["number out of range", incomingMessage('{"tenant":"t1","event_id":"e-9","account":"a","delta":1,"x":1e400}')],
          ["257-character event_id", message("t1", "e".repeat(257), "a", 1)],
          ["XML content type", incomingMessage(body("t1", "e-9", "a", 1), { contentType: "application/xml" })],
          ["gzip content encoding", incomingMessage(body("t1", "e-9", "a", 1), { contentEncoding: "gzip" })],
          ["empty body", incomingMessage(Buffer.alloc(0))],
        ];

        // Decoded but refused by validation: the entry still shows the readable tenant and id.
        const readable = new Set(["unsafe integer delta", "float delta"]);
        for (const [what, msg] of bad) {
          it(`${what}: quarantined as invalid, no dedup record, no business write`, async () => {
            const p = pipeline(counterHandler(business));
            const [outcome] = await p.process([msg]);
            const key = readable.has(what) ? { tenant: "t1", eventId: "e-9" } : null;
            expect(outcome).toMatchObject({ kind: "quarantined", reason: "invalid", key });
            expect(await store.countInbox("conformance")).toBe(0);
            expect(await readCounter("a")).toBeNull();
            const rows = await quarantine();
            expect(rows).toHaveLength(1);
            expect(rows[0]).toMatchObject({ reason: "invalid", tenant: key?.tenant ?? null, eventId: key?.eventId ?? null, storedFingerprint: null, occurrences: 1 });
            expect(rows[0]!.body.equals(msg.body)).toBe(true);
            expect(rows[0]!.detail.length).toBeGreaterThan(0);
          });
        }

        it("all of them in one batch with valid events: the valid ones apply once, each bad one is quarantined", async () => {
          const p = pipeline(counterHandler(business));
          const batch = [message("t1", "ok-1", "good", 1), ...bad.map(([, m]) => m), message("t1", "ok-2", "good", 2)];
          const outcomes = await p.process(batch);
          expect(kinds(outcomes)).toEqual(["applied", ...bad.map(() => "quarantined:invalid"), "applied"]);
          expect(await readCounter("good")).toBe(3);
          expect(await readCounter("a")).toBeNull();
          expect(await store.countInbox("conformance")).toBe(2);
          const rows = await quarantine();
          // A quarantine entry without an event key is identified by its body: two cases above
          // send the same bytes with other properties, and count as one entry seen twice.
          const distinctBodies = new Set(bad.map(([, m]) => sha256Hex(m.body)));
          expect(rows).toHaveLength(distinctBodies.size);
          expect(rows.reduce((sum, r) => sum + r.occurrences, 0)).toBe(bad.length);
          expect(new Set(rows.map((r) => r.reason))).toEqual(new Set(["invalid"]));
        });

        it("keeps the raw body bytes, cut at the configured cap", async () => {
          const raw = Buffer.concat([Buffer.from([0xff, 0x00, 0xfe]), Buffer.alloc(100, 0x41)]);
          const p = pipeline(counterHandler(business), { quarantineBodyCap: 16 });
          await p.process([incomingMessage(raw)]);
          const [row] = await quarantine();
          expect(row!.bodyTruncated).toBe(true);
          expect(row!.body.equals(raw.subarray(0, 16))).toBe(true);
        });
      });

      describe("quarantine is idempotent", () => {
        it("the same bad message twice: one row, occurrences 2", async () => {
          const p = pipeline(counterHandler(business));
          const bad = () => incomingMessage('{"tenant":"t1","event_id":');
          await p.process([bad()]);
          const [first] = await quarantine();
          await p.process([bad()]);
          const rows = await quarantine();
          expect(rows).toHaveLength(1);
          expect(rows[0]).toMatchObject({ id: first!.id, occurrences: 2, reason: "invalid" });
          expect(rows[0]!.lastSeen.getTime()).toBeGreaterThanOrEqual(rows[0]!.firstSeen.getTime());
          expect(rows[0]!.firstSeen.getTime()).toBe(first!.firstSeen.getTime());
        });

        it("the same bad message twice in one batch: one row, occurrences 2", async () => {
          const p = pipeline(counterHandler(business));
          expect(kinds(await p.process([incomingMessage("nope"), incomingMessage("nope")]))).toEqual(["quarantined:invalid", "quarantined:invalid"]);
          expect(await quarantine()).toMatchObject([{ occurrences: 2 }]);
        });

        it("different bad messages are different rows", async () => {
          const p = pipeline(counterHandler(business));
          await p.process([incomingMessage("nope-1"), incomingMessage("nope-2")]);
          await p.process([incomingMessage("nope-1")]);
          const rows = await quarantine();
          expect(rows.map((r) => [r.body.toString(), r.occurrences]).sort()).toEqual([["nope-1", 2], ["nope-2", 1]]);
        });
      });

      describe("concurrent transactions on one key", () => {
        const slowHandler = (delayMs: number) => counterHandler(business, { afterWrite: () => sleep(delayMs) });

        async function racingPipelines(n: number, delayMs = 100, logger: Logger = recordingLogger(), claimed?: string[][]) {
          const stores = [store];
          for (let i = 1; i < n; i++) stores.push(await fx.openPeer());
          // Warm every store up so the race starts with open connections.
          for (const s of stores) expect(await s.countInbox("conformance")).toBe(0);
          return stores.map((s) => pipeline(slowHandler(delayMs), { retry: patientRetry, logger }, claimed ? recordingClaims(s, claimed) : s));
        }

        it(`${options.concurrentStores} stores, same event: exactly one applied, the others duplicates`, async () => {
          expect(options.concurrentStores).toBeGreaterThanOrEqual(2);
          const pipelines = await racingPipelines(options.concurrentStores);
          const results = await Promise.all(pipelines.map((p) => p.process([message("t1", "e-1", "acct", 100)])));
          const all = kinds(results.flat()).sort();
          expect(all).toEqual(["applied", ...new Array<string>(options.concurrentStores - 1).fill("duplicate")].sort());
          expect(await readCounter("acct")).toBe(100);
          expect(await store.countInbox("conformance")).toBe(1);
          expect(await quarantine()).toEqual([]);
        });

        it(`${options.concurrentStores} stores, same id with different payloads: one applied, the others conflicts`, async () => {
          const pipelines = await racingPipelines(options.concurrentStores);
          const results = await Promise.all(pipelines.map((p, i) => p.process([message("t1", "e-1", "acct", 100 + i)])));
          const all = kinds(results.flat());
          expect(all.filter((k) => k === "applied")).toHaveLength(1);
          expect(all.filter((k) => k === "quarantined:conflict")).toHaveLength(options.concurrentStores - 1);
          const winner = results.findIndex((r) => r[0]!.kind === "applied");
          expect(await readCounter("acct")).toBe(100 + winner);
          expect(await store.countInbox("conformance")).toBe(1);
          const rows = await quarantine();
          expect(rows).toHaveLength(options.concurrentStores - 1);
          for (const row of rows) expect(row.storedFingerprint).toBe(fingerprintOf(body("t1", "e-1", "acct", 100 + winner)));
        });

        it("overlapping batches in opposite key orders: every key applied exactly once, no failure", async () => {
          const logger = recordingLogger();
          const claimed: string[][] = [];
          const pipelines = await racingPipelines(Math.min(options.concurrentStores, 3), 10, logger, claimed);
          const keys = Array.from({ length: 8 }, (_, i) => `e-${i}`);
          const orders = [keys, [...keys].reverse(), [...keys.slice(4), ...keys.slice(0, 4)]];
          const results = await Promise.all(pipelines.map((p, i) => p.process(orders[i]!.map((k) => message("t1", k, `acct-${k}`, 1)))));
          // Whatever order the batches arrived in, each claim reached the store sorted by key.
          expect(claimed.length).toBeGreaterThanOrEqual(pipelines.length);
          for (const ids of claimed) expect(ids).toEqual([...ids].sort());
          if (options.rowLocks) {
            // Claims in key order take the unique-index locks in one order: the batches wait for
            // each other but never deadlock. A deadlock would be retried away and go unseen
            // in the outcomes; the retry log shows it.
            expect(logger.lines.filter((l) => l.message === "transaction failed, retrying").map((l) => l.fields?.error)).toEqual([]);
          }
          const applied = results.flat().flatMap((o) => (o.kind === "applied" ? [o.key.eventId] : [])).sort();
          expect(applied).toEqual([...keys].sort());
          expect(results.flat().every((o) => o.kind === "applied" || o.kind === "duplicate")).toBe(true);
          for (const k of keys) expect(await readCounter(`acct-${k}`)).toBe(1);
          expect(await store.countInbox("conformance")).toBe(keys.length);
        });
      });

      /** The operator's side of the store: purges, horizons, quarantine decisions. */
      async function operations(): Promise<InboxOperations> {
        const ops = fx.operations ? await fx.operations() : hasOperations(store) ? store.operations() : undefined;
        if (!ops) throw new Error(`the ${name} fixture has no operations(): nothing can purge or grant a replay to test`);
        return ops;
      }

      /** Purges every dedup record first seen before now, whatever the quarantine holds. */
      async function purgeAll(ops: InboxOperations): Promise<number> {
        await sleep(5); // a zero replay window purges what was first seen strictly before now
        return (await purgeExpiredDedupRecords(ops, { replayWindowMs: 0, force: true })).purged;
      }

      describe("the stale fence's boundary", () => {
        it("an event stamped exactly at the purge horizon is stale, as is one a millisecond earlier; a millisecond later is new", async () => {
          const ops = await operations();
          // Event times in epoch milliseconds from a body field: exact to the millisecond.
          const p = pipeline(counterHandler(business), { staleFence: { eventTimeField: "at" } });
          expect(kinds(await p.process([message("t1", "seed", "seed", 1)]))).toEqual(["applied"]);
          expect(await purgeAll(ops)).toBe(1);
          // The horizon the fence compares with, as the claim reports it: the database's own
          // value cut to the millisecond (microseconds on PostgreSQL and MariaDB).
          const probe = await store.transaction((tx) => tx.claim("conformance", [{ key: { tenant: "t1", eventId: "probe" }, fingerprint: "f", eventTime: new Date(0) }]));
          expect(probe).toMatchObject([{ status: "stale" }]);
          const horizon = (probe[0] as { horizon: Date }).horizon.getTime();
          const [stored] = await ops.purgeHorizons();
          expect(horizon).toBe(Math.floor(stored!.purgedThrough.getTime()));

          const outcomes = await p.process([
            message("t1", "before", "before", 1, { at: horizon - 1 }),
            message("t1", "at", "at", 1, { at: horizon }),
            message("t1", "after", "after", 1, { at: horizon + 1 }),
          ]);
          expect(kinds(outcomes)).toEqual(["quarantined:stale", "quarantined:stale", "applied"]);
          // Neither stale event left a dedup record or a business write behind.
          expect(await readCounter("before")).toBeNull();
          expect(await readCounter("at")).toBeNull();
          expect(await readCounter("after")).toBe(1);
          expect(await store.countInbox("conformance", { tenant: "t1", eventId: "at" })).toBe(0);
          expect(await store.countInbox("conformance")).toBe(1);
          expect((await quarantine()).map((q) => [q.eventId, q.reason]).sort()).toEqual([["at", "stale"], ["before", "stale"]]);
        });
      });

      describe("what the stale fence holds back", () => {
        const claimed = { status: "claimed" };
        const stale = { status: "stale", horizon: expect.any(Date) as unknown };
        const timed = (eventId: string, fingerprint: string, eventTime?: Date): InboxClaim => ({ key: { tenant: "t1", eventId }, fingerprint, eventTime });
        const claimAll = (handler: string, claims: InboxClaim[]) => store.transaction((tx) => tx.claim(handler, claims));

        it("nothing is stale for a handler that was never purged, not even an event stamped at the epoch; each handler has its own horizon", async () => {
          const ops = await operations();
          // No purge yet: the fence has no horizon to compare with, however old the event.
          expect(await claimAll("purged", [timed("epoch", "f", new Date(0)), timed("old", "f", new Date(Date.UTC(2001, 0, 1)))])).toEqual([claimed, claimed]);
          expect(await purgeAll(ops)).toBe(2);
          expect((await ops.purgeHorizons()).map((h) => h.handler)).toEqual(["purged"]);
          // Another handler's purge is no horizon for this one.
          expect(await claimAll("never-purged", [timed("epoch", "f", new Date(0))])).toEqual([claimed]);
          expect(await claimAll("purged", [timed("epoch", "f", new Date(0))])).toEqual([stale]);
          expect(await store.countInbox("never-purged")).toBe(1);
          expect(await store.countInbox("purged")).toBe(0);
        });

        it("after a purge it holds back only keys the claim inserts that carry an event time; a key the inbox holds stays a duplicate or a conflict, and keeps its record", async () => {
          const ops = await operations();
          await claimAll("h", [timed("seed", "f")]);
          expect(await purgeAll(ops)).toBe(1);
          const [horizon] = await ops.purgeHorizons();
          const before = new Date(horizon!.purgedThrough.getTime() - 1000);
          const after = new Date(horizon!.purgedThrough.getTime() + 1000);
          // Claimed after the purge, without an event time: new keys.
          expect(await claimAll("h", [timed("kept", "f-kept"), timed("kept-2", "f-kept-2")])).toEqual([claimed, claimed]);
          // Every key new: the untimed one beside a stale one does not switch the fence off.
          expect(await claimAll("h", [timed("new-untimed", "f"), timed("new-stale", "f", before), timed("new-fresh", "f", after)])).toEqual([claimed, stale, claimed]);
          // Keys the inbox holds are compared, never fenced, whatever their time: a stale verdict
          // would delete the record the fence takes back from a key it inserted.
          expect(await claimAll("h", [timed("kept", "f-kept", before), timed("kept-2", "other", before), timed("new-2", "f", after), timed("new-untimed-2", "f")]))
            .toEqual([{ status: "exists", fingerprint: "f-kept" }, { status: "exists", fingerprint: "f-kept-2" }, claimed, claimed]);
          for (const eventId of ["kept", "kept-2", "new-untimed", "new-fresh", "new-2", "new-untimed-2"]) {
            expect(await store.countInbox("h", { tenant: "t1", eventId }), eventId).toBe(1);
          }
          expect(await store.countInbox("h", { tenant: "t1", eventId: "new-stale" })).toBe(0);
          expect(await store.countInbox("h")).toBe(6);
        });
      });

      describe("the operator's one-time replay grants", () => {
        const grants = (where: string) => count(`SELECT count(*) AS n FROM rabbit_inbox_replay_grant WHERE ${where}`);

        it("accept-stale lets exactly the quarantined version past the fence, once; a stale event without a grant in the same batch stays out", async () => {
          const ops = await operations();
          const p = pipeline(counterHandler(business), { staleFence: { eventTimeField: "at" } });
          expect(kinds(await p.process([message("t1", "seed", "seed", 1)]))).toEqual(["applied"]);
          expect(await purgeAll(ops)).toBe(1);
          const [horizon] = await ops.purgeHorizons();
          const at = horizon!.purgedThrough.getTime() - 1000;
          const granted = () => message("t1", "s-1", "s", 1, { at });
          expect(kinds(await p.process([granted()]))).toEqual(["quarantined:stale"]);
          const [entry] = await ops.listQuarantineEntries({ reason: "stale" });
          await ops.beginResolution(entry!.id, { action: "replay", actor: "conformance", reason: "checked: never applied", acceptStale: true });
          expect(await grants("used_at IS NULL")).toBe(1);

          // Another version of the event is not the one the operator checked.
          expect(kinds(await p.process([message("t1", "s-1", "s", 99, { at })]))).toEqual(["quarantined:stale"]);
          expect(await grants("used_at IS NULL")).toBe(1);
          expect(kinds(await p.process([granted(), message("t1", "s-2", "s", 10, { at })]))).toEqual(["applied", "quarantined:stale"]);
          expect(await readCounter("s")).toBe(1);
          expect(await store.countInbox("conformance", { tenant: "t1", eventId: "s-1" })).toBe(1);
          expect(await store.countInbox("conformance", { tenant: "t1", eventId: "s-2" })).toBe(0);
          expect(await grants("used_at IS NOT NULL")).toBe(1);
          expect(await grants("used_at IS NULL")).toBe(0);

          // Purged once more, the same version is stale again: the grant was spent.
          expect(await purgeAll(ops)).toBe(1);
          expect(kinds(await p.process([granted()]))).toEqual(["quarantined:stale"]);
          expect(await readCounter("s")).toBe(1);
        });

        it("accept-new lets exactly the quarantined version replace the stored one, once, beside a duplicate and an ungranted conflict in the same batch", async () => {
          const ops = await operations();
          const idempotencyKeys: string[] = [];
          const p = pipeline(counterHandler(business, { afterWrite: (_e, ctx) => void idempotencyKeys.push(ctx.idempotencyKey()) }));
          const first = body("t1", "c-1", "acct", 100);
          const corrected = body("t1", "c-1", "acct", 150);
          expect(kinds(await p.process([incomingMessage(first), message("t1", "c-0", "acct", 1), message("t1", "c-2", "acct", 1)]))).toEqual(["applied", "applied", "applied"]);
          expect(kinds(await p.process([incomingMessage(corrected)]))).toEqual(["quarantined:conflict"]);
          const [conflict] = await ops.listQuarantineEntries({ reason: "conflict" });
          expect(conflict).toMatchObject({ eventId: "c-1", fingerprint: fingerprintOf(corrected), storedFingerprint: fingerprintOf(first) });
          await ops.beginResolution(conflict!.id, { action: "replay", actor: "conformance", reason: "the producer corrected the amount", acceptNew: true });

          // A third version is not the one the operator accepted.
          expect(kinds(await p.process([message("t1", "c-1", "acct", 7)]))).toEqual(["quarantined:conflict"]);
          expect(await grants("used_at IS NULL")).toBe(1);
          idempotencyKeys.length = 0;
          const outcomes = await p.process([message("t1", "c-0", "acct", 1), incomingMessage(corrected), message("t1", "c-2", "acct", 5)]);
          expect(kinds(outcomes)).toEqual(["duplicate", "applied", "quarantined:conflict"]);
          expect(await readCounter("acct")).toBe(100 + 1 + 1 + 150);
          expect((await ops.storedVersion("conformance", { tenant: "t1", eventId: "c-1" }))?.fingerprint).toBe(fingerprintOf(corrected));
          // The accepted version is a version of its own: its idempotency key is not the replaced one's.
          expect(idempotencyKeys).toEqual([expect.any(String)]);
          expect(idempotencyKeys[0]).not.toBe(sha256Hex(JSON.stringify(["t1", "conformance", "c-1", ""])));
          expect(await grants("used_at IS NOT NULL")).toBe(1);
          expect(await grants("used_at IS NULL")).toBe(0);

          // Applied once: the accepted version is now the duplicate, the first one the conflict.
          expect(kinds(await p.process([incomingMessage(corrected)]))).toEqual(["duplicate"]);
          expect(kinds(await p.process([incomingMessage(first)]))).toEqual(["quarantined:conflict"]);
          expect(await readCounter("acct")).toBe(252);
          expect(await store.countInbox("conformance")).toBe(3);
        });
      });

      describe("scope", () => {
        it("the same event_id in two tenants is two events", async () => {
          const p = pipeline(counterHandler(business));
          expect(kinds(await p.process([message("t1", "e-1", "acct", 1), message("t2", "e-1", "acct", 10)]))).toEqual(["applied", "applied"]);
          expect(kinds(await p.process([message("t2", "e-1", "acct", 10)]))).toEqual(["duplicate"]);
          expect(await readCounter("acct")).toBe(11);
          expect(await store.countInbox("conformance", { tenant: "t1", eventId: "e-1" })).toBe(1);
          expect(await store.countInbox("conformance", { tenant: "t2", eventId: "e-1" })).toBe(1);
        });

        it("two handlers each apply the same event once", async () => {
          const a = pipeline(counterHandler(business, { name: "handler-a" }));
          const b = pipeline(counterHandler(business, { name: "handler-b" }));
          expect(kinds(await a.process([message("t1", "e-1", "acct", 100)]))).toEqual(["applied"]);
          expect(kinds(await b.process([message("t1", "e-1", "acct", 100)]))).toEqual(["applied"]);
          expect(kinds(await a.process([message("t1", "e-1", "acct", 100)]))).toEqual(["duplicate"]);
          expect(kinds(await b.process([message("t1", "e-1", "acct", 100)]))).toEqual(["duplicate"]);
          expect(await readCounter("acct")).toBe(200);
          expect(await store.countInbox("handler-a")).toBe(1);
          expect(await store.countInbox("handler-b")).toBe(1);
          // A conflict in one handler's scope is not seen by the other.
          expect(kinds(await a.process([message("t1", "e-1", "acct", 5)]))).toEqual(["quarantined:conflict"]);
          expect(await store.listQuarantine({ handler: "handler-b" })).toEqual([]);
        });
      });

      describe("identifiers", () => {
        it("accepts 256-character tenant and event ids, and rejects 257 as invalid", async () => {
          const p = pipeline(counterHandler(business));
          const long = { tenant: "t".repeat(256), eventId: "e".repeat(256) };
          expect(kinds(await p.process([message(long.tenant, long.eventId, "acct", 1)]))).toEqual(["applied"]);
          expect(kinds(await p.process([message(long.tenant, long.eventId, "acct", 1)]))).toEqual(["duplicate"]);
          expect(await store.countInbox("conformance", long)).toBe(1);
          // Two ids that differ only in the last of 256 characters are two events.
          expect(kinds(await p.process([message(long.tenant, "e".repeat(255) + "f", "acct", 1)]))).toEqual(["applied"]);
          expect(kinds(await p.process([
            message(long.tenant, "e".repeat(257), "acct", 1),
            message("t".repeat(257), long.eventId, "acct", 1),
          ]))).toEqual(["quarantined:invalid", "quarantined:invalid"]);
          expect(await readCounter("acct")).toBe(2);
          expect(await store.countInbox("conformance")).toBe(2);
        });

        it("accepts 256-character ids of multi-byte characters (the longest keys in bytes)", async () => {
          const p = pipeline(counterHandler(business));
          const cases = [
            { tenant: "租".repeat(256), eventId: "事".repeat(256) },
            { tenant: "t1", eventId: "😀".repeat(128) },
            { tenant: "é".repeat(256), eventId: "€".repeat(256) },
          ];
          for (const key of cases) {
            expect(kinds(await p.process([message(key.tenant, key.eventId, "acct", 1)])), key.eventId.slice(0, 4)).toEqual(["applied"]);
            expect(kinds(await p.process([message(key.tenant, key.eventId, "acct", 1)]))).toEqual(["duplicate"]);
            expect(await store.countInbox("conformance", key)).toBe(1);
          }
          expect(await readCounter("acct")).toBe(cases.length);
        });

        it("compares ids exactly: case, accents, normalization, width and emoji make different events", async () => {
          const p = pipeline(counterHandler(business));
          const ids = ["e-1", "E-1", "café", "cafe\u0301", "cafe", "straße", "strasse", "ｅ-1", "😀", "😁", "事件", "a b"];
          const outcomes = await p.process(ids.map((id) => message("t1", id, "acct", 1)));
          expect(kinds(outcomes)).toEqual(ids.map(() => "applied"));
          expect(await readCounter("acct")).toBe(ids.length);
          for (const id of ids) expect(await store.countInbox("conformance", { tenant: "t1", eventId: id }), id).toBe(1);
          // Each comes back as its own duplicate, not as a conflict with a look-alike.
          expect(kinds(await p.process(ids.map((id) => message("t1", id, "acct", 1))))).toEqual(ids.map(() => "duplicate"));
          // Tenants are compared exactly as well.
          expect(kinds(await p.process([message("T1", "e-1", "acct", 1)]))).toEqual(["applied"]);
          expect(await readCounter("acct")).toBe(ids.length + 1);
        });

        it("takes SQL and array-literal metacharacters in ids literally, alone and in a batch", async () => {
          const p = pipeline(counterHandler(business));
          const ids = ["it's", "''", "a\\b", "\\", "\\'", "E'x'", '"q"', "{a,b}", "a,b", "NULL", "$1", "x'); DROP TABLE rabbit_inbox_dedup; --", "😀'\\"];
          // One at a time (a single claim: strict mode), then all together (a batch claim).
          for (const id of ids) expect(kinds(await p.process([message("t'1", id, "acct", 1)])), id).toEqual(["applied"]);
          expect(kinds(await p.process(ids.map((id) => message("t'1", id, "acct", 1))))).toEqual(ids.map(() => "duplicate"));
          expect(kinds(await p.process(ids.map((id) => message("t\\2", id, "acct", 1))))).toEqual(ids.map(() => "applied"));
          for (const id of ids) expect(await store.countInbox("conformance", { tenant: "t'1", eventId: id }), id).toBe(1);
          expect(await store.countInbox("conformance")).toBe(ids.length * 2);
          expect(await readCounter("acct")).toBe(ids.length * 2);
        });

        it("rejects ids with outer spaces or control characters as invalid, and never merges look-alikes", async () => {
          const p = pipeline(counterHandler(business));
          expect(kinds(await p.process([message("t1", "e-1", "acct", 1)]))).toEqual(["applied"]);
          const outcomes = await p.process([
            message("t1", "e-1 ", "acct", 1), message("t1", " e-1", "acct", 1), message("t1 ", "e-1", "acct", 1),
            message("t1", "e-1\n", "acct", 1), message("t1", "e-\t1", "acct", 1),
            incomingMessage('{"tenant":"t1","event_id":"e-1\\udc00","account":"acct","delta":1}'),
          ]);
          expect(kinds(outcomes)).toEqual(new Array<string>(6).fill("quarantined:invalid"));
          expect(await readCounter("acct")).toBe(1);
          expect(await store.countInbox("conformance")).toBe(1);
        });
      });

      it("stores the fingerprint of the canonical payload, so a reformatted redelivery is a duplicate", async () => {
        const p = pipeline(counterHandler(business));
        await p.process([incomingMessage('{"tenant":"t1","event_id":"e-1","account":"acct","delta":3,"meta":{"b":1,"a":[1,2]}}')]);
        const claims = await store.transaction((tx) => tx.claim("conformance", [{ key: { tenant: "t1", eventId: "e-1" }, fingerprint: "x" }]));
        expect(claims).toEqual([{ status: "exists", fingerprint: fingerprintOf({ account: "acct", delta: 3, event_id: "e-1", meta: { a: [1, 2], b: 1 }, tenant: "t1" }) }]);
        expect(kinds(await p.process([incomingMessage('{"meta":{"a":[1,2],"b":1},"delta":3,"account":"acct","event_id":"e-1","tenant":"t1"}')]))).toEqual(["duplicate"]);
        expect(kinds(await p.process([incomingMessage('{"meta":{"a":[2,1],"b":1},"delta":3,"account":"acct","event_id":"e-1","tenant":"t1"}')]))).toEqual(["quarantined:conflict"]);
      });

      it("gives handlers a stable idempotency key per tenant, handler, event and name", async () => {
        const seen: string[] = [];
        const p = pipeline(counterHandler(business, { afterWrite: (_e, ctx) => void seen.push(ctx.idempotencyKey(), ctx.idempotencyKey("payment")) }));
        await p.process([message("t1", "e-1", "acct", 1), message("t2", "e-1", "acct", 1)]);
        expect(seen).toHaveLength(4);
        expect(new Set(seen).size).toBe(4);
        expect(seen[0]).toBe(sha256Hex(JSON.stringify(["t1", "conformance", "e-1", ""])));
      });
    });
  });
}
