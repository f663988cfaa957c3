/** PostgreSQL-specific behaviour of the store that the shared conformance suite cannot express. */
import { afterEach, describe, expect, it } from "vitest";
import { InboxPipeline, type InboxHandler, silentLogger } from "../../src/index.js";
import type { PgClient, PostgresStore } from "../../src/store/postgres/index.js";
import { createPgSchema, openPostgresStore } from "../support/databases.js";
import { incomingMessage } from "../support/messages.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

async function storeWithEffects(): Promise<PostgresStore> {
  const schema = await createPgSchema();
  const store = await openPostgresStore(schema.url);
  cleanups.push(() => schema.drop(), () => store.close());
  await store.migrate();
  await store.transaction(async (tx) => { await tx.handle.query("CREATE TABLE effects (event_id text NOT NULL)"); });
  return store;
}

describe("PostgresStore", () => {
  it("never reports applied when COMMIT turned into ROLLBACK because the handler swallowed an SQL error", async () => {
    const store = await storeWithEffects();
    const handler: InboxHandler<{ event_id: string }, PgClient> = {
      name: "swallow",
      async handle(event, ctx) {
        await ctx.tx.query("INSERT INTO effects (event_id) VALUES ($1)", [event.event_id]);
        try {
          await ctx.tx.query("SELECT 1 / 0");
        } catch {
          // The bug being guarded against: the transaction is now aborted, and COMMIT will say ROLLBACK.
        }
      },
    };
    const pipeline = new InboxPipeline({ store, handler, logger: silentLogger, retry: { maxAttempts: 2, baseDelayMs: 1 } });
    const [outcome] = await pipeline.process([incomingMessage({ tenant: "t1", event_id: "e-1" })]);
    expect(outcome!.kind).toBe("quarantined");
    expect(outcome!.kind === "quarantined" && outcome!.reason).toBe("retries_exhausted");
    expect(outcome!.kind === "quarantined" && outcome!.detail).toContain("aborted");
    expect(await store.countInbox("swallow")).toBe(0);
    const effects = await store.transaction(async (tx) => (await tx.handle.query("SELECT count(*)::int AS n FROM effects")).rows[0]!.n);
    expect(effects).toBe(0);
  });
});
