import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { TransientStoreError } from "../../src/core/errors.js";
import type { QuarantineRecord } from "../../src/core/store-contract/store.js";
import { type SqliteDatabase, SqliteStore } from "../../src/store/sqlite/index.js";
import type { SqliteStatement } from "../../src/store/sqlite/driver.js";
import { type TestSqliteFile, createSqliteFile, openSqliteStore } from "../support/databases.js";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function quarantineRecord(eventId: string): QuarantineRecord {
  return {
    handler: "h", key: { tenant: "t", eventId }, reason: "invalid", detail: "bad", fingerprint: null, storedFingerprint: null,
    bodySha256: `sha-${eventId}`, body: Buffer.from(eventId), bodyTruncated: false, properties: "{}", queue: "q",
  };
}

/** A promise and whether it has settled yet, to observe a call that must still be waiting. */
function watched<T>(promise: Promise<T>): { promise: Promise<T>; settled: () => boolean } {
  let settled = false;
  void promise.then(() => { settled = true; }, () => { settled = true; });
  return { promise, settled: () => settled };
}

describe("SqliteStore: one connection, lent to one transaction or read at a time", () => {
  let file: TestSqliteFile;
  let store: SqliteStore;
  /** A second connection to the file: it sees only what was committed. */
  let observer: InstanceType<typeof Database>;
  /** Releases of held transactions: a failed assertion must not leave one holding the store. */
  let releases: Array<() => void>;

  beforeEach(async () => {
    file = await createSqliteFile();
    store = await openSqliteStore(file.file);
    await store.migrate();
    observer = new Database(file.file);
    releases = [];
  });

  afterEach(async () => {
    for (const release of releases) release();
    observer.close();
    await store.close();
    await file.remove();
  });

  const committedQuarantineRows = () => Number((observer.prepare("SELECT count(*) AS n FROM rabbit_inbox_quarantine").get() as { n: number }).n);

  /** Opens a transaction that has written its rows and holds the connection until `release` is called. */
  async function heldTransaction(write: Parameters<SqliteStore["transaction"]>[0], fail = false) {
    let release!: () => void;
    const held = new Promise<void>((resolve) => { release = resolve; });
    releases.push(release);
    let started!: () => void;
    const writing = new Promise<void>((resolve) => { started = resolve; });
    const done = store.transaction(async (tx) => {
      await write(tx);
      started();
      await held;
      if (fail) throw new Error("handler failed after its writes");
    });
    await writing;
    return { release, done };
  }

  it("listQuarantine issued during a transaction resolves only after it committed, and sees its row", async () => {
    const tx = await heldTransaction((t) => t.quarantine([quarantineRecord("e-1")]));
    const listed = watched(store.listQuarantine().then((rows) => ({ rows, committedWhenRead: committedQuarantineRows() })));
    await sleep(50);
    expect(listed.settled()).toBe(false);
    expect(committedQuarantineRows()).toBe(0);
    tx.release();
    await tx.done;
    const { rows, committedWhenRead } = await listed.promise;
    expect(committedWhenRead).toBe(1);
    expect(rows.map((r) => r.eventId)).toEqual(["e-1"]);
  });

  it("a read never sees the rows of a transaction that then rolls back", async () => {
    const tx = await heldTransaction((t) => t.quarantine([quarantineRecord("e-1")]), true);
    const listed = watched(store.listQuarantine());
    const counted = watched(store.countInbox("h"));
    await sleep(50);
    expect(listed.settled()).toBe(false);
    expect(counted.settled()).toBe(false);
    tx.release();
    await expect(tx.done).rejects.toThrow("handler failed after its writes");
    expect(await listed.promise).toEqual([]);
    expect(await counted.promise).toBe(0);
  });

  it("countInbox and the operations' reads wait for the transaction that claims the key", async () => {
    const ops = store.operations();
    const tx = await heldTransaction(async (t) => {
      expect(await t.claim("h", [{ key: { tenant: "t", eventId: "e-1" }, fingerprint: "f1" }])).toEqual([{ status: "claimed" }]);
    });
    const counted = watched(store.countInbox("h", { tenant: "t", eventId: "e-1" }));
    const stored = watched(ops.storedVersion("h", { tenant: "t", eventId: "e-1" }));
    await sleep(50);
    expect(counted.settled()).toBe(false);
    expect(stored.settled()).toBe(false);
    tx.release();
    await tx.done;
    expect(await counted.promise).toBe(1);
    expect((await stored.promise)?.fingerprint).toBe("f1");
  });

  it("an operator's write queues behind the open transaction instead of failing on the write lock", async () => {
    const ops = store.operations();
    const tx = await heldTransaction((t) => t.quarantine([quarantineRecord("e-1")]));
    const purged = watched(ops.purgeRedeliveryCounts(new Date()));
    await sleep(50);
    expect(purged.settled()).toBe(false);
    tx.release();
    await tx.done;
    expect(await purged.promise).toBe(0);
    expect(committedQuarantineRows()).toBe(1);
  });

  it("a claim whose row is neither inserted nor found fails as contention, to be retried", async () => {
    // A trigger that silently drops the insert: the INSERT reports no row, and there is none to read.
    store.database.exec(`CREATE TRIGGER drop_dedup BEFORE INSERT ON rabbit_inbox_dedup BEGIN SELECT RAISE(IGNORE); END`);
    const claim = store.transaction((tx) => tx.claim("h", [{ key: { tenant: "t", eventId: "e-1" }, fingerprint: "f1" }]));
    await expect(claim).rejects.toBeInstanceOf(TransientStoreError);
    await expect(claim).rejects.toMatchObject({ kind: "transient", message: expect.stringContaining("neither inserted nor found") as string });
    expect(store.database.inTransaction).toBe(false);
  });
});

describe("SqliteStore: statements are prepared once per SQL text", () => {
  it("a second batch claim and a second read prepare nothing new", async () => {
    const file = await createSqliteFile();
    const real = new Database(file.file);
    const prepared = new Map<string, number>();
    const database: SqliteDatabase = {
      prepare: (sql: string): SqliteStatement => {
        prepared.set(sql, (prepared.get(sql) ?? 0) + 1);
        return real.prepare(sql);
      },
      exec: (sql: string) => real.exec(sql),
      pragma: (sql: string) => real.pragma(sql),
      close: () => real.close(),
      get inTransaction() { return real.inTransaction; },
    };
    const store = new SqliteStore({ database });
    try {
      await store.migrate();
      const claims = (from: number) => Array.from({ length: 50 }, (_, i) => ({ key: { tenant: "t", eventId: `e-${from + i}` }, fingerprint: "f" }));
      await store.transaction((tx) => tx.claim("h", claims(0)));
      await store.countInbox("h");
      const afterFirst = new Map(prepared);
      await store.transaction((tx) => tx.claim("h", claims(50)));
      expect(await store.countInbox("h")).toBe(100);
      expect(prepared).toEqual(afterFirst);
      expect([...prepared.values()].every((n) => n === 1)).toBe(true);
    } finally {
      await store.close();
      real.close();
      await file.remove();
    }
  });
});
