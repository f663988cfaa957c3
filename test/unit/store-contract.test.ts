import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { kyselyStore } from "../../src/adapters/kysely.js";
import { MysqlStore } from "../../src/store/mysql/index.js";
import { PostgresStore } from "../../src/store/postgres/index.js";
import { SqliteStore } from "../../src/store/sqlite/index.js";
import { hasOutboxRelay, isCompleteStore } from "../../src/core/store-contract/capabilities.js";
import { Kysely, PostgresDialect } from "kysely";

const unusedPgPool = { connect: () => Promise.reject(new Error("not used")), end: () => Promise.resolve(), on: () => undefined };
const unusedMysqlPool = { getConnection: () => Promise.reject(new Error("not used")), end: () => Promise.resolve() };

describe("the store contract's optional parts", () => {
  it("the three shipped stores offer every part: the consumer's, the relay's and the operator's", () => {
    const sqlite = new SqliteStore({ database: new Database(":memory:") });
    for (const store of [new PostgresStore({ pool: unusedPgPool }), new MysqlStore({ pool: unusedMysqlPool }), sqlite]) {
      expect({ dialect: store.dialect, complete: isCompleteStore(store) }).toEqual({ dialect: store.dialect, complete: true });
    }
    sqlite.database.close();
  });

  it("a store over a data layer offers the consumer's part only: no relay claim, no operations", () => {
    const store = kyselyStore(new Kysely<unknown>({ dialect: new PostgresDialect({ pool: unusedPgPool }) }));
    expect(hasOutboxRelay(store)).toBe(false);
    expect(isCompleteStore(store)).toBe(false);
    expect(typeof store.transaction).toBe("function");
  });
});
