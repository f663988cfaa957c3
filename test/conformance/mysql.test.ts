import mysql from "mysql2/promise";
import { describe, expect, it } from "vitest";
import { type MysqlConnection, MysqlStore } from "../../src/store/mysql/index.js";
import { createMysqlDatabase, mysqlUrl } from "../support/databases.js";
import { describeStoreConformance } from "./store-conformance.js";

type Rows = Array<Record<string, unknown>>;

const rowsOf = (result: [unknown, unknown]): Rows => result[0] as Rows;

describeStoreConformance<MysqlConnection>(
  "mysql",
  async () => {
    const db = await createMysqlDatabase();
    const stores: MysqlStore[] = [];
    const open = async () => {
      const store = await MysqlStore.connect(db.url);
      stores.push(store);
      return store;
    };
    const store = await open();
    return {
      store,
      openPeer: open,
      // DDL commits implicitly on MySQL: on a connection of its own, never in an inbox transaction.
      // A binary collation, so that account names compare exactly as on the other databases.
      createBusinessTable: async () => {
        const connection = await mysql.createConnection(db.url);
        try {
          await connection.query(
            `CREATE TABLE conformance_counters (
               account VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PRIMARY KEY,
               value BIGINT NOT NULL,
               CHECK (value >= 0)
             ) ENGINE=InnoDB`,
          );
        } finally {
          await connection.end();
        }
      },
      cleanup: async () => {
        for (const s of stores) await s.close();
        await db.drop();
      },
    };
  },
  {
    concurrentStores: 5,
    rowLocks: true,
    business: {
      add: async (c, account, delta) => {
        await c.execute(
          `INSERT INTO conformance_counters (account, value) VALUES (?, ?)
           ON DUPLICATE KEY UPDATE value = value + VALUES(value)`,
          [account, delta],
        );
      },
      read: async (c, account) => {
        const rows = rowsOf(await c.execute("SELECT CAST(value AS CHAR) AS value FROM conformance_counters WHERE account = ?", [account]));
        return rows.length === 0 ? null : Number(rows[0]!.value);
      },
      count: async (c, sql) => Number(rowsOf(await c.query(sql))[0]!.n),
    },
  },
);

describe("mysql test harness", () => {
  it("each test gets its own database, dropped afterwards; the store's tables land in it", async () => {
    const db = await createMysqlDatabase();
    try {
      expect(new URL(db.url).pathname).toBe(`/${db.database}`);
      const store = await MysqlStore.connect(db.url);
      try {
        await store.migrate();
      } finally {
        await store.close();
      }
      const admin = await mysql.createConnection(mysqlUrl);
      try {
        const [rows] = await admin.execute(
          "SELECT table_name AS t FROM information_schema.tables WHERE table_schema = ? ORDER BY table_name", [db.database],
        );
        expect((rows as Rows).map((r) => r.t)).toEqual(expect.arrayContaining(["rabbit_inbox_dedup", "rabbit_inbox_quarantine"]));
      } finally {
        await admin.end();
      }
    } finally {
      await db.drop();
    }
    const check = await mysql.createConnection(mysqlUrl);
    try {
      const [rows] = await check.execute("SELECT 1 FROM information_schema.schemata WHERE schema_name = ?", [db.database]);
      expect(rows as Rows).toHaveLength(0);
    } finally {
      await check.end();
    }
  });
});
