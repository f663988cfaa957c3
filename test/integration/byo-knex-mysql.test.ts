/** Bring your own transaction with Knex on MySQL / MariaDB (client `mysql2`). */
import knexFactory, { type Knex } from "knex";
import { describe, expect, it } from "vitest";
import { KNEX_INBOX_QUERY_CONTEXT, fromKnexMysql, knexStore } from "../../src/adapters/knex.js";
import { InboxConfigError } from "../../src/index.js";
import { InboxPipeline } from "../../src/core/pipeline.js";
import { silentLogger } from "../../src/core/logger.js";
import { describeByoTransactionMysql } from "../support/byo-transaction-mysql.js";
import { createMysqlDatabase, mysqlUrl, pgUrl } from "../support/databases.js";
import { incomingMessage } from "../support/messages.js";

function openKnex(url: string, config: Partial<Knex.Config> = {}): Knex {
  // Knex logs a lost connection through its own logger; the tests kill sessions on purpose.
  const quiet = { warn: () => undefined, error: () => undefined, debug: () => undefined, deprecate: () => undefined };
  return knexFactory({ client: "mysql2", connection: url, pool: { min: 0, max: 5 }, log: quiet, ...config });
}

async function credit(trx: Knex.Transaction, account: string, delta: number): Promise<void> {
  await trx("byo_accounts").insert({ id: account, balance_cents: delta })
    .onConflict("id").merge({ balance_cents: trx.raw("balance_cents + ?", [delta]) });
}

describeByoTransactionMysql<Knex.Transaction>("knex", (url) => {
  const knex = openKnex(url);
  return Promise.resolve({ store: knexStore(knex), executor: fromKnexMysql(knex), credit, close: () => knex.destroy() });
});

describe("knex adapter on MySQL", () => {
  it("tells the mysql2 client from the pg client by its dialect", async () => {
    const onMysql = openKnex(mysqlUrl);
    const onPg = knexFactory({ client: "pg", connection: pgUrl });
    try {
      expect(knexStore(onMysql).dialect).toBe("mysql");
      expect(knexStore(onPg).dialect).toBe("postgres");
      expect(() => knexStore(onMysql, { schema: "s" })).toThrow(InboxConfigError);
    } finally {
      await onMysql.destroy();
      await onPg.destroy();
    }
  });

  it("a postProcessResponse that renames columns leaves the inbox's own statements alone when it honours KNEX_INBOX_QUERY_CONTEXT", async () => {
    const database = await createMysqlDatabase();
    const camel = (key: string) => key.replace(/_(\w)/g, (_m, c: string) => c.toUpperCase());
    const contexts: unknown[] = [];
    const knex = openKnex(database.url, {
      postProcessResponse: (result: unknown, queryContext: unknown) => {
        contexts.push(queryContext);
        if ((queryContext as typeof KNEX_INBOX_QUERY_CONTEXT | undefined)?.rabbitInbox) return result;
        const rows = Array.isArray(result) && Array.isArray(result[0]) ? (result[0] as Array<Record<string, unknown>>) : undefined;
        return rows ? [rows.map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [camel(k), v]))), (result as unknown[])[1]] : result;
      },
    });
    try {
      const store = knexStore(knex);
      await store.migrate();
      await knex.raw("CREATE TABLE byo_accounts (id VARCHAR(64) PRIMARY KEY, balance_cents BIGINT NOT NULL)");
      const pipeline = new InboxPipeline<{ account: string }, Knex.Transaction>({
        store, logger: silentLogger,
        handler: { name: "camel", handle: (event, ctx) => credit(ctx.tx, event.account, 5) },
      });
      await pipeline.process([incomingMessage({ tenant: "t1", event_id: "e-1", account: "a" })]);
      const [conflict] = await pipeline.process([incomingMessage({ tenant: "t1", event_id: "e-1", account: "b" })]);
      expect(conflict!.kind === "quarantined" && conflict!.reason).toBe("conflict");
      expect((await store.listQuarantine({ handler: "camel" }))[0]).toMatchObject({ eventId: "e-1", reason: "conflict" });
      expect(contexts).toContainEqual(KNEX_INBOX_QUERY_CONTEXT);
    } finally {
      await knex.destroy();
      await database.drop();
    }
  });
});
