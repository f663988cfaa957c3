/** Bring your own transaction with Knex (client `pg`). */
import knexFactory, { type Knex } from "knex";
import { describe, expect, it } from "vitest";
import { KNEX_INBOX_QUERY_CONTEXT, fromKnex, knexStore } from "../../src/adapters/knex.js";
import { InboxPipeline } from "../../src/core/pipeline.js";
import { silentLogger } from "../../src/core/logger.js";
import { describeByoTransaction } from "../support/byo-transaction.js";
import { createPgSchema } from "../support/databases.js";
import { incomingMessage } from "../support/messages.js";

function openKnex(url: string, config: Partial<Knex.Config> = {}): Knex {
  // Knex logs a lost connection through its own logger; the tests terminate sessions on purpose.
  const quiet = { warn: () => undefined, error: () => undefined, debug: () => undefined, deprecate: () => undefined };
  return knexFactory({ client: "pg", connection: url, pool: { min: 0, max: 5 }, log: quiet, ...config });
}

async function credit(trx: Knex.Transaction, account: string, delta: number): Promise<void> {
  await trx("byo_accounts").insert({ id: account, balance_cents: delta })
    .onConflict("id").merge({ balance_cents: trx.raw("byo_accounts.balance_cents + ?", [delta]) });
}

describeByoTransaction<Knex.Transaction>("knex", (url) => {
  const knex = openKnex(url);
  return Promise.resolve({ store: knexStore(knex), executor: fromKnex(knex), credit, close: () => knex.destroy() });
});

describe("knex adapter", () => {
  it("a postProcessResponse that renames columns leaves the inbox's own statements alone when it honours KNEX_INBOX_QUERY_CONTEXT", async () => {
    const schema = await createPgSchema();
    const camel = (key: string) => key.replace(/_(\w)/g, (_m, c: string) => c.toUpperCase());
    const contexts: unknown[] = [];
    const knex = openKnex(schema.url, {
      postProcessResponse: (result: unknown, queryContext: unknown) => {
        contexts.push(queryContext);
        if ((queryContext as typeof KNEX_INBOX_QUERY_CONTEXT | undefined)?.rabbitInbox) return result;
        const rows = (result as { rows?: Array<Record<string, unknown>> }).rows;
        return rows ? { ...(result as object), rows: rows.map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [camel(k), v]))) } : result;
      },
    });
    try {
      const store = knexStore(knex);
      await store.migrate();
      await knex.raw("CREATE TABLE byo_accounts (id text PRIMARY KEY, balance_cents bigint NOT NULL)");
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
      await schema.drop();
    }
  });
});
