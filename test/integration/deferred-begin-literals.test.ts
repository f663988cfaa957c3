/**
 * DeferredBegin pastes a transaction's first statement's parameters into the SQL text as quoted
 * literals (`BEGIN; <statement>`, `BEGIN; EXECUTE "name"(...)`, `BEGIN; SAVEPOINT ...; <statement>`).
 * These properties check against a real PostgreSQL that what the server reads from those
 * literals is exactly what a parameter would have carried, for ids made of everything a lexer
 * cares about, with standard_conforming_strings on (the default) and off (set on our own
 * sessions only).
 */
import fc from "fast-check";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { InboxClaim } from "../../src/core/store.js";
import { DeferredBegin } from "../../src/store/postgres/deferred-begin.js";
import { type PgClient, type PgQueryResult, PostgresStore } from "../../src/store/postgres/index.js";
import { PreparedStatements } from "../../src/store/postgres/prepared-statements.js";
import { createPgSchema, pgUrl } from "../support/databases.js";

const RUNS = 200;
/** Each store run is three transactions and two reads. */
const STORE_RUNS = 100;

/** Text a lexer reads specially: quotes, escapes, dollar quotes, parameters, array syntax, comments. */
const TRICKY = [
  "'", "''", '"', '""', "\\", "\\\\", "\\'", "'\\", "\\\"", "$$", "$1", "$2", "$10", "$tag$", "E'", "e'", "U&'",
  "E'\\x41'", "\\x41", "\\u0041", "\\000", "\\n", ",", "{", "}", "{}", '{"a","b"}', "{a,b}", "[1:2]={a,b}", "NULL", "null",
  "", " ", "\t", "\n", "\r\n", "--", "/*", "*/", ";", "'; ROLLBACK; --", "😀", "👩‍👩‍👧", "\u{10FFFF}", "\u{1D11E}",
  "\u{20000}", "é", "e\u0301", "\u00a0", "\ufeff", "\u2028", "\u0001", "\u007f", "%", "_",
];

/** NUL cannot be inlined (and PostgreSQL text cannot hold it): it has a property of its own. */
const withoutNul = (text: string) => text.replaceAll("\u0000", "\u0001");

const piece = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...TRICKY) },
  // Any code point, astral planes included (never half a surrogate pair).
  { weight: 1, arbitrary: fc.string({ unit: "binary", maxLength: 4 }).map(withoutNul) },
  { weight: 1, arbitrary: fc.string({ unit: "grapheme", maxLength: 4 }).map(withoutNul) },
);

/** An id a message could carry: short, made of the pieces above. */
const shortId = fc.array(piece, { maxLength: 10 }).map((parts) => parts.join(""));

/** Up to about 100k characters: a pattern of pieces repeated. */
const longId = fc
  .tuple(fc.array(piece, { minLength: 1, maxLength: 5 }), fc.integer({ min: 100, max: 3000 }))
  .map(([parts, times]) => parts.join("").repeat(times));

const anyId = fc.oneof({ weight: 5, arbitrary: shortId }, { weight: 1, arbitrary: longId });
const ids = fc.array(anyId, { maxLength: 6 });

const LONE_SURROGATES = ["\ud800", "\udbff", "\udc00", "\udfff", "\ud83d"];
const withLoneSurrogate = fc
  .tuple(shortId, fc.constantFrom(...LONE_SURROGATES), shortId)
  .map(([before, lone, after]) => before + lone + after);

const withNul = fc.tuple(shortId, shortId).map(([before, after]) => `${before}\u0000${after}`);

/** A pooled client whose query texts (and parameters) are recorded. */
function recording(client: pg.PoolClient) {
  const sent: Array<{ text: string; values?: unknown[] }> = [];
  const recorded: PgClient = {
    query: (config: string | { text: string; values?: unknown[] }, values?: unknown[]) => {
      sent.push(typeof config === "string" ? { text: config, values } : { text: config.text, values: config.values });
      return client.query(config, values);
    },
    release: (destroy) => client.release(destroy),
    on: (event, listener) => client.on(event, listener),
    removeListener: (event, listener) => client.removeListener(event, listener),
  };
  return { recorded, sent };
}

/** What the plain parameterised statement gives: rows, or the error's SQLSTATE. */
async function outcomeOf(run: () => Promise<PgQueryResult>): Promise<{ rows: unknown[] } | { code: unknown }> {
  try {
    return { rows: (await run()).rows };
  } catch (error) {
    return { code: (error as { code?: unknown }).code };
  }
}

const SETTINGS = ["on", "off"] as const;

describe.each(SETTINGS)("DeferredBegin literals on PostgreSQL, standard_conforming_strings = %s", (setting) => {
  let pool: pg.Pool;
  let client: pg.PoolClient;
  let recorded: PgClient;
  let sent: Array<{ text: string; values?: unknown[] }>;
  const statements = new PreparedStatements();
  const probe = { name: "ri_literals_probe", text: "SELECT $1::text AS one, $2::text[] AS many" };

  beforeAll(async () => {
    pool = new pg.Pool({ connectionString: pgUrl, max: 1 });
    client = await pool.connect();
    // This session only: the server's setting is left alone.
    await client.query(`SET standard_conforming_strings = ${setting}`);
    expect((await client.query("SHOW standard_conforming_strings")).rows[0].standard_conforming_strings).toBe(setting);
    ({ recorded, sent } = recording(client));
    // The client prepares the probe once, so later transactions send `BEGIN; EXECUTE`.
    await new DeferredBegin(recorded, statements).query({ ...probe, values: ["x", ["y"]] });
    await client.query("ROLLBACK");
    expect(statements.has(recorded, probe.name)).toBe(true);
  });

  afterAll(async () => {
    client?.release();
    await pool?.end();
  });

  /** Runs one transaction's first statement through DeferredBegin, then rolls it back. */
  async function first(run: (session: DeferredBegin<PgClient>) => Promise<PgQueryResult>) {
    sent.length = 0;
    try {
      const result = await run(new DeferredBegin(recorded, statements));
      return { rows: result.rows, texts: sent.map((s) => s.text) };
    } finally {
      await client.query("ROLLBACK");
    }
  }

  it("a text parameter reaches the server exactly as sent, inlined in BEGIN; SELECT", async () => {
    await fc.assert(
      fc.asyncProperty(anyId, async (id) => {
        const { rows, texts } = await first((s) => s.query({ text: "SELECT $1::text AS v", values: [id] }));
        expect(texts).toHaveLength(1);
        expect(texts[0]).toMatch(/^BEGIN;SELECT /);
        expect(rows).toEqual([{ v: id }]);
      }),
      { numRuns: RUNS },
    );
  });

  it("text[] parameters in the store's unnest form reach the server element by element, in order", async () => {
    const pairs = fc.array(fc.tuple(anyId, anyId), { maxLength: 6 });
    await fc.assert(
      fc.asyncProperty(pairs, async (keys) => {
        const tenants = keys.map(([t]) => t);
        const eventIds = keys.map(([, e]) => e);
        const { rows, texts } = await first((s) => s.query({
          text: "SELECT t.tenant, t.event_id, cardinality($1::text[]) AS n FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS t(tenant, event_id, ord) ORDER BY t.ord",
          values: [tenants, eventIds],
        }));
        expect(texts).toHaveLength(1);
        expect(texts[0]).toMatch(/^BEGIN;SELECT /);
        expect(rows).toEqual(keys.map(([tenant, event_id]) => ({ tenant, event_id, n: keys.length })));
      }),
      { numRuns: RUNS },
    );
  });

  it("a prepared statement's first use, BEGIN; EXECUTE \"name\"(literals), gets exactly the text and the text[]", async () => {
    await fc.assert(
      fc.asyncProperty(anyId, ids, async (one, many) => {
        const { rows, texts } = await first((s) => s.query({ ...probe, values: [one, many] }));
        expect(texts).toHaveLength(1);
        expect(texts[0]!.startsWith(`BEGIN;EXECUTE "${probe.name}"(`)).toBe(true);
        expect(rows).toEqual([{ one, many }]);
      }),
      { numRuns: RUNS },
    );
  });

  it("a statement sent with its savepoint (a batch claim's fast path) gets exactly the text and the text[]", async () => {
    await fc.assert(
      fc.asyncProperty(anyId, ids, async (one, many) => {
        const { rows, texts } = await first((s) => s.queryInSavepoint("sp", { text: probe.text, values: [one, many] }));
        expect(texts).toHaveLength(1);
        expect(texts[0]).toMatch(/^BEGIN;SAVEPOINT sp;SELECT /);
        expect(rows).toEqual([{ one, many }]);
      }),
      { numRuns: RUNS },
    );
  });

  it("a NUL is never inlined: the statement goes with its parameters and the server refuses it as it refuses any parameter with a NUL", async () => {
    const nulValues = fc.oneof(
      withNul.map((id) => [id, []] as [string, string[]]),
      fc.tuple(anyId, fc.tuple(ids, withNul).map(([rest, nul]) => [...rest, nul])),
    );
    await fc.assert(
      fc.asyncProperty(nulValues, async (values) => {
        sent.length = 0;
        const inlined = await outcomeOf(() => new DeferredBegin(recorded, statements).query({ text: probe.text, values }));
        await client.query("ROLLBACK");
        expect(sent.map((s) => s.text)).toEqual(["BEGIN", probe.text]);
        expect(sent[1]!.values).toEqual(values);
        sent.length = 0;
        const prepared = await outcomeOf(() => new DeferredBegin(recorded, statements).query({ ...probe, values }));
        await client.query("ROLLBACK");
        expect(sent.map((s) => s.text)).toEqual(["BEGIN", probe.text]);
        // PostgreSQL text cannot hold a NUL: 22021, invalid byte sequence, same as a plain parameter.
        const parameterised = await outcomeOf(() => client.query(probe.text, values));
        expect(parameterised).toEqual({ code: "22021" });
        expect(inlined).toEqual(parameterised);
        expect(prepared).toEqual(parameterised);
      }),
      { numRuns: 50 },
    );
  });

  it("a lone surrogate reads the same inlined as through a parameter (the driver's UTF-8 encoding makes it U+FFFD either way)", async () => {
    // Not an exact round trip by any path: UTF-8 cannot encode half a surrogate pair, and pg
    // encodes the query text and its parameters alike, replacing it with U+FFFD. (The decoder
    // refuses such ids before they reach a store.)
    await fc.assert(
      fc.asyncProperty(withLoneSurrogate, fc.array(withLoneSurrogate, { maxLength: 3 }), async (one, many) => {
        const { rows, texts } = await first((s) => s.query({ text: probe.text, values: [one, many] }));
        expect(texts[0]).toMatch(/^BEGIN;SELECT /);
        const parameterised = (await client.query(probe.text, [one, many])).rows;
        const wellFormed = (text: string) => text.replace(/\p{Cs}/gu, "\ufffd");
        expect(parameterised).toEqual([{ one: wellFormed(one), many: many.map(wellFormed) }]);
        expect(rows).toEqual(parameterised);
      }),
      { numRuns: 50 },
    );
  });

  it("a number reads the same inlined as through a parameter, whatever the text around it (5-$1 with -1 is not a comment)", async () => {
    const numbers = fc.oneof(fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.constantFrom(-1, -0, 0.5, -1e21, 1e-7));
    const texts = ["SELECT $1::text AS v", "SELECT 5-$1::numeric AS v", "SELECT $1 AS v"];
    await fc.assert(
      fc.asyncProperty(numbers, fc.constantFrom(...texts), async (value, text) => {
        sent.length = 0;
        const inlined = await outcomeOf(() => new DeferredBegin(recorded, statements).query({ text, values: [value] }));
        await client.query("ROLLBACK");
        expect(sent).toHaveLength(1);
        const parameterised = await outcomeOf(() => client.query(text, [value]));
        expect(inlined).toEqual(parameterised);
      }),
      // Bare, -1 made `5--1::numeric AS v`: the answer 5, the rest of the line a comment.
      { numRuns: RUNS, examples: [[-1, "SELECT 5-$1::numeric AS v"], [-1, "SELECT $1::text AS v"]] },
    );
  });
});

/** A store on a one-client pool (so that its claim statement, once prepared, goes as EXECUTE) recording what it sends. */
async function recordingStore(setting: (typeof SETTINGS)[number]) {
  const schema = await createPgSchema();
  const url = new URL(schema.url);
  // A per-session setting in the connection's startup options; the server's setting is left alone.
  url.searchParams.set("options", `${url.searchParams.get("options")} -c standard_conforming_strings=${setting}`);
  const pool = new pg.Pool({ connectionString: url.toString(), max: 1 });
  const sent: Array<{ text: string; values?: unknown[] }> = [];
  const connect = pool.connect.bind(pool) as (...args: unknown[]) => Promise<pg.PoolClient> | undefined;
  // Only the store's promise-style checkouts are recorded; pool.query (callback style) is not.
  (pool as unknown as { connect: (...args: unknown[]) => unknown }).connect = async (...args: unknown[]) => {
    if (args.length > 0) return connect(...args);
    const client = (await connect())!;
    const marked = client as pg.PoolClient & { recording?: boolean };
    if (!marked.recording) {
      marked.recording = true;
      const query = client.query.bind(client) as (...args: unknown[]) => unknown;
      (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
        const config = args[0] as string | { text: string; values?: unknown[] };
        sent.push(typeof config === "string" ? { text: config, values: args[1] as unknown[] | undefined } : { text: config.text, values: config.values });
        return query(...args);
      };
    }
    return client;
  };
  const store = new PostgresStore({ pool });
  cleanups.push(() => schema.drop(), () => pool.end());
  await store.migrate();
  expect((await pool.query("SHOW standard_conforming_strings")).rows[0].standard_conforming_strings).toBe(setting);
  return { store, pool, sent };
}

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

/** Ids a store keeps: short enough for the dedup key's btree entry (at most about 2.7 kB). */
const storeId = fc.array(piece, { maxLength: 12 }).map((parts) => parts.join(""));
const storeKeys = fc.uniqueArray(fc.tuple(storeId, storeId), { minLength: 1, maxLength: 5, selector: (key) => JSON.stringify(key) });

const byKey = (a: { tenant: string; event_id: string }, b: { tenant: string; event_id: string }) => {
  const x = JSON.stringify([a.tenant, a.event_id]);
  const y = JSON.stringify([b.tenant, b.event_id]);
  return x < y ? -1 : x > y ? 1 : 0;
};

describe.each(SETTINGS)("PostgresStore claims of such keys, standard_conforming_strings = %s", (setting) => {
  it("land as exactly those keys in rabbit_inbox_dedup, and a second claim of each is exists", async () => {
    const { store, pool, sent } = await recordingStore(setting);
    // The client's first single claim prepares the statement; later ones go as BEGIN; EXECUTE.
    await store.transaction((tx) => tx.claim("prime", [{ key: { tenant: "t", eventId: "e" }, fingerprint: "f" }]));
    let run = 0;
    await fc.assert(
      fc.asyncProperty(storeKeys, storeId, async (keys, fingerprint) => {
        const handler = `literals_${run++}`;
        const claims: InboxClaim[] = keys.map(([tenant, eventId]) => ({ key: { tenant, eventId }, fingerprint }));
        sent.length = 0;
        expect(await store.transaction((tx) => tx.claim(handler, claims))).toEqual(claims.map(() => ({ status: "claimed" })));
        // Sent inlined, with its BEGIN: this is the path under test.
        expect(sent[0]!.text).toMatch(claims.length === 1 ? /^BEGIN;EXECUTE "ri_claim_one"\(/ : /^BEGIN;SAVEPOINT rabbit_inbox_claim;INSERT INTO rabbit_inbox_dedup /);
        const stored = async () => (await pool.query<{ tenant: string; event_id: string; fingerprint: string }>("SELECT tenant, event_id, fingerprint FROM rabbit_inbox_dedup WHERE handler = $1", [handler])).rows;
        const expected = keys.map(([tenant, event_id]) => ({ tenant, event_id, fingerprint })).sort(byKey);
        expect((await stored()).sort(byKey)).toEqual(expected);

        expect(await store.transaction((tx) => tx.claim(handler, claims))).toEqual(claims.map(() => ({ status: "exists", fingerprint })));
        // With one new key in the batch: the plain INSERT fails, ON CONFLICT and the read of the existing keys take over.
        let fresh = `${keys[0]![1]}'\\$1😀`;
        while (keys.some(([t, e]) => t === keys[0]![0] && e === fresh)) fresh += "'";
        const more: InboxClaim[] = [...claims, { key: { tenant: keys[0]![0], eventId: fresh }, fingerprint }];
        expect(await store.transaction((tx) => tx.claim(handler, more))).toEqual([...claims.map(() => ({ status: "exists", fingerprint })), { status: "claimed" }]);
        expect((await stored()).sort(byKey)).toEqual([...expected, { tenant: keys[0]![0], event_id: fresh, fingerprint }].sort(byKey));
      }),
      { numRuns: STORE_RUNS },
    );
  });

  it("a key with a NUL is never inlined: the claim fails as PostgreSQL refuses it, and stores nothing", async () => {
    const { store, pool, sent } = await recordingStore(setting);
    await store.transaction((tx) => tx.claim("prime", [{ key: { tenant: "t", eventId: "e" }, fingerprint: "f" }]));
    const nulKeys = fc.tuple(storeKeys, withNul, fc.boolean()).map(([keys, nul, inTenant]) => [...keys, inTenant ? [nul, "e"] : ["t", nul]] as Array<[string, string]>);
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.oneof(withNul.map((nul) => [["t", nul]] as Array<[string, string]>), nulKeys), async (keys) => {
        const handler = `nul_${run++}`;
        sent.length = 0;
        const claims: InboxClaim[] = keys.map(([tenant, eventId]) => ({ key: { tenant, eventId }, fingerprint: "f" }));
        await expect(store.transaction((tx) => tx.claim(handler, claims))).rejects.toThrow(/invalid byte sequence/);
        const claim = sent.find((s) => s.text.includes("INSERT INTO rabbit_inbox_dedup"))!;
        // The claim went with its parameters, not pasted into the text.
        expect(claim.values).toContainEqual(keys.length === 1 ? keys[0]![1] : keys.map(([, e]) => e));
        expect(sent.every((s) => !s.text.includes("\u0000"))).toBe(true);
        expect((await pool.query("SELECT count(*)::int AS n FROM rabbit_inbox_dedup WHERE handler = $1", [handler])).rows[0].n).toBe(0);
      }),
      { numRuns: 50 },
    );
  });
});
