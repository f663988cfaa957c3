/**
 * What `openStore(url)` returns goes to an InboxConsumer (or a relay) as it is, without a cast:
 * its type is the union of the three stores, and also a Store whose transaction handle is the
 * union of their handles, so a handler either narrows `ctx.tx` by the store's dialect or treats
 * it as any of the three. Before, the union of stores had no Store<Tx> for the consumer to infer
 * and `tsc` refused the call ("UrlStore is not assignable to Store<PgClient>"). This file is its
 * own test: it is type-checked with the rest (`npx tsc --noEmit -p .`), and the pack check
 * compiles the same call against the packed package.
 */
import { describe, expect, expectTypeOf, it } from "vitest";
import { InboxConsumer, OutboxRelay, type UrlStore, openStore } from "../../src/index.js";
import type { PgClient } from "../../src/store/postgres/index.js";
import type { MysqlConnection } from "../../src/store/mysql/index.js";
import type { SqliteDatabase } from "../../src/store/sqlite/index.js";

describe("openStore's type", () => {
  it("is given to InboxConsumer and OutboxRelay as it is", () => {
    const consume = (store: UrlStore) => new InboxConsumer({
      url: "amqp://127.0.0.1:1", queue: "q", store,
      handler: {
        name: "h",
        handle(_event, ctx) {
          expectTypeOf(ctx.tx).toEqualTypeOf<PgClient | MysqlConnection | SqliteDatabase>();
          return Promise.resolve();
        },
      },
    });
    const relay = (store: UrlStore) => new OutboxRelay({ url: "amqp://127.0.0.1:1", store });
    expectTypeOf(openStore).returns.resolves.toEqualTypeOf<UrlStore>();
    expect([typeof consume, typeof relay]).toEqual(["function", "function"]);
  });

  it("still narrows to one store by its dialect", () => {
    const narrow = (store: UrlStore) => {
      if (store.dialect === "postgres") return store.transaction((tx) => tx.handle.query("SELECT 1"));
      if (store.dialect === "mysql") return store.transaction((tx) => tx.handle.query("SELECT 1"));
      return store.transaction((tx) => Promise.resolve(tx.handle.prepare("SELECT 1").get()));
    };
    expect(typeof narrow).toBe("function");
  });
});
