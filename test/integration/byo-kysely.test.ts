/** Bring your own transaction with Kysely 0.28 (PostgresDialect on a pg Pool). */
import { CamelCasePlugin, Kysely, PostgresDialect, type Transaction, sql } from "kysely";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { fromKysely, kyselyStore } from "../../src/adapters/kysely.js";
import { InboxPipeline } from "../../src/core/pipeline.js";
import { silentLogger } from "../../src/core/logger.js";
import { describeByoTransaction } from "../support/byo-transaction.js";
import { createPgSchema } from "../support/databases.js";
import { incomingMessage } from "../support/messages.js";

interface Database {
  byo_accounts: { id: string; balance_cents: string | number | bigint };
}

function openKysely(url: string, plugins: ConstructorParameters<typeof CamelCasePlugin>[] = []): Kysely<Database> {
  const pool = new pg.Pool({ connectionString: url, max: 5 });
  // A session terminated while a client is checked out emits 'error' on that client; pg-pool
  // listens only while it is idle, so without this the process would crash (Kysely adds none).
  pool.on("connect", (client) => client.on("error", () => undefined));
  return new Kysely<Database>({ dialect: new PostgresDialect({ pool }), plugins: plugins.map((options) => new CamelCasePlugin(...options)) });
}

async function credit(tx: Transaction<Database>, account: string, delta: number): Promise<void> {
  await tx.insertInto("byo_accounts").values({ id: account, balance_cents: delta })
    .onConflict((oc) => oc.column("id").doUpdateSet({ balance_cents: (eb) => eb("byo_accounts.balance_cents", "+", delta) }))
    .execute();
}

describeByoTransaction<Transaction<Database>>("kysely", (url) => {
  const db = openKysely(url);
  return Promise.resolve({ store: kyselyStore(db), executor: fromKysely(db), credit, close: () => db.destroy() });
});

describe("kysely adapter", () => {
  it("reads the inbox's own rows unchanged under a CamelCasePlugin, while the handler's Transaction keeps the plugin", async () => {
    const schema = await createPgSchema();
    const db = openKysely(schema.url, [[]]);
    try {
      const store = kyselyStore(db);
      await store.migrate();
      await sql`CREATE TABLE byo_accounts (id text PRIMARY KEY, balance_cents bigint NOT NULL)`.execute(db);
      const seen: string[] = [];
      const pipeline = new InboxPipeline<{ account: string }, Transaction<Database>>({
        store, logger: silentLogger,
        handler: {
          name: "camel",
          async handle(event, ctx) {
            const row = await sql<Record<string, unknown>>`SELECT 1 AS some_column`.execute(ctx.tx);
            seen.push(...Object.keys(row.rows[0]!));
            await credit(ctx.tx, event.account, 5);
          },
        },
      });
      await pipeline.process([incomingMessage({ tenant: "t1", event_id: "e-1", account: "a" })]);
      const [conflict] = await pipeline.process([incomingMessage({ tenant: "t1", event_id: "e-1", account: "b" })]);
      expect(conflict!.kind === "quarantined" && conflict!.reason).toBe("conflict");
      expect(seen).toEqual(["someColumn"]);
      const [entry] = await store.listQuarantine({ handler: "camel" });
      expect(entry).toMatchObject({ eventId: "e-1", reason: "conflict" });
    } finally {
      await db.destroy();
      await schema.drop();
    }
  });
});
