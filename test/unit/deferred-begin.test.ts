import { describe, expect, it } from "vitest";
import { DeferredBegin, inlineParameters } from "../../src/store/postgres/deferred-begin.js";
import type { PgClient } from "../../src/store/postgres/index.js";

const inline = (text: string, values: unknown[]) => inlineParameters({ text, values });

describe("inlineParameters (BEGIN sent with the first statement)", () => {
  it("quotes text like node-postgres's escapeLiteral: doubled quotes, E'' with doubled backslashes", () => {
    expect(inline("VALUES ($1, $2)", ["a", "it's"])).toBe("VALUES ('a', 'it''s')");
    expect(inline("VALUES ($1)", ["a\\b"])).toBe("VALUES (E'a\\\\b')");
    expect(inline("VALUES ($1)", ["\\'"])).toBe("VALUES (E'\\\\''')");
    expect(inline("VALUES ($1)", ["x'); DROP TABLE t; --"])).toBe("VALUES ('x''); DROP TABLE t; --')");
  });

  it("replaces $10 as itself, not as $1 followed by 0, and casts stay in place", () => {
    const values = Array.from({ length: 10 }, (_, i) => `v${i + 1}`);
    expect(inline("SELECT $1, $10, $2::text", values)).toBe("SELECT 'v1', 'v10', 'v2'::text");
  });

  it("writes string arrays as quoted array literals, elements escaped", () => {
    expect(inline("unnest($1::text[])", [["a", 'b"c', "d\\e", "{x,y}", ""]])).toBe(`unnest(E'{"a","b\\\\"c","d\\\\\\\\e","{x,y}",""}'::text[])`);
    expect(inline("unnest($1::text[])", [[]])).toBe("unnest('{}'::text[])");
  });

  it("takes numbers and null; refuses anything else so the statement goes with its parameters", () => {
    expect(inline("LIMIT $1 OFFSET $2", [10, null])).toBe("LIMIT 10 OFFSET NULL");
    expect(inline("VALUES ($1)", [Buffer.from("x")])).toBeNull();
    expect(inline("VALUES ($1)", [true])).toBeNull();
    expect(inline("VALUES ($1)", [new Date()])).toBeNull();
    expect(inline("VALUES ($1)", [Number.NaN])).toBeNull();
    expect(inline("VALUES ($1)", ["nul\u0000here"])).toBeNull();
    expect(inline("unnest($1::text[])", [["ok", "nul\u0000"]])).toBeNull();
    expect(inline("unnest($1::int[])", [[1, 2]])).toBeNull();
    expect(inline("VALUES ($2)", ["only one"])).toBeNull();
  });
});

/** A pg client that records what it is sent and answers each statement of a simple query. */
function recordingClient() {
  const sent: Array<{ text: string; values?: unknown[] }> = [];
  const client = {
    query(config: string | { text: string; values?: unknown[] }, values?: unknown[]) {
      const text = typeof config === "string" ? config : config.text;
      sent.push({ text, values: typeof config === "string" ? values : config.values });
      const statements = config === text && !values ? text.split(";").length : 1;
      const results = Array.from({ length: statements }, (_, i) => ({ rows: [{ n: i }], rowCount: 1 }));
      return Promise.resolve(statements > 1 ? results : results[0]);
    },
    release() {},
    on() { return client; },
    removeListener() { return client; },
  };
  return { client: client as unknown as PgClient, sent };
}

describe("DeferredBegin.queryInSavepoint (a batch claim's fast path)", () => {
  const claim = { text: "INSERT INTO t SELECT * FROM unnest($1::text[])", values: [["a", "b"]] };

  it("sends BEGIN, the savepoint and the statement as one simple query, and returns the statement's result", async () => {
    const { client, sent } = recordingClient();
    const result = await new DeferredBegin(client).queryInSavepoint("sp", claim);
    expect(sent.map((s) => s.text)).toEqual([`BEGIN;SAVEPOINT sp;INSERT INTO t SELECT * FROM unnest('{"a","b"}'::text[])`]);
    expect(result.rows).toEqual([{ n: 2 }]);
  });

  it("after BEGIN went out on its own (the handler sent first), sends only the savepoint and the statement", async () => {
    const { client, sent } = recordingClient();
    const session = new DeferredBegin(client);
    void session.handle;
    await session.queryInSavepoint("sp", claim);
    expect(sent.map((s) => s.text)).toEqual(["BEGIN", `SAVEPOINT sp;INSERT INTO t SELECT * FROM unnest('{"a","b"}'::text[])`]);
  });

  it("with parameters that cannot be inlined, sends the savepoint (with BEGIN) then the statement with its parameters", async () => {
    const { client, sent } = recordingClient();
    const binary = { text: "INSERT INTO t VALUES ($1)", values: [Buffer.from("x")] };
    await new DeferredBegin(client).queryInSavepoint("sp", binary);
    expect(sent.map((s) => s.text)).toEqual(["BEGIN;SAVEPOINT sp", "INSERT INTO t VALUES ($1)"]);
    expect(sent[1]!.values).toEqual([Buffer.from("x")]);
  });
});
