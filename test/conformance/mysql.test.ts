import mysql from "mysql2/promise";
import { describe, expect, it } from "vitest";
import { InboxConfigError, InvalidEventError } from "../../src/core/errors.js";
import type { InboxClaim } from "../../src/core/store-contract/store.js";
import { MYSQL_MAX_FINGERPRINT_BYTES, MYSQL_MAX_HANDLER_BYTES, MYSQL_MAX_ID_BYTES } from "../../src/store/mysql/migrations.js";
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

describe("mysql claim limits", () => {
  // The columns are sized in bytes, and MySQL without strict sql_mode cuts a longer value
  // silently: two events would then share a key. The claim refuses what would not fit.
  it("claims a handler name, ids and a fingerprint at the columns' sizes in UTF-8 bytes, refuses one byte more, and refuses a key twice in one call", async () => {
    const db = await createMysqlDatabase();
    const store = await MysqlStore.connect(db.url);
    try {
      await store.migrate();
      const claim = (handler: string, tenant: string, eventId: string, fingerprint = "f") =>
        store.transaction((tx) => tx.claim(handler, [{ key: { tenant, eventId }, fingerprint }]));
      const refusal = (attempt: Promise<unknown>) => attempt.then(() => null, (error: unknown) => error);
      // Multi-byte characters: the limits count bytes, not characters.
      const handler = "é".repeat((MYSQL_MAX_HANDLER_BYTES - 1) / 2) + "h";
      const id = "😀".repeat(MYSQL_MAX_ID_BYTES / 4);
      const fingerprint = "f".repeat(MYSQL_MAX_FINGERPRINT_BYTES);
      expect(Buffer.byteLength(handler)).toBe(MYSQL_MAX_HANDLER_BYTES);
      expect(Buffer.byteLength(id)).toBe(MYSQL_MAX_ID_BYTES);

      expect(await claim(handler, id, id, fingerprint)).toEqual([{ status: "claimed" }]);
      expect(await claim(handler, id, id, fingerprint)).toEqual([{ status: "exists", fingerprint }]);
      // The message names the limit: it is what the operator reads in the log or the quarantine.
      const idTooLong = `tenant or event id longer than ${MYSQL_MAX_ID_BYTES} UTF-8 bytes, the MySQL store's limit`;
      expect(await refusal(claim(`${handler}x`, "t1", "e-1"))).toEqual(
        expect.objectContaining({ constructor: InboxConfigError, message: `handler name is ${MYSQL_MAX_HANDLER_BYTES + 1} UTF-8 bytes; the MySQL store allows ${MYSQL_MAX_HANDLER_BYTES}` }));
      expect(await refusal(claim("h", `${id}x`, "e-1"))).toEqual(expect.objectContaining({ constructor: InvalidEventError, message: idTooLong }));
      expect(await refusal(claim("h", "t1", `${id}x`))).toEqual(expect.objectContaining({ constructor: InvalidEventError, message: idTooLong }));
      expect(await refusal(claim("h", "t1", "e-1", `${fingerprint}x`))).toEqual(
        expect.objectContaining({ constructor: InboxConfigError, message: `payload fingerprint longer than ${MYSQL_MAX_FINGERPRINT_BYTES} UTF-8 bytes` }));
      const twice: InboxClaim[] = [{ key: { tenant: "t1", eventId: "e-1" }, fingerprint: "f" }, { key: { tenant: "t1", eventId: "e-1" }, fingerprint: "f" }];
      expect(await refusal(store.transaction((tx) => tx.claim("h", twice)))).toEqual(
        expect.objectContaining({ constructor: InboxConfigError, message: "claim keys must be distinct within one call" }));
      // Nothing refused was claimed, and the refusals left the store usable.
      expect(await store.countInbox("h")).toBe(0);
      expect(await store.countInbox(`${handler}x`)).toBe(0);
      expect(await claim("h", "t1", "e-1")).toEqual([{ status: "claimed" }]);
      expect(await store.countInbox("h")).toBe(1);
      expect(await store.countInbox(handler, { tenant: id, eventId: id })).toBe(1);
    } finally {
      await store.close();
      await db.drop();
    }
  });
});
