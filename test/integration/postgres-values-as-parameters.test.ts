/**
 * No value taken from a message ever appears in the SQL text PostgresStore sends: tenants, event
 * ids, fingerprints and bodies travel as bind parameters of the extended protocol, on every path
 * (the strict claim, the batch claim's savepoint path and its ON CONFLICT fallback, the
 * redelivery count, a quarantine). The pool's clients record every query they are sent, text and
 * parameters apart; the ids are made of what an SQL lexer reads specially, each carrying a marker
 * that no statement of the library's own could contain.
 */
import { randomBytes, randomInt } from "node:crypto";
import type pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import type { LedgerEvent } from "../../examples/ledger/events.js";
import { ledgerHandler } from "../../examples/ledger/ledger-handler.js";
import { postgresLedgerSchema, postgresLedgerSql } from "../../examples/ledger/ledger-postgres.js";
import { InboxPipeline } from "../../src/core/pipeline.js";
import type { Outcome } from "../../src/core/outcome.js";
import { silentLogger } from "../../src/core/logger.js";
import { type PgClient, PostgresStore } from "../../src/store/postgres/index.js";
import { createPgSchema } from "../support/databases.js";
import { incomingMessage } from "../support/messages.js";
import { type SentQuery, recordingPgPool } from "../support/recording-pg-pool.js";
import { parameterElements } from "../support/binary-array.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

/** A store on a pool whose every client (the store's transactions and reads alike) records what it is sent. */
async function recordingStore(): Promise<{ store: PostgresStore; sent: SentQuery[]; pool: pg.Pool }> {
  const schema = await createPgSchema();
  const { pool, sent } = recordingPgPool(schema.url, 4);
  const store = new PostgresStore({ pool });
  cleanups.push(() => schema.drop(), () => pool.end());
  await store.migrate();
  await pool.query(postgresLedgerSchema);
  sent.length = 0;
  return { store, sent, pool };
}

/** Every string a query carried as a parameter, array elements included (binary arrays decoded). */
function parameterStrings(sent: readonly SentQuery[]): Set<string> {
  const strings = new Set<string>();
  for (const { values } of sent) {
    for (const value of values) {
      for (const v of parameterElements(value)) if (typeof v === "string") strings.add(v);
    }
  }
  return strings;
}

/** Text an SQL lexer reads specially; ids may not hold control characters or start or end with white space. */
const HOSTILE = [
  "'", "''", "x'); DROP TABLE ledger_accounts; --", '"', '""', "\\", "\\'", "'\\", "$1", "$2::text", "$$", "$tag$", "$0",
  "--", "/*", "*/", "/* /*", ";", "E'", "e'", "U&'", "{", "}", "{}", '{"a","b"}', ",", "NULL", "-1", "5-", "%", "_",
  "😀", "\u202e", "e\u0301", "a\u00a0b", "\u{10FFFF}",
];

const kinds = (outcomes: Outcome[]) => outcomes.map((o) => (o.kind === "quarantined" ? `quarantined:${o.reason}` : o.kind));

describe("PostgresStore sends every message value as a parameter, never in the SQL text", () => {
  it("the ledger's strict and batched paths, a redelivery, a duplicate, a conflict and a refused NUL id", async () => {
    const { store, sent, pool } = await recordingStore();
    const pipeline = new InboxPipeline<LedgerEvent, PgClient>({ store, handler: ledgerHandler(postgresLedgerSql), logger: silentLogger });
    // A marker in every id: no statement of the library contains it, so finding it in a text
    // can only mean that an id was pasted there.
    const marker = `zq${randomBytes(6).toString("hex")}`;
    const id = (i: number, piece: string) => `${marker}${i}${piece}${marker}`;
    const tenant = id(0, "'); DELETE FROM rabbit_inbox_dedup; --\\$1/*");
    const accounts = HOSTILE.map((piece, i) => id(100 + i, piece));
    // A negative delta of its own digits, to look for in the texts too.
    const delta = -randomInt(100_000, 999_999);
    const opened = (eventId: string, account: string) => ({ type: "account.opened", tenant, event_id: eventId, account_id: account });
    const adjusted = (eventId: string, account: string, cents: number) => ({ type: "balance.adjusted", tenant, event_id: eventId, account_id: account, delta_cents: cents });

    // Batched: one claim of every opening (the savepoint path).
    const openings = accounts.map((account, i) => opened(id(200 + i, HOSTILE[i]!), account));
    expect(kinds(await pipeline.process(openings.map((body) => incomingMessage(body))))).toEqual(openings.map(() => "applied"));
    // Strict: one event per transaction, each id with another piece, and one redelivery (its count goes first).
    const strict = HOSTILE.map((piece, i) => adjusted(id(300 + i, piece), accounts[i]!, delta));
    for (const body of strict) expect(kinds(await pipeline.process([incomingMessage(body)]))).toEqual(["applied"]);
    const redelivered = adjusted(id(400, "'$1'"), accounts[0]!, delta);
    expect(kinds(await pipeline.process([incomingMessage(redelivered, { redelivered: true })]))).toEqual(["applied"]);
    // Batched again with a duplicate and a conflict: the ON CONFLICT fallback, the read of the
    // existing keys and a quarantine record.
    const fresh = adjusted(id(500, "\\\\'"), accounts[1]!, delta);
    const conflict = { ...strict[2]!, delta_cents: delta - 1 };
    expect(kinds(await pipeline.process([fresh, strict[0]!, conflict].map((body) => incomingMessage(body)))))
      .toEqual(["applied", "duplicate", "quarantined:conflict"]);
    // A NUL is refused before the database: quarantined as invalid, its id never stored as text.
    const nul = adjusted(`${marker}\u0000'`, accounts[0]!, delta);
    expect(kinds(await pipeline.process([incomingMessage(nul)]))).toEqual(["quarantined:invalid"]);

    const recorded = [...sent];
    const texts = recorded.map((s) => s.text);
    expect(texts.length).toBeGreaterThan(HOSTILE.length * 3);
    const fingerprints = (await pool.query<{ fingerprint: string }>("SELECT fingerprint FROM rabbit_inbox_dedup")).rows.map((r) => r.fingerprint);
    expect(fingerprints.length).toBe(openings.length + strict.length + 2);
    const leaks = texts.filter((text) => text.includes(marker) || text.includes(String(-delta)) || text.includes("\u0000") || fingerprints.some((f) => text.includes(f)));
    expect(leaks.map((text) => text.slice(0, 160))).toEqual([]);
    // What the texts do not hold, the parameters do, exactly as the messages carried it.
    const parameters = parameterStrings(recorded);
    for (const value of [tenant, ...accounts, ...openings.map((o) => o.event_id), ...strict.map((s) => s.event_id), redelivered.event_id, fresh.event_id, ...fingerprints]) {
      expect(parameters.has(value), value).toBe(true);
    }
    expect(recorded.some(({ values }) => values.includes(String(delta)) || values.some((v) => Array.isArray(v) && v.includes(String(delta))))).toBe(true);

    // And the effects are exactly the messages'.
    const dedup = (await pool.query<{ tenant: string; event_id: string }>("SELECT tenant, event_id FROM rabbit_inbox_dedup WHERE handler = 'ledger'")).rows;
    const applied = [...openings, ...strict, redelivered, fresh];
    expect(dedup.map((r) => [r.tenant, r.event_id]).sort()).toEqual(applied.map((e) => [e.tenant, e.event_id]).sort());
    const balances = (await pool.query<{ tenant: string; account_id: string; b: string }>("SELECT tenant, account_id, balance_cents::text AS b FROM ledger_accounts")).rows;
    const expected = new Map(accounts.map((a) => [a, 0]));
    for (const e of [...strict, redelivered, fresh]) expected.set(e.account_id, expected.get(e.account_id)! + e.delta_cents);
    expect(balances.map((r) => [r.tenant, r.account_id, r.b]).sort()).toEqual([...expected].map(([a, b]) => [tenant, a, String(b)]).sort());
    const quarantine = (await pool.query<{ tenant: string | null; event_id: string | null; reason: string }>("SELECT tenant, event_id, reason FROM rabbit_inbox_quarantine ORDER BY id")).rows;
    expect(quarantine.map((q) => q.reason)).toEqual(["conflict", "invalid"]);
    expect(quarantine[0]).toMatchObject({ tenant, event_id: conflict.event_id });
  });
});
