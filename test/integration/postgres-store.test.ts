/** PostgreSQL-specific behaviour of the store that the shared conformance suite cannot express. */
import type pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { InboxPipeline } from "../../src/core/pipeline.js";
import type { InboxHandler } from "../../src/index.js";
import type { Outcome } from "../../src/core/outcome.js";
import { silentLogger } from "../../src/core/logger.js";
import { type PgClient, PostgresStore } from "../../src/store/postgres/index.js";
import { createPgSchema, openPostgresStore } from "../support/databases.js";
import { incomingMessage } from "../support/messages.js";
import { type SentQuery, recordingPgPool } from "../support/recording-pg-pool.js";
import { decodeBinaryArray } from "../support/binary-array.js";
import { waitUntil } from "../../examples/ledger/driver/wait-until.js";

/** What the store sends to open a transaction: BEGIN and the batch claim's savepoint, no value in it. */
const BEGIN = "BEGIN; SAVEPOINT rabbit_inbox_claim";

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

/** A store on a pool whose clients record every query they are sent: text, statement name and parameters. */
async function recordingStore(poolSize = 4): Promise<{ store: PostgresStore; sent: SentQuery[]; pool: pg.Pool }> {
  const schema = await createPgSchema();
  const { pool, sent } = recordingPgPool(schema.url, poolSize);
  const store = new PostgresStore({ pool });
  cleanups.push(() => schema.drop(), () => pool.end());
  await store.migrate();
  await store.transaction(async (tx) => { await tx.handle.query("CREATE TABLE effects (event_id text NOT NULL)"); });
  sent.length = 0;
  return { store, sent, pool };
}

const effectsHandler: InboxHandler<{ event_id: string }, PgClient> = {
  name: "fast",
  async handleBatch(items, tx) {
    await tx.query("INSERT INTO effects (event_id) SELECT * FROM unnest($1::text[])", [items.map((i) => i.event.event_id)]);
  },
};

async function effectsOf(pool: pg.Pool): Promise<string[]> {
  return (await pool.query("SELECT event_id FROM effects ORDER BY event_id")).rows.map((r: { event_id: string }) => r.event_id);
}

const kinds = (outcomes: Outcome[]) => outcomes.map((o) => (o.kind === "quarantined" ? `quarantined:${o.reason}` : o.kind));

describe("PostgresStore strict claim: a named statement, its ids as parameters", () => {
  it("prepares the claim once per pooled client, then binds each transaction's ids after an answered BEGIN; new, duplicate and conflict settle as before", async () => {
    // One client, so that every transaction runs on the session that prepared the claim.
    const { store, sent, pool } = await recordingStore(1);
    const pipeline = new InboxPipeline({ store, handler: effectsHandler, logger: silentLogger });
    const one = async (body: Record<string, unknown>) => kinds(await pipeline.process([incomingMessage(body)]));
    expect(await one({ tenant: "t1", event_id: "a" })).toEqual(["applied"]);
    expect(await one({ tenant: "t1", event_id: "b" })).toEqual(["applied"]);
    expect(await one({ tenant: "t1", event_id: "a" })).toEqual(["duplicate"]);
    expect(await one({ tenant: "t1", event_id: "b", v: 2 })).toEqual(["quarantined:conflict"]);
    expect(await one({ tenant: "t1", event_id: "it's" })).toEqual(["applied"]);
    expect(await effectsOf(pool)).toEqual(["a", "b", "it's"]);
    expect(await store.countInbox("fast")).toBe(3);
    const claims = sent.flatMap((s, i) => (s.text.startsWith("INSERT INTO rabbit_inbox_dedup") ? [{ ...s, before: sent[i - 1]?.text }] : []));
    expect(claims.map((c) => [c.name, c.before, c.values.slice(0, 3)])).toEqual(["a", "b", "a", "b", "it's"].map((id) => ["ri_claim_one", BEGIN, ["fast", "t1", id]]));
    expect(sent.filter((s) => s.text.startsWith("BEGIN"))).toEqual(Array.from({ length: 5 }, () => ({ text: BEGIN, name: undefined, values: [] })));
    // Prepared by the server once, on the one session (a protocol-level statement, not SQL PREPARE).
    const prepared = await store.transaction(async (tx) => (await tx.handle.query("SELECT name, from_sql FROM pg_prepared_statements WHERE name = 'ri_claim_one'")).rows);
    expect(prepared).toEqual([{ name: "ri_claim_one", from_sql: false }]);
  });
});

describe("PostgresStore batch claim: plain INSERT in a savepoint, ON CONFLICT after a unique violation", () => {
  it("claims a batch of new keys with one plain INSERT in a savepoint, the keys as array parameters", async () => {
    const { store, sent, pool } = await recordingStore();
    const pipeline = new InboxPipeline({ store, handler: effectsHandler, logger: silentLogger });
    const outcomes = await pipeline.process(["a", "b", "c"].map((id) => incomingMessage({ tenant: "t1", event_id: id })));
    expect(kinds(outcomes)).toEqual(["applied", "applied", "applied"]);
    expect(await effectsOf(pool)).toEqual(["a", "b", "c"]);
    // The savepoint came with BEGIN, in its round trip: no statement of its own.
    expect(sent.slice(0, 2).map((s) => s.text.split("\n")[0])).toEqual([BEGIN, "INSERT INTO rabbit_inbox_dedup (tenant, handler, event_id, fingerprint)"]);
    expect(sent.filter((s) => s.text.startsWith("SAVEPOINT"))).toEqual([]);
    const claims = sent.filter((s) => s.text.includes("rabbit_inbox_dedup"));
    expect(claims).toHaveLength(1);
    expect(claims[0]!.text).not.toContain("ON CONFLICT");
    expect(claims[0]!.name).toBe("ri_claim_all");
    // In PostgreSQL's binary array format: one Buffer per array, no literal to quote or parse.
    expect(claims[0]!.values.slice(0, 3).map((v) => (Buffer.isBuffer(v) ? decodeBinaryArray(v) : v))).toEqual(["fast", ["t1", "t1", "t1"], ["a", "b", "c"]]);
    expect(claims[0]!.values.slice(1).every((v) => Buffer.isBuffer(v))).toBe(true);
    expect(await store.countInbox("fast")).toBe(3);
  });

  it("falls back to ON CONFLICT when a key exists: duplicates, conflicts and new events settle as if it had run first", async () => {
    const { store, sent, pool } = await recordingStore();
    const pipeline = new InboxPipeline({ store, handler: effectsHandler, logger: silentLogger });
    await pipeline.process([incomingMessage({ tenant: "t1", event_id: "dup" }), incomingMessage({ tenant: "t1", event_id: "clash", v: 1 })]);
    sent.length = 0;
    const outcomes = await pipeline.process([
      incomingMessage({ tenant: "t1", event_id: "new-1" }),
      incomingMessage({ tenant: "t1", event_id: "dup" }),
      incomingMessage({ tenant: "t1", event_id: "clash", v: 2 }),
      incomingMessage({ tenant: "t1", event_id: "new-2" }),
    ]);
    expect(kinds(outcomes)).toEqual(["applied", "duplicate", "quarantined:conflict", "applied"]);
    expect(await effectsOf(pool)).toEqual(["clash", "dup", "new-1", "new-2"]);
    expect(sent.some((s) => s.text.startsWith("ROLLBACK TO SAVEPOINT rabbit_inbox_claim"))).toBe(true);
    expect(sent.some((s) => s.text.includes("ON CONFLICT DO NOTHING"))).toBe(true);
    expect(await store.countInbox("fast")).toBe(4);
  });

  it("waits for a transaction inserting the same key, then sees its row (committed) or takes the key (rolled back)", async () => {
    for (const ending of ["commit", "rollback"] as const) {
      const { store, pool } = await recordingStore();
      const pipeline = new InboxPipeline({ store, handler: effectsHandler, logger: silentLogger });
      const holder = await pool.connect();
      try {
        await holder.query("BEGIN");
        // The same row a pipeline run would have written for {"event_id":"held","tenant":"t1"}.
        const [first] = await new InboxPipeline({ store, handler: { ...effectsHandler, name: "probe" }, logger: silentLogger })
          .process([incomingMessage({ tenant: "t1", event_id: "held" })]);
        expect(first!.kind).toBe("applied");
        const { rows } = await pool.query("SELECT fingerprint FROM rabbit_inbox_dedup WHERE handler = 'probe'");
        await holder.query("INSERT INTO rabbit_inbox_dedup (tenant, handler, event_id, fingerprint) VALUES ('t1', 'fast', 'held', $1)", [rows[0]!.fingerprint]);
        const running = pipeline.process([incomingMessage({ tenant: "t1", event_id: "held" }), incomingMessage({ tenant: "t1", event_id: "other" })]);
        // The batch's INSERT is now waiting on the held key.
        await waitFor(async () => (await pool.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO rabbit_inbox_dedup%'")).rows[0]!.n === 1);
        await holder.query(ending === "commit" ? "COMMIT" : "ROLLBACK");
        const outcomes = await running;
        expect(kinds(outcomes)).toEqual(ending === "commit" ? ["duplicate", "applied"] : ["applied", "applied"]);
        expect(await effectsOf(pool)).toEqual(ending === "commit" ? ["held", "other"] : ["held", "held", "other"]);
        expect(await store.countInbox("fast")).toBe(2);
      } finally {
        holder.release();
      }
    }
  });
});

/** Polls `condition` every 20 ms; fails after `timeoutMs`. */
const waitFor = (condition: () => Promise<boolean>, timeoutMs = 10_000) =>
  waitUntil(async () => ((await condition()) ? true : undefined), "a condition of this test", { timeoutMs, intervalMs: 20 });
