import { existsSync } from "node:fs";
import { dirname } from "node:path";
import { describe, expect, it } from "vitest";
import type { SqliteDatabase, SqliteStore } from "../../src/store/sqlite/index.js";
import { createSqliteFile, openSqliteStore } from "../support/databases.js";
import { describeStoreConformance } from "./store-conformance.js";

describeStoreConformance<SqliteDatabase>(
  "sqlite",
  async () => {
    const file = await createSqliteFile();
    const stores: SqliteStore[] = [];
    const open = async () => {
      // Every store of a test lives in this one process, where a writer waiting for the file
      // lock blocks the event loop and so the lock holder too: keep the wait short and let
      // the pipeline's retries do the waiting.
      const store = await openSqliteStore(file.file, { busyTimeoutMs: 50 });
      stores.push(store);
      return store;
    };
    const store = await open();
    return {
      store,
      openPeer: open,
      createBusinessTable: () => {
        store.database.exec("CREATE TABLE conformance_counters (account TEXT PRIMARY KEY, value INTEGER NOT NULL CHECK (value >= 0))");
        return Promise.resolve();
      },
      cleanup: async () => {
        for (const s of stores) await s.close();
        await file.remove();
      },
    };
  },
  {
    concurrentStores: 2,
    rowLocks: false,
    business: {
      add: (db, account, delta) => {
        db.prepare(
          `INSERT INTO conformance_counters (account, value) VALUES (?, ?)
           ON CONFLICT (account) DO UPDATE SET value = conformance_counters.value + excluded.value`,
        ).run(account, delta);
        return Promise.resolve();
      },
      read: (db, account) => {
        const row = db.prepare("SELECT value FROM conformance_counters WHERE account = ?").get(account) as { value: number } | undefined;
        return Promise.resolve(row ? Number(row.value) : null);
      },
      count: (db, sql) => Promise.resolve(Number((db.prepare(sql).get() as { n: number }).n)),
    },
  },
);

describe("sqlite test harness", () => {
  it("each test file lives in its own temporary directory, removed with its WAL files", async () => {
    const a = await createSqliteFile();
    const b = await createSqliteFile();
    expect(dirname(a.file)).not.toBe(dirname(b.file));
    const store = await openSqliteStore(a.file);
    await store.migrate();
    await store.close();
    expect(existsSync(a.file)).toBe(true);
    await a.remove();
    await b.remove();
    expect(existsSync(dirname(a.file))).toBe(false);
    expect(existsSync(`${a.file}-wal`)).toBe(false);
  });
});
