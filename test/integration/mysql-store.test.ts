import mysql from "mysql2/promise";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  CommitOutcomeUnknownError, InboxConfigError, PermanentEventError, TransientStoreError,
} from "../../src/core/errors.js";
import type { EventKey } from "../../src/core/event.js";
import { fingerprintOf } from "../../src/core/fingerprint.js";
import type { InboxHandler } from "../../src/core/handler.js";
import type { OutboxRecord } from "../../src/core/store-contract/store.js";
import type { Logger } from "../../src/core/logger.js";
import type { Outcome } from "../../src/core/outcome.js";
import { type IncomingMessage, InboxPipeline, type PipelineHook } from "../../src/core/pipeline.js";
import type { RetryPolicy } from "../../src/core/retry-policy.js";
import { type MysqlConnection, type MysqlPool, MysqlStore } from "../../src/store/mysql/index.js";
import type { MysqlIsolationLevel, MysqlResultHeader, MysqlValue } from "../../src/store/mysql/driver.js";
import { classifyMysqlError, isMysqlConnectionLoss } from "../../src/store/mysql/errors.js";
import { MysqlDriver } from "../../src/store/mysql/driver.js";
import { mysqlLeasedWrite } from "../../src/store/mysql/outbox.js";
import { type TestMysqlDatabase, createMysqlDatabase, randomName } from "../support/databases.js";
import { incomingMessage } from "../support/messages.js";

/**
 * MysqlStore against the real MariaDB: a fresh database per file, the real InboxPipeline, and a
 * handler that writes a counter table through the transaction's connection.
 */

interface CounterEvent {
  tenant: string;
  event_id: string;
  counter: string;
  by?: number;
  ref?: string;
}

interface LogLine {
  level: string;
  message: string;
  fields: Record<string, unknown> | undefined;
}

function captureLogger(): { logger: Logger; lines: LogLine[] } {
  const lines: LogLine[] = [];
  const at = (level: string) => (message: string, fields?: Record<string, unknown>) => {
    lines.push({ level, message, fields });
  };
  return { lines, logger: { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") } };
}

function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => { resolve = r; });
  return { promise, resolve };
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const fastRetry: Partial<RetryPolicy> = { baseDelayMs: 5, maxDelayMs: 50, maxAttempts: 8 };

let db: TestMysqlDatabase;
let admin: mysql.Connection;
let store: MysqlStore;
const migrateLog = captureLogger();
const stores: MysqlStore[] = [];

async function openStore(options: { poolSize?: number; logger?: Logger; isolationLevel?: MysqlIsolationLevel; traceQueries?: boolean } = {}): Promise<MysqlStore> {
  const s = await MysqlStore.connect(db.url, options);
  stores.push(s);
  return s;
}

beforeAll(async () => {
  try {
    db = await createMysqlDatabase();
  } catch (error) {
    throw new Error(`MariaDB is not reachable (start it: start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd): ${String(error)}`, { cause: error });
  }
  admin = await mysql.createConnection(db.url);
  store = await openStore({ logger: migrateLog.logger });
  await store.migrate();
  await admin.query(`CREATE TABLE counters (
    tenant VARCHAR(64) NOT NULL, id VARCHAR(64) NOT NULL, n BIGINT NOT NULL DEFAULT 0, PRIMARY KEY (tenant, id)) ENGINE=InnoDB`);
  await admin.query("CREATE TABLE refs (ref VARCHAR(64) NOT NULL PRIMARY KEY) ENGINE=InnoDB");
  await admin.query("CREATE TABLE ballast (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, pad VARCHAR(64)) ENGINE=InnoDB");
});

afterAll(async () => {
  for (const s of stores) await s.close().catch(() => undefined);
  await admin?.end().catch(() => undefined);
  await db?.drop();
});

function counterHandler(options: { name?: string; afterUpdate?: (tx: MysqlConnection, event: CounterEvent) => Promise<void> } = {}): InboxHandler<CounterEvent, MysqlConnection> {
  return {
    name: options.name ?? "counter",
    async handle(event, ctx) {
      // A write before the check, so a permanent refusal has something to roll back.
      if (event.ref !== undefined) await ctx.tx.execute("INSERT INTO refs (ref) VALUES (?)", [event.ref]);
      const [result] = await ctx.tx.execute("UPDATE counters SET n = n + ? WHERE tenant = ? AND id = ?", [event.by ?? 1, ctx.key.tenant, event.counter]);
      if ((result as MysqlResultHeader).affectedRows === 0) throw new PermanentEventError("counter_missing", `no counter ${event.counter}`);
      await options.afterUpdate?.(ctx.tx, event);
    },
  };
}

function pipelineFor(
  s: MysqlStore, handler: InboxHandler<CounterEvent, MysqlConnection>,
  options: { logger?: Logger; hook?: PipelineHook; retry?: Partial<RetryPolicy> } = {},
): InboxPipeline<CounterEvent, MysqlConnection> {
  return new InboxPipeline({
    store: s, handler, logger: options.logger ?? captureLogger().logger, retry: options.retry ?? fastRetry,
    ...(options.hook ? { hook: options.hook } : {}),
  });
}

function event(tenant: string, eventId: string, counter: string, extra: Partial<CounterEvent> = {}): CounterEvent {
  return { tenant, event_id: eventId, counter, ...extra };
}

function message(e: CounterEvent, redelivered = false): IncomingMessage {
  return incomingMessage(e, { redelivered });
}

async function createCounters(tenant: string, ...ids: string[]): Promise<void> {
  for (const id of ids) await admin.execute("INSERT INTO counters (tenant, id, n) VALUES (?, ?, 0)", [tenant, id]);
}

async function counter(tenant: string, id: string): Promise<number | undefined> {
  const [rows] = await admin.execute("SELECT n FROM counters WHERE tenant = ? AND id = ?", [tenant, id]);
  const row = (rows as Array<{ n: number }>)[0];
  return row === undefined ? undefined : Number(row.n);
}

async function refExists(ref: string): Promise<boolean> {
  const [rows] = await admin.execute("SELECT ref FROM refs WHERE ref = ?", [ref]);
  return (rows as unknown[]).length === 1;
}

function kinds(outcomes: readonly Outcome[]): string[] {
  return outcomes.map((o) => (o.kind === "quarantined" ? `quarantined:${o.reason}` : o.kind));
}

async function connectionId(tx: MysqlConnection): Promise<number> {
  const [rows] = await tx.query("SELECT CONNECTION_ID() AS id");
  return Number((rows as Array<{ id: number }>)[0]!.id);
}

/**
 * Waits until the session `threadId` is blocked on a row lock. MariaDB refreshes its
 * INNODB_TRX snapshot only when it was not read for 100 ms: polling faster never sees a change.
 */
async function waitForLockWait(threadId: number): Promise<void> {
  for (let i = 0; i < 50; i++) {
    await sleep(150);
    const [rows] = await admin.execute(
      "SELECT COUNT(*) AS n FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = ? AND trx_state = 'LOCK WAIT'", [threadId]);
    if (Number((rows as Array<{ n: number }>)[0]!.n) > 0) return;
  }
  throw new Error(`session ${threadId} never waited for a lock`);
}

/** Kills a session and waits until the server no longer lists it. */
async function killSession(threadId: number): Promise<void> {
  await admin.query(`KILL CONNECTION ${Number(threadId)}`);
  for (let i = 0; i < 500; i++) {
    const [rows] = await admin.execute("SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE ID = ?", [threadId]);
    if (Number((rows as Array<{ n: number }>)[0]!.n) === 0) break;
    await sleep(10);
  }
  await sleep(50); // let the client read the closed socket
}

/** A raw error from the server, for the classification tests. */
async function serverError(sql: string, values: MysqlValue[] = []): Promise<unknown> {
  try {
    await admin.execute(sql, values);
  } catch (error) {
    return error;
  }
  throw new Error(`expected ${sql} to fail`);
}

describe("MysqlStore on MariaDB", () => {
  it("fits mysql2's pool type structurally", () => {
    const pool: MysqlPool<mysql.PoolConnection> = mysql.createPool({ uri: db.url, connectionLimit: 1 });
    const typed = new MysqlStore({ pool });
    expect(typed.dialect).toBe("mysql");
    return pool.end();
  });

  it("captures the caller's stack for each query only with traceQueries (off by default: it costs CPU per statement)", async () => {
    async function handlerQueryFromHere(connection: MysqlConnection): Promise<unknown> {
      try {
        await connection.query("SELECT * FROM no_such_table_here");
        return undefined;
      } catch (error) {
        return error;
      }
    }
    const stackOf = async (s: MysqlStore) => String((await s.transaction((tx) => handlerQueryFromHere(tx.handle)) as Error).stack);
    const plain = await openStore({ poolSize: 1 });
    const traced = await openStore({ poolSize: 1, traceQueries: true });
    const [plainStack, tracedStack] = [await stackOf(plain), await stackOf(traced)];
    expect(plainStack).toContain("no_such_table_here");
    expect(tracedStack).toContain("no_such_table_here");
    expect(tracedStack).toContain("handlerQueryFromHere");
    expect(plainStack).not.toContain("handlerQueryFromHere");
  });

  it("migrates twice and concurrently, recording each migration once", async () => {
    const fresh = await createMysqlDatabase();
    const racers: MysqlStore[] = [];
    try {
      for (let i = 0; i < 4; i++) racers.push(await MysqlStore.connect(fresh.url, { poolSize: 2 }));
      await Promise.all(racers.map((r) => r.migrate()));
      await Promise.all(racers.map((r) => r.migrate()));
      await racers[0]!.migrate();
      const check = await mysql.createConnection(fresh.url);
      try {
        const [versions] = await check.query("SELECT version, COUNT(*) AS n FROM rabbit_inbox_migrations GROUP BY version");
        expect((versions as Array<{ version: number; n: number }>).map((v) => [Number(v.version), Number(v.n)])).toEqual([[1, 1], [2, 1], [3, 1], [4, 1], [5, 1]]);
        const [tables] = await check.query("SHOW TABLES");
        expect((tables as Array<Record<string, string>>).map((t) => Object.values(t)[0]).sort()).toEqual([
          "rabbit_inbox_dedup", "rabbit_inbox_migrations", "rabbit_inbox_outbox", "rabbit_inbox_purge_horizon", "rabbit_inbox_quarantine",
          "rabbit_inbox_quarantine_audit", "rabbit_inbox_redelivery", "rabbit_inbox_replay_grant",
        ]);
        // The key columns are binary whatever the database's default collation is.
        const [columns] = await check.query(
          "SELECT COLUMN_NAME AS c, DATA_TYPE AS t FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'rabbit_inbox_dedup' ORDER BY ORDINAL_POSITION");
        expect((columns as Array<{ c: string; t: string }>).slice(0, 3)).toEqual([
          { c: "tenant", t: "varbinary" }, { c: "handler", t: "varbinary" }, { c: "event_id", t: "varbinary" },
        ]);
      } finally {
        await check.end();
      }
    } finally {
      for (const r of racers) await r.close();
      await fresh.drop();
    }
  });

  it("applies a new event once and settles its redelivery as a duplicate", async () => {
    const tenant = randomName("t");
    await createCounters(tenant, "c");
    const pipeline = pipelineFor(store, counterHandler());
    const e = event(tenant, "e-1", "c");
    expect(kinds(await pipeline.process([message(e)]))).toEqual(["applied"]);
    expect(kinds(await pipeline.process([message(e, true)]))).toEqual(["duplicate"]);
    expect(await counter(tenant, "c")).toBe(1);
    expect(await store.countInbox("counter", { tenant, eventId: "e-1" })).toBe(1);
  });

  it("quarantines a payload conflict with both fingerprints, counts its recurrences and leaves the business row alone", async () => {
    const tenant = randomName("t");
    await createCounters(tenant, "c");
    const { logger, lines } = captureLogger();
    const pipeline = pipelineFor(store, counterHandler({ name: "conflicts" }), { logger });
    const first = event(tenant, "e-1", "c", { by: 1 });
    const second = event(tenant, "e-1", "c", { by: 50 });
    expect(kinds(await pipeline.process([message(first)]))).toEqual(["applied"]);
    expect(kinds(await pipeline.process([message(second)]))).toEqual(["quarantined:conflict"]);
    expect(kinds(await pipeline.process([message(second, true)]))).toEqual(["quarantined:conflict"]);
    expect(await counter(tenant, "c")).toBe(1);
    expect(lines.some((l) => l.level === "error" && l.message.includes("payload conflict"))).toBe(true);

    const entries = (await store.listQuarantine({ handler: "conflicts" })).filter((q) => q.tenant === tenant);
    expect(entries).toHaveLength(1);
    const entry = entries[0]!;
    expect(entry).toMatchObject({
      handler: "conflicts", tenant, eventId: "e-1", reason: "conflict", occurrences: 2, bodyTruncated: false,
      fingerprint: fingerprintOf(second), storedFingerprint: fingerprintOf(first),
    });
    expect(entry.fingerprint).not.toBe(entry.storedFingerprint);
    expect(JSON.parse(entry.body.toString("utf8"))).toEqual(second);
    expect(entry.firstSeen.getTime()).toBeLessThanOrEqual(entry.lastSeen.getTime());
    expect(Math.abs(entry.lastSeen.getTime() - Date.now())).toBeLessThan(60_000);
  });

  it("rolls back both the inbox row and the business row when the before-commit hook throws", async () => {
    const tenant = randomName("t");
    await createCounters(tenant, "c");
    const key: EventKey = { tenant, eventId: "e-1" };
    const e = event(tenant, "e-1", "c");

    await expect(store.transaction(async (tx) => {
      expect(await tx.claim("rollback", [{ key, fingerprint: fingerprintOf(e) }])).toEqual([{ status: "claimed" }]);
      await tx.handle.execute("UPDATE counters SET n = n + 1 WHERE tenant = ? AND id = 'c'", [tenant]);
    }, () => { throw new Error("injected before commit"); })).rejects.toThrow("injected before commit");
    expect(await store.countInbox("rollback", key)).toBe(0);
    expect(await counter(tenant, "c")).toBe(0);

    // Through the pipeline: the first attempt dies before COMMIT, the retry applies it once.
    let failures = 0;
    const hook: PipelineHook = (point) => {
      if (point === "before-commit" && failures++ === 0) throw new Error("injected before commit");
    };
    const pipeline = pipelineFor(store, counterHandler({ name: "rollback" }), { hook });
    expect(kinds(await pipeline.process([message(e)]))).toEqual(["applied"]);
    expect(failures).toBe(2);
    expect(await counter(tenant, "c")).toBe(1);
    expect(await store.countInbox("rollback", key)).toBe(1);
  });

  it("quarantines an event whose handler throws PermanentEventError, without any of its writes", async () => {
    const tenant = randomName("t");
    const ref = randomName("ref");
    const pipeline = pipelineFor(store, counterHandler({ name: "permanent" }));
    const outcomes = await pipeline.process([message(event(tenant, "e-1", "missing", { ref }))]);
    expect(kinds(outcomes)).toEqual(["quarantined:counter_missing"]);
    expect(await refExists(ref)).toBe(false);
    expect(await store.countInbox("permanent", { tenant, eventId: "e-1" })).toBe(0);
    const entries = (await store.listQuarantine({ handler: "permanent" })).filter((q) => q.tenant === tenant);
    expect(entries.map((q) => q.reason)).toEqual(["counter_missing"]);
  });

  it("quarantines a duplicate key raised by business SQL (1062) as constraint_violation", async () => {
    const tenant = randomName("t");
    const ref = randomName("ref");
    await createCounters(tenant, "c");
    const pipeline = pipelineFor(store, counterHandler({ name: "constraint" }));
    expect(kinds(await pipeline.process([message(event(tenant, "e-1", "c", { ref }))]))).toEqual(["applied"]);
    expect(kinds(await pipeline.process([message(event(tenant, "e-2", "c", { ref }))]))).toEqual(["quarantined:constraint_violation"]);
    expect(await counter(tenant, "c")).toBe(1);
    expect(await store.countInbox("constraint", { tenant, eventId: "e-2" })).toBe(0);
  });

  it("keeps ids apart that a text collation would merge, and stores 256-character unicode ids", async () => {
    const tenant = randomName("t");
    await createCounters(tenant, "c");
    const pipeline = pipelineFor(store, counterHandler({ name: "exact" }));
    const ids = ["E-1", "e-1", "é-1", "ｅ-1", "e-1 x"];
    expect(kinds(await pipeline.process(ids.map((id) => message(event(tenant, id, "c")))))).toEqual(ids.map(() => "applied"));
    expect(await counter(tenant, "c")).toBe(ids.length);

    // 256 characters of three UTF-8 bytes (768 bytes) and of four (surrogate pairs).
    const longTenant = "租".repeat(256);
    await createCounters(longTenant.slice(0, 64), "c");
    const longHandler: InboxHandler<CounterEvent, MysqlConnection> = {
      ...counterHandler({ name: "exact" }),
      async handle(_e, ctx) {
        await ctx.tx.execute("UPDATE counters SET n = n + 1 WHERE tenant = ? AND id = 'c'", [ctx.key.tenant.slice(0, 64)]);
      },
    };
    const longPipeline = pipelineFor(store, longHandler);
    const long = event(longTenant, "😀".repeat(128), "c");
    expect(kinds(await longPipeline.process([message(long)]))).toEqual(["applied"]);
    expect(kinds(await longPipeline.process([message(long, true)]))).toEqual(["duplicate"]);
    expect(await store.countInbox("exact", { tenant: longTenant, eventId: long.event_id })).toBe(1);

    // Store level: a trailing space is another key (PAD SPACE collations would merge them); an
    // id over the column's byte length is refused as invalid instead of being cut.
    await store.transaction(async (tx) => {
      expect(await tx.claim("exact", [
        { key: { tenant, eventId: "pad" }, fingerprint: "f" },
        { key: { tenant, eventId: "pad " }, fingerprint: "f" },
      ])).toEqual([{ status: "claimed" }, { status: "claimed" }]);
    });
    const tooLong = store.transaction((tx) => tx.claim("exact", [{ key: { tenant, eventId: "x".repeat(1025) }, fingerprint: "f" }]));
    await expect(tooLong).rejects.toBeInstanceOf(PermanentEventError);
    await expect(tooLong).rejects.toMatchObject({ reason: "invalid" });
  });

  it("claims a batch larger than one statement, telling new, duplicate and conflicting keys apart", async () => {
    const tenant = randomName("t");
    const counters = Array.from({ length: 70 }, (_, i) => `c${i}`);
    await createCounters(tenant, ...counters);
    const pipeline = pipelineFor(store, counterHandler({ name: "batch" }));
    // Some keys exist before the batch: two identical, one with another payload.
    expect(kinds(await pipeline.process([
      message(event(tenant, "e-5", "c5")), message(event(tenant, "e-40", "c40")), message(event(tenant, "e-66", "c66", { by: 9 })),
    ]))).toEqual(["applied", "applied", "applied"]);
    const batch = counters.map((c, i) => message(event(tenant, `e-${i}`, c)));
    batch.push(message(event(tenant, "e-7", "c7"))); // the same event twice in one batch
    const outcomes = kinds(await pipeline.process(batch));
    const expected = counters.map((_, i) => (i === 5 || i === 40 ? "duplicate" : i === 66 ? "quarantined:conflict" : "applied"));
    expect(outcomes).toEqual([...expected, "duplicate"]);
    for (const [i, c] of counters.entries()) expect(await counter(tenant, c)).toBe(i === 66 ? 9 : 1);
    expect(await store.countInbox("batch")).toBeGreaterThanOrEqual(70);
  });

  it("documents why the claim does not use a no-op ON DUPLICATE KEY UPDATE: mysql2 reports a duplicate like an insert", async () => {
    await admin.query("CREATE TEMPORARY TABLE found_rows_probe (k INT PRIMARY KEY)");
    const [inserted] = await admin.execute("INSERT INTO found_rows_probe (k) VALUES (1) ON DUPLICATE KEY UPDATE k = k");
    const [duplicate] = await admin.execute("INSERT INTO found_rows_probe (k) VALUES (1) ON DUPLICATE KEY UPDATE k = k");
    expect((inserted as MysqlResultHeader).affectedRows).toBe(1);
    expect((duplicate as MysqlResultHeader).affectedRows).toBe(1); // CLIENT_FOUND_ROWS, mysql2's default
    await admin.query("DROP TEMPORARY TABLE found_rows_probe");
  });

  it.each([
    ["REPEATABLE READ", 0],
    ["READ COMMITTED", 1],
  ] as const)("under %s, a claim that waited for a concurrent commit reads the committed fingerprint", async (level, snapshotSeesOther) => {
    const holder = await openStore({ poolSize: 1 });
    const waiter = await openStore({ poolSize: 1, isolationLevel: level });
    const tenant = randomName("t");
    const key: EventKey = { tenant, eventId: "e-1" };
    const other: EventKey = { tenant, eventId: "e-2" };
    const claimed = deferred();
    const commit = deferred();
    const holding = holder.transaction(async (tx) => {
      expect(await tx.claim("snapshot", [{ key, fingerprint: "first" }, { key: other, fingerprint: "other" }]))
        .toEqual([{ status: "claimed" }, { status: "claimed" }]);
      claimed.resolve();
      await commit.promise;
    });
    await claimed.promise;
    const threadId = deferred<number>();
    const waiting = waiter.transaction(async (tx) => {
      threadId.resolve(await connectionId(tx.handle));
      // A consistent read first: under REPEATABLE READ it fixes the snapshot before the holder commits.
      await tx.handle.query("SELECT COUNT(*) FROM rabbit_inbox_dedup");
      const result = await tx.claim("snapshot", [{ key, fingerprint: "second" }]);
      // A plain SELECT of a row the holder committed and this transaction did not touch: the
      // REPEATABLE READ snapshot predates that commit and does not see it.
      const [plain] = await tx.handle.execute(
        "SELECT fingerprint FROM rabbit_inbox_dedup WHERE tenant = ? AND handler = ? AND event_id = ?",
        [Buffer.from(tenant), Buffer.from("snapshot"), Buffer.from("e-2")]);
      return { result, otherRows: (plain as unknown[]).length };
    });
    await waitForLockWait(await threadId.promise);
    commit.resolve();
    await holding;
    const seen = await waiting;
    expect(seen.result).toEqual([{ status: "exists", fingerprint: "first" }]);
    expect(seen.otherRows).toBe(snapshotSeesOther);
    expect(await store.countInbox("snapshot", key)).toBe(1);
  });

  it("a claim that waited for a transaction that rolled back inserts the key itself", async () => {
    const holder = await openStore({ poolSize: 1 });
    const waiter = await openStore({ poolSize: 1 });
    const key: EventKey = { tenant: randomName("t"), eventId: "e-1" };
    const claimed = deferred();
    const abort = deferred();
    const holding = holder.transaction(async (tx) => {
      await tx.claim("rolled", [{ key, fingerprint: "first" }]);
      claimed.resolve();
      await abort.promise;
      throw new Error("holder gives up");
    });
    await claimed.promise;
    const threadId = deferred<number>();
    const waiting = waiter.transaction(async (tx) => {
      threadId.resolve(await connectionId(tx.handle));
      return tx.claim("rolled", [{ key, fingerprint: "second" }]);
    });
    await waitForLockWait(await threadId.promise);
    abort.resolve();
    await expect(holding).rejects.toThrow("holder gives up");
    expect(await waiting).toEqual([{ status: "claimed" }]);
  });

  it("five stores with their own pools claim the same keys at once: each event applies exactly once", async () => {
    const racers: MysqlStore[] = [];
    for (let i = 0; i < 5; i++) racers.push(await openStore({ poolSize: 2 }));
    const tenant = randomName("t");
    await createCounters(tenant, "single", ...Array.from({ length: 20 }, (_, i) => `b${i}`));

    // One event, with a handler slow enough that the others queue on its key.
    const slow = counterHandler({ name: "race", afterUpdate: () => sleep(30) });
    const one = message(event(tenant, "single", "single"));
    const single = await Promise.all(racers.map((r) => pipelineFor(r, slow).process([one])));
    expect(single.flatMap(kinds).sort()).toEqual(["applied", "duplicate", "duplicate", "duplicate", "duplicate"]);
    expect(await counter(tenant, "single")).toBe(1);
    expect(await store.countInbox("race", { tenant, eventId: "single" })).toBe(1);

    // Batches of the same 20 events, each store receiving them in another order.
    const events = Array.from({ length: 20 }, (_, i) => event(tenant, `b-${i}`, `b${i}`));
    const batches = racers.map((r, n) => {
      const order = events.map((e, i) => ({ e, sortKey: (i * (n + 3)) % 23 })).sort((a, b) => a.sortKey - b.sortKey).map((x) => x.e);
      return pipelineFor(r, counterHandler({ name: "race" })).process(order.map((e) => message(e)));
    });
    const outcomes = (await Promise.all(batches)).flatMap(kinds);
    expect(outcomes.filter((k) => k === "applied")).toHaveLength(20);
    expect(outcomes.filter((k) => k === "duplicate")).toHaveLength(80);
    for (let i = 0; i < 20; i++) expect(await counter(tenant, `b${i}`)).toBe(1);
  });

  describe("deadlocks (1213)", () => {
    /**
     * A real deadlock: `victimWork` locks row A and then wants row B, while another session,
     * made heavier by 200 inserted rows so that InnoDB picks our transaction as the victim,
     * holds B and then asks for A. Returns once the other session got its lock.
     */
    async function withDeadlock(tenant: string, start: (signal: { aLocked: (threadId: number) => void }) => Promise<unknown>): Promise<unknown> {
      const other = await mysql.createConnection(db.url);
      try {
        await other.query("START TRANSACTION");
        await other.query(`INSERT INTO ballast (pad) VALUES ${Array.from({ length: 200 }, () => "('x')").join(", ")}`);
        await other.execute("SELECT n FROM counters WHERE tenant = ? AND id = 'B' FOR UPDATE", [tenant]);
        const locked = deferred<number>();
        const running = start({ aLocked: (id) => locked.resolve(id) });
        running.catch(() => undefined);
        await waitForLockWait(await locked.promise);
        await other.execute("SELECT n FROM counters WHERE tenant = ? AND id = 'A' FOR UPDATE", [tenant]);
        await other.query("ROLLBACK");
        return await running.then(
          (value) => ({ ok: true, value }),
          (error: unknown) => ({ ok: false, error }),
        );
      } finally {
        await other.end();
      }
    }

    async function lockAThenB(tx: MysqlConnection, tenant: string, signal: { aLocked: (threadId: number) => void } | undefined): Promise<void> {
      await tx.execute("UPDATE counters SET n = n + 1 WHERE tenant = ? AND id = 'A'", [tenant]);
      signal?.aLocked(await connectionId(tx));
      await tx.execute("UPDATE counters SET n = n + 1 WHERE tenant = ? AND id = 'B'", [tenant]);
    }

    it("is classified transient, rolled back, and the pipeline retries the whole transaction", async () => {
      const tenant = randomName("t");
      await createCounters(tenant, "A", "B");
      const { logger, lines } = captureLogger();
      let attempts = 0;
      const outcome = await withDeadlock(tenant, (signal) => {
        const handler: InboxHandler<CounterEvent, MysqlConnection> = {
          name: "deadlock",
          async handle(_e, ctx) {
            attempts++;
            await lockAThenB(ctx.tx, tenant, attempts === 1 ? signal : undefined);
          },
        };
        return pipelineFor(store, handler, { logger }).process([message(event(tenant, "e-1", "A"))]);
      });
      expect(outcome).toMatchObject({ ok: true });
      expect(kinds((outcome as { value: Outcome[] }).value)).toEqual(["applied"]);
      expect(attempts).toBe(2);
      expect(await counter(tenant, "A")).toBe(1);
      expect(await counter(tenant, "B")).toBe(1);
      const retry = lines.find((l) => l.message === "transaction failed, retrying");
      expect(retry?.fields).toMatchObject({ errorKind: "transient" });
      expect(String(retry?.fields?.error)).toMatch(/deadlock/i);
    });

    it("surfaces as TransientStoreError with the server's 1213 as its cause", async () => {
      const tenant = randomName("t");
      await createCounters(tenant, "A", "B");
      const key: EventKey = { tenant, eventId: "e-1" };
      const outcome = await withDeadlock(tenant, (signal) => store.transaction(async (tx) => {
        await tx.claim("deadlock-store", [{ key, fingerprint: "f" }]);
        await lockAThenB(tx.handle, tenant, signal);
      }));
      expect(outcome).toMatchObject({ ok: false });
      const error = (outcome as { error: unknown }).error;
      expect(error).toBeInstanceOf(TransientStoreError);
      expect(error).toMatchObject({ kind: "transient", cause: { errno: 1213, code: "ER_LOCK_DEADLOCK" } });
      expect(classifyMysqlError((error as TransientStoreError).cause)).toBeInstanceOf(TransientStoreError);
      expect(await store.countInbox("deadlock-store", key)).toBe(0);
      expect(await counter(tenant, "A")).toBe(0);
    });

    it("a handler that swallows the deadlock can neither run more statements nor commit", async () => {
      const tenant = randomName("t");
      const ref = randomName("ref");
      await createCounters(tenant, "A", "B");
      const key: EventKey = { tenant, eventId: "e-1" };
      let swallowed: unknown;
      let refused: unknown;
      const outcome = await withDeadlock(tenant, (signal) => store.transaction(async (tx) => {
        await tx.claim("swallow", [{ key, fingerprint: "f" }]);
        try {
          await lockAThenB(tx.handle, tenant, signal);
        } catch (error) {
          swallowed = error;
        }
        // After a deadlock the server has rolled back and the session is in autocommit mode:
        // this insert would commit on its own, without the dedup row.
        try {
          await tx.handle.execute("INSERT INTO refs (ref) VALUES (?)", [ref]);
        } catch (error) {
          refused = error;
        }
      }));
      expect(swallowed).toMatchObject({ errno: 1213 });
      expect(refused).toBeInstanceOf(TransientStoreError);
      expect(outcome).toMatchObject({ ok: false });
      expect((outcome as { error: unknown }).error).toBeInstanceOf(TransientStoreError);
      expect(await refExists(ref)).toBe(false);
      expect(await store.countInbox("swallow", key)).toBe(0);
    });
  });

  it("refuses to commit when the handler ended the transaction itself", async () => {
    const tenant = randomName("t");
    await createCounters(tenant, "c");
    const key: EventKey = { tenant, eventId: "e-1" };
    const attempt = store.transaction(async (tx) => {
      await tx.claim("self-commit", [{ key, fingerprint: "f" }]);
      await tx.handle.query("COMMIT");
      await tx.handle.execute("UPDATE counters SET n = n + 1 WHERE tenant = ? AND id = 'c'", [tenant]);
    });
    await expect(attempt).rejects.toBeInstanceOf(InboxConfigError);
    expect(await counter(tenant, "c")).toBe(0); // the statement after the handler's COMMIT never ran
  });

  it("a lock wait timeout (1205) rolls back the whole transaction, not only the statement", async () => {
    const timeouts = await openStore({ poolSize: 1 });
    const tenant = randomName("t");
    await createCounters(tenant, "held", "written");
    const key: EventKey = { tenant, eventId: "e-1" };
    const other = await mysql.createConnection(db.url);
    try {
      await other.query("START TRANSACTION");
      await other.execute("SELECT n FROM counters WHERE tenant = ? AND id = 'held' FOR UPDATE", [tenant]);
      const attempt = timeouts.transaction(async (tx) => {
        await tx.handle.query("SET SESSION innodb_lock_wait_timeout = 1");
        await tx.claim("timeout", [{ key, fingerprint: "f" }]);
        await tx.handle.execute("UPDATE counters SET n = n + 1 WHERE tenant = ? AND id = 'written'", [tenant]);
        await tx.handle.execute("UPDATE counters SET n = n + 1 WHERE tenant = ? AND id = 'held'", [tenant]);
      });
      await expect(attempt).rejects.toBeInstanceOf(TransientStoreError);
      await expect(attempt).rejects.toMatchObject({ kind: "transient", cause: { errno: 1205 } });
    } finally {
      await other.query("ROLLBACK");
      await other.end();
    }
    expect(await timeouts.countInbox("timeout", key)).toBe(0);
    expect(await counter(tenant, "written")).toBe(0);
    // The connection went back to the pool clean: the next transaction on it commits.
    await timeouts.transaction((tx) => tx.claim("timeout", [{ key, fingerprint: "f" }]));
    expect(await timeouts.countInbox("timeout", key)).toBe(1);
  });

  it("destroys a connection lost mid-transaction, never releasing it, and reports a connection failure", async () => {
    const { logger, lines } = captureLogger();
    const lossy = await openStore({ poolSize: 1, logger });
    // The store's own pool, seen through a recorder of how each connection is given back.
    const inner = (lossy as unknown as { pool: MysqlPool }).pool;
    const givenBack: string[] = [];
    const recording: MysqlPool = {
      getConnection: async () => {
        const connection = await inner.getConnection();
        return new Proxy(connection, {
          get(target, property, receiver) {
            if (property === "release" || property === "destroy") {
              return () => {
                givenBack.push(String(property));
                target[property].call(target);
              };
            }
            return Reflect.get(target, property, receiver) as unknown;
          },
        });
      },
      end: () => inner.end(),
    };
    const recorded = new MysqlStore({ pool: recording, logger });
    const key: EventKey = { tenant: randomName("t"), eventId: "e-1" };
    let killed = 0;
    const attempt = recorded.transaction(async (tx) => {
      killed = await connectionId(tx.handle);
      await tx.claim("lost", [{ key, fingerprint: "f" }]);
      await killSession(killed);
      await tx.handle.query("SELECT 1");
    });
    await expect(attempt).rejects.toBeInstanceOf(TransientStoreError);
    await expect(attempt).rejects.toMatchObject({ kind: "connection" });
    expect(givenBack).toEqual(["destroy"]);
    const next = await recorded.transaction((tx) => connectionId(tx.handle));
    expect(next).not.toBe(killed);
    expect(givenBack).toEqual(["destroy", "release"]);
    expect(await recorded.countInbox("lost", key)).toBe(0);
    expect(lines.some((l) => l.message === "MySQL connection lost")).toBe(true);
  });

  it("a connection lost before COMMIT is an unknown outcome: the delivery is requeued, and applied on redelivery", async () => {
    const lossy = await openStore({ poolSize: 1 });
    const tenant = randomName("t");
    await createCounters(tenant, "c");
    let threadId = 0;
    let kills = 0;
    const hook: PipelineHook = async (point) => {
      if (point === "before-commit" && kills++ === 0) await killSession(threadId);
    };
    const handler = counterHandler({ name: "commit-lost", afterUpdate: async (tx) => { threadId = await connectionId(tx); } });
    const pipeline = pipelineFor(lossy, handler, { hook });
    const e = event(tenant, "e-1", "c");
    const [outcome] = await pipeline.process([message(e)]);
    expect(outcome?.kind).toBe("requeue");
    expect((outcome as { error: unknown }).error).toBeInstanceOf(CommitOutcomeUnknownError);
    expect(await counter(tenant, "c")).toBe(0);
    expect(kinds(await pipeline.process([message(e, true)]))).toEqual(["applied"]);
    expect(await counter(tenant, "c")).toBe(1);
  });

  it("classifies real server errors", async () => {
    await admin.query("CREATE TEMPORARY TABLE classify_probe (k INT PRIMARY KEY, small VARCHAR(2), tiny TINYINT, big LONGBLOB) ENGINE=InnoDB");
    await admin.query("INSERT INTO classify_probe (k) VALUES (1)");
    const duplicate = await serverError("INSERT INTO classify_probe (k) VALUES (1)");
    expect(duplicate).toMatchObject({ errno: 1062 });
    expect(classifyMysqlError(duplicate)).toMatchObject({ kind: "permanent", reason: "constraint_violation" });
    const notNull = await serverError("INSERT INTO classify_probe (k) VALUES (NULL)");
    expect(classifyMysqlError(notNull)).toMatchObject({ kind: "permanent", reason: "constraint_violation" });
    const tooLong = await serverError("INSERT INTO classify_probe (k, small) VALUES (2, 'abc')");
    expect(tooLong).toMatchObject({ errno: 1406 });
    expect(classifyMysqlError(tooLong)).toMatchObject({ kind: "permanent", reason: "invalid" });
    const outOfRange = await serverError("INSERT INTO classify_probe (k, tiny) VALUES (3, 1000)");
    expect(outOfRange).toMatchObject({ errno: 1264 });
    expect(classifyMysqlError(outOfRange)).toMatchObject({ kind: "permanent", reason: "invalid" });
    const badValue = await serverError("INSERT INTO classify_probe (k, tiny) VALUES (4, 'many')");
    expect(classifyMysqlError(badValue)).toMatchObject({ kind: "permanent", reason: "invalid" });
    const syntax = await serverError("SELEC 1");
    // SQL that cannot run as written: no event's fault, and no retry helps.
    expect(classifyMysqlError(syntax)).toMatchObject({ kind: "config", cause: syntax });
    const noTable = await serverError("SELECT * FROM no_such_table_here");
    expect(noTable).toMatchObject({ errno: 1146, sqlState: "42S02" });
    expect(classifyMysqlError(noTable)).toMatchObject({ kind: "config", message: expect.stringMatching(/^MySQL 1146: .*no_such_table_here.* retrying cannot help\.$/) });
    // A value or a statement over max_allowed_packet: the event's own failure, never a lost database.
    const overflow = await serverError("INSERT INTO classify_probe (k, big) VALUES (5, REPEAT('a', @@max_allowed_packet + 1))");
    expect(overflow).toMatchObject({ errno: 1301 });
    expect(classifyMysqlError(overflow)).toMatchObject({ kind: "permanent", reason: "too_large" });
    expect(isMysqlConnectionLoss(overflow)).toBe(false);
    await admin.query("DROP TEMPORARY TABLE classify_probe");
    // The server closes the session as it refuses the packet, sometimes while the client is
    // still writing it: mysql2 then reports `write ECONNRESET` instead (the store refuses such a
    // statement before sending it, see mysql-packet-too-large.test.ts). Sent until 1153 comes.
    let tooBig: unknown;
    for (let attempt = 0; attempt < 20 && (tooBig as { errno?: unknown } | undefined)?.errno !== 1153; attempt++) {
      const sender = await mysql.createConnection(db.url);
      const [[{ packet }]] = (await sender.query("SELECT @@max_allowed_packet AS packet")) as unknown as [[{ packet: number }]];
      tooBig = await sender.query("SELECT LENGTH(?) AS n", [Buffer.alloc(packet + 1024)]).then(() => undefined, (error: unknown) => error);
      sender.destroy();
    }
    expect(tooBig).toMatchObject({ errno: 1153 });
    expect(classifyMysqlError(tooBig)).toMatchObject({ kind: "permanent", reason: "too_large", message: expect.stringContaining("max_allowed_packet") });
    expect(classifyMysqlError(tooBig, true)).toMatchObject({ kind: "permanent", reason: "too_large" });
    // The server closes the session after 1153: its connection must be destroyed, not pooled.
    expect(isMysqlConnectionLoss(tooBig)).toBe(true);

    const victim = await mysql.createConnection(db.url);
    const [rows] = await victim.query("SELECT CONNECTION_ID() AS id");
    const lost = victim.query("SELECT SLEEP(10)").then(() => undefined, (error: unknown) => error);
    await sleep(100);
    await admin.query(`KILL CONNECTION ${Number((rows as Array<{ id: number }>)[0]!.id)}`);
    const lostError = await lost;
    victim.destroy();
    expect(lostError).toMatchObject({ fatal: true });
    expect(classifyMysqlError(lostError)).toMatchObject({ kind: "connection" });
    expect(classifyMysqlError(lostError, true)).toBeInstanceOf(CommitOutcomeUnknownError);

    const closedPort = new URL(db.url);
    closedPort.port = "1";
    const refused = await mysql.createConnection(closedPort.toString()).then(() => undefined, (error: unknown) => error);
    expect(classifyMysqlError(refused)).toMatchObject({ kind: "connection" });
  });

  it("warns at migrate when innodb_flush_log_at_trx_commit is not 1", async () => {
    expect(migrateLog.lines.filter((l) => l.level === "warn")).toEqual([]);
    const [rows] = await admin.query("SELECT @@GLOBAL.innodb_flush_log_at_trx_commit AS v");
    const original = Number((rows as Array<{ v: number }>)[0]!.v);
    const { logger, lines } = captureLogger();
    const lax = await openStore({ poolSize: 1, logger });
    await admin.query("SET GLOBAL innodb_flush_log_at_trx_commit = 2");
    try {
      await lax.migrate();
    } finally {
      await admin.query(`SET GLOBAL innodb_flush_log_at_trx_commit = ${original}`);
    }
    expect(lines.filter((l) => l.level === "warn").map((l) => l.message)).toEqual([
      expect.stringContaining("innodb_flush_log_at_trx_commit is not 1"),
    ]);
  });

  it("migration 3 runs again after a migrator died half-way: the column and index it already added are skipped", async () => {
    const fresh = await createMysqlDatabase();
    const s = await MysqlStore.connect(fresh.url, { poolSize: 1 });
    const check = await mysql.createConnection(fresh.url);
    try {
      await s.migrate();
      // As if the migrator had died after the ALTER TABLE (and, the second time, after the index too).
      for (const undo of [["DROP INDEX rabbit_inbox_quarantine_status ON rabbit_inbox_quarantine", "DROP TABLE rabbit_inbox_replay_grant"], ["DROP TABLE rabbit_inbox_purge_horizon"]]) {
        for (const sql of [...undo, "DELETE FROM rabbit_inbox_migrations WHERE version = 3"]) await check.query(sql);
        await s.migrate();
        const [versions] = await check.query("SELECT version FROM rabbit_inbox_migrations ORDER BY version");
        expect((versions as Array<{ version: number }>).map((v) => Number(v.version))).toEqual([1, 2, 3, 4, 5]);
        const [indexes] = await check.query(
          "SELECT COUNT(DISTINCT INDEX_NAME) AS n FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'rabbit_inbox_quarantine' AND INDEX_NAME = 'rabbit_inbox_quarantine_status'");
        expect(Number((indexes as Array<{ n: number }>)[0]!.n)).toBe(1);
        const [tables] = await check.query("SELECT COUNT(*) AS n FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN ('rabbit_inbox_replay_grant', 'rabbit_inbox_purge_horizon')");
        expect(Number((tables as Array<{ n: number }>)[0]!.n)).toBe(2);
      }
    } finally {
      await check.end();
      await s.close();
      await fresh.drop();
    }
  });

  describe("outbox", () => {
    const record = (messageId: string, eventId: string, orderingKey: string | null = null): OutboxRecord => ({
      messageId, exchange: "x", routingKey: "", body: Buffer.from(messageId), properties: "{}", orderingKey,
      source: { tenant: "t1", handler: "outbox-test", eventId },
    });
    const ids = async (prefix: string): Promise<Map<string, number>> => {
      const [rows] = await admin.execute("SELECT id, message_id FROM rabbit_inbox_outbox WHERE message_id LIKE ? ORDER BY id", [`${prefix}%`]);
      return new Map((rows as Array<{ id: number; message_id: Buffer }>).map((r) => [r.message_id.toString(), Number(r.id)]));
    };

    it("ids follow the write order within each transaction, with concurrent writers and duplicate message ids skipped", async () => {
      const [mode] = await admin.query("SELECT @@GLOBAL.innodb_autoinc_lock_mode AS m");
      expect([0, 1, 2]).toContain(Number((mode as Array<{ m: number }>)[0]!.m)); // 1 ("consecutive") on this server
      const writers = await Promise.all([0, 1, 2, 3].map(() => openStore({ poolSize: 2 })));
      const written: string[][] = [];
      await Promise.all(writers.map(async (w, wi) => {
        for (let t = 0; t < 5; t++) {
          // 70 rows: more than one claim chunk (64), with a duplicate of an earlier row every 7th.
          const list: OutboxRecord[] = [];
          for (let i = 0; i < 70; i++) {
            list.push(i % 7 === 6 ? record(`ord-${wi}-${t}-${i - 3}`, `e-${wi}`) : record(`ord-${wi}-${t}-${i}`, `e-${wi}`, `k-${wi}`));
          }
          await w.transaction((tx) => tx.writeOutbox!(list));
          written.push(list.filter((_, i) => i % 7 !== 6).map((r) => r.messageId));
        }
      }));
      const byId = await ids("ord-");
      expect(byId.size).toBe(4 * 5 * 60);
      for (const list of written) {
        const order = list.map((m) => byId.get(m)!);
        expect(order).toEqual([...order].sort((a, b) => a - b));
      }
    });

    it("signals in-process relays only after a COMMIT that wrote a row", async () => {
      let signals = 0;
      const off = store.outboxSignal.subscribe(() => { signals++; });
      try {
        await store.transaction((tx) => tx.writeOutbox!([record("sig-1", "s-1"), record("sig-2", "s-1")]));
        expect(signals).toBe(1);
        await store.transaction((tx) => tx.writeOutbox!([record("sig-1", "s-1"), record("sig-2", "s-1")]));
        expect(signals).toBe(1); // both were already there: nothing written
        await expect(store.transaction(async (tx) => { await tx.writeOutbox!([record("sig-3", "s-1")]); throw new Error("rolled back"); })).rejects.toThrow("rolled back");
        expect(signals).toBe(1);
        expect([...(await ids("sig-")).keys()]).toEqual(["sig-1", "sig-2"]);
      } finally {
        off();
      }
    });

    it("a relay's open claim neither blocks new outbox rows nor a second relay, which skips the claimed rows and keeps key order", async () => {
      await admin.query("UPDATE rabbit_inbox_outbox SET sent_at = UTC_TIMESTAMP(6) WHERE sent_at IS NULL"); // earlier tests' rows
      await store.transaction((tx) => tx.writeOutbox!([record("gap-1", "g-1", "ka"), record("gap-2", "g-1")]));
      const relayA = await openStore({ poolSize: 1 });
      const relayB = await openStore({ poolSize: 1 });
      const claimA = await relayA.claimOutbox({ limit: 1000 });
      let settledA = false;
      try {
        expect(claimA!.rows.map((r) => r.messageId)).toEqual(["gap-1", "gap-2"]);
        // A consumer writes while A holds its claim. Under REPEATABLE READ the claim's scan would
        // have gap-locked key "ka" and this insert would wait for A's whole publish.
        const writer = await openStore({ poolSize: 1 });
        await writer.transaction(async (tx) => {
          await tx.handle.query("SET SESSION innodb_lock_wait_timeout = 1");
          await tx.writeOutbox!([record("gap-3", "g-2", "ka"), record("gap-4", "g-2")]);
        });
        // B skips A's rows; gap-3 waits behind gap-1, which A holds.
        const claimB = await relayB.claimOutbox({ limit: 1000 });
        expect(claimB!.rows.map((r) => r.messageId)).toEqual(["gap-4"]);
        await claimB!.settle({ sent: claimB!.rows.map((r) => r.id), failed: [] });
        // A duplicate's resend skips the rows A holds instead of waiting for them.
        expect(await writer.resendOutbox("outbox-test", [{ tenant: "t1", eventId: "g-1" }])).toBe(0);
        await claimA!.settle({ sent: [claimA!.rows[0]!.id], failed: [] });
        settledA = true;
        const next = await relayB.claimOutbox({ limit: 1000 });
        expect(next!.rows.map((r) => r.messageId)).toEqual(["gap-2", "gap-3"]);
        await next!.settle({ sent: [], failed: [] });
      } finally {
        if (!settledA) await claimA!.settle({ sent: [], failed: [] });
      }
      expect(await store.resendOutbox("outbox-test", [{ tenant: "t1", eventId: "g-1" }, { tenant: "t1", eventId: "g-2" }])).toBe(2);
    });

    it("documents that a leased write reads the key's newest unsent row from the transaction's snapshot: after a plain read, REPEATABLE READ misses a row committed since; READ COMMITTED sees it", async () => {
      const previousSeen = async (isolationLevel: MysqlIsolationLevel, tag: string) => {
        const s = await openStore({ poolSize: 2, isolationLevel });
        const handed: Array<number | null> = [];
        const detach = s.outboxSignal.attach({ leaseMs: 60_000, take: (rows) => { handed.push(...rows.map((r) => r.previousUnsent)); } });
        try {
          await s.transaction(async (tx) => {
            // The handler's first plain read: under REPEATABLE READ it fixes the snapshot.
            await tx.handle.query("SELECT COUNT(*) FROM counters");
            await store.transaction((other) => other.writeOutbox!([record(`${tag}-p`, "s-1", `${tag}-k`)]));
            await tx.writeOutbox!([record(`${tag}-r`, "s-2", `${tag}-k`)]);
          });
        } finally {
          detach();
        }
        return { previous: handed, committed: (await ids(`${tag}-p`)).get(`${tag}-p`) };
      };
      expect(await previousSeen("REPEATABLE READ", "snap-rr")).toEqual({ previous: [null], committed: expect.any(Number) as number });
      const rc = await previousSeen("READ COMMITTED", "snap-rc");
      expect(rc.previous).toEqual([rc.committed]);
    });

    describe.each([
      { returning: true, how: "from INSERT ... RETURNING (MariaDB)" },
      { returning: false, how: "read back by message id (MySQL, which has no RETURNING)" },
    ])("leased writes, the new rows' ids $how", ({ returning, how }) => {
      const tag = returning ? "lr" : "lb";
      const write = mysqlLeasedWrite("", { insertReturning: returning });
      /** The leased write in a transaction of the store's own driver, recording the statements it sent. */
      async function leased(records: OutboxRecord[], onStart?: (threadId: number) => void): Promise<{ rows: Awaited<ReturnType<typeof write>>; texts: string[] }> {
        const pool = mysql.createPool({ uri: db.url, connectionLimit: 1 });
        const driver = new MysqlDriver({ pool, ownsPool: true, logger: captureLogger().logger });
        const texts: string[] = [];
        try {
          const rows = await driver.transaction(async ({ query }) => {
            onStart?.(Number((await query({ text: "SELECT CONNECTION_ID() AS id", values: [] })).rows[0]!.id));
            return write({ handle: undefined, query: (statement) => { texts.push(statement.text); return query(statement); } }, records, 60_000);
          });
          return { rows, texts };
        } finally {
          await driver.close();
        }
      }

      it("hands over the new rows with their ids, skips a message id already there or repeated, and never the row that was there", async () => {
        await store.transaction((tx) => tx.writeOutbox!([record(`${tag}-old`, "o-1", `${tag}-k`)]));
        const before = await ids(`${tag}-`);
        // 70 records: two statements' chunks (64 and 4 and 2), the duplicates in the first.
        const fresh = Array.from({ length: 66 }, (_, i) => record(`${tag}-n${String(i).padStart(2, "0")}`, "o-2", i % 3 === 0 ? `${tag}-k` : null));
        const { rows, texts } = await leased([record(`${tag}-old`, "o-2", `${tag}-k`), record(`${tag}-d`, "o-2"), record(`${tag}-d`, "o-2"), record(`${tag}-e`, "o-2"), ...fresh]);
        const table = await ids(`${tag}-`);
        expect(rows.map((r) => r.record.messageId)).toEqual([`${tag}-d`, `${tag}-e`, ...fresh.map((r) => r.messageId)]);
        expect(rows.map((r) => r.id)).toEqual(rows.map((r) => table.get(r.record.messageId)));
        expect(rows.filter((r) => r.record.orderingKey !== null).map((r) => r.previousUnsent)).toEqual(
          fresh.filter((r) => r.orderingKey !== null).map(() => before.get(`${tag}-old`)));
        expect(texts.some((t) => t.includes("RETURNING"))).toBe(returning);
        expect(texts.some((t) => t.startsWith("SELECT id, message_id"))).toBe(!returning);
        // Leased: no claim takes them now, and the row that was there is as it was.
        const [due] = await admin.execute(
          "SELECT message_id FROM rabbit_inbox_outbox WHERE message_id LIKE ? AND available_at <= UTC_TIMESTAMP(6)", [`${tag}-%`]);
        expect((due as Array<{ message_id: Buffer }>).map((r) => r.message_id.toString())).toEqual([`${tag}-old`]);
      });

      it(`a message id that another transaction inserts meanwhile is skipped once that one commits (${how})`, async () => {
        const other = await mysql.createConnection(db.url);
        try {
          await other.query("START TRANSACTION");
          await other.execute("INSERT INTO rabbit_inbox_outbox (message_id, exchange, routing_key, body, properties) VALUES (?, 'x', '', 'theirs', '{}')",
            [Buffer.from(`${tag}-race-1`)]);
          const threadId = deferred<number>();
          const writing = leased([record(`${tag}-race-0`, "r-1"), record(`${tag}-race-1`, "r-1"), record(`${tag}-race-2`, "r-1")], threadId.resolve);
          await waitForLockWait(await threadId.promise);
          await other.query("COMMIT");
          const { rows } = await writing;
          expect(rows.map((r) => r.record.messageId)).toEqual([`${tag}-race-0`, `${tag}-race-2`]);
          const [theirs] = await admin.execute("SELECT body FROM rabbit_inbox_outbox WHERE message_id = ?", [Buffer.from(`${tag}-race-1`)]);
          expect((theirs as Array<{ body: Buffer }>)[0]!.body.toString()).toBe("theirs");
        } finally {
          await other.end();
        }
      });
    });
  });
});
