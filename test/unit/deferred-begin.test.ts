import { describe, expect, it } from "vitest";
import { DeferredBegin, inlineParameters } from "../../src/store/postgres/deferred-begin.js";
import { PreparedStatements } from "../../src/store/postgres/prepared-statements.js";
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
    expect(inline("LIMIT $1 OFFSET $2", [10, null])).toBe("LIMIT '10' OFFSET NULL");
    // Quoted: bare, -1 after a minus would start a comment, and before a cast bind after it.
    expect(inline("SELECT 5-$1, $1::text", [-1])).toBe("SELECT 5-'-1', '-1'::text");
    expect(inline("VALUES ($1)", [-0])).toBe("VALUES ('0')");
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

describe("DeferredBegin with PreparedStatements (a named first statement)", () => {
  const claim = { name: "ri_claim_one", text: "INSERT INTO t VALUES ($1, $2)", values: ["it's", "b"] };

  it("prepares it the usual way on a client's first transaction, then sends BEGIN; EXECUTE with literals", async () => {
    const { client, sent } = recordingClient();
    const statements = new PreparedStatements();
    const first = await new DeferredBegin(client, statements).query(claim);
    expect(sent.map((s) => s.text)).toEqual(["BEGIN", "INSERT INTO t VALUES ($1, $2)"]);
    expect(sent[1]!.values).toEqual(["it's", "b"]);
    expect(first.rows).toEqual([{ n: 0 }]);
    sent.length = 0;
    const second = await new DeferredBegin(client, statements).query(claim);
    expect(sent.map((s) => s.text)).toEqual([`BEGIN;EXECUTE "ri_claim_one"('it''s', 'b')`]);
    expect(second.rows).toEqual([{ n: 1 }]);
    // Another client has not prepared it.
    const other = recordingClient();
    await new DeferredBegin(other.client, statements).query(claim);
    expect(other.sent.map((s) => s.text)).toEqual(["BEGIN", "INSERT INTO t VALUES ($1, $2)"]);
  });

  it("keeps parameters that cannot be inlined as parameters, and unnamed statements inlined with BEGIN", async () => {
    const { client, sent } = recordingClient();
    const statements = new PreparedStatements();
    statements.add(client, "bin");
    await new DeferredBegin(client, statements).query({ name: "bin", text: "INSERT INTO t VALUES ($1)", values: [Buffer.from("x")] });
    expect(sent.map((s) => s.text)).toEqual(["BEGIN", "INSERT INTO t VALUES ($1)"]);
    sent.length = 0;
    await new DeferredBegin(client, statements).query({ text: "SELECT $1", values: ["a"] });
    expect(sent.map((s) => s.text)).toEqual(["BEGIN;SELECT 'a'"]);
  });

  it("when the server does not know the name (26000: a pooler, DISCARD ALL), rolls back, starts again the usual way and stops using EXECUTE", async () => {
    const { client, sent } = recordingClient();
    const query = client.query.bind(client) as (config: unknown, values?: unknown[]) => Promise<unknown>;
    (client as unknown as { query: unknown }).query = (config: unknown, values?: unknown[]) => {
      if (typeof config === "string" && config.includes("EXECUTE")) {
        sent.push({ text: config });
        return Promise.reject(Object.assign(new Error('prepared statement "ri_claim_one" does not exist'), { code: "26000" }));
      }
      return query(config, values);
    };
    const statements = new PreparedStatements();
    statements.add(client, "ri_claim_one");
    const session = new DeferredBegin(client, statements);
    const result = await session.query(claim);
    expect(result.rows).toEqual([{ n: 0 }]);
    expect(session.started).toBe(true);
    expect(sent.map((s) => s.text)).toEqual([`BEGIN;EXECUTE "ri_claim_one"('it''s', 'b')`, "ROLLBACK", "BEGIN", "INSERT INTO t VALUES ($1, $2)"]);
    expect(statements.enabled).toBe(false);
    sent.length = 0;
    await new DeferredBegin(client, statements).query(claim);
    expect(sent.map((s) => s.text)).toEqual([`BEGIN;INSERT INTO t VALUES ('it''s', 'b')`]);
  });

  it("passes any other error of BEGIN; EXECUTE on, with the transaction begun (the store rolls it back)", async () => {
    const { client } = recordingClient();
    (client as unknown as { query: unknown }).query = () => Promise.reject(Object.assign(new Error("canceling statement due to statement timeout"), { code: "57014" }));
    const statements = new PreparedStatements();
    statements.add(client, "ri_claim_one");
    const session = new DeferredBegin(client, statements);
    await expect(session.query(claim)).rejects.toMatchObject({ code: "57014" });
    expect(session.started).toBe(true);
    expect(statements.enabled).toBe(true);
  });
});

describe("inlineParameters replaces parameters only, never text that looks like one", () => {
  it("leaves $n inside quoted identifiers, string literals, dollar quotes, comments and identifiers", () => {
    expect(inline('INSERT INTO "inbox$2".t (a, b) VALUES ($1, $2)', ["t1", "e1"])).toBe(`INSERT INTO "inbox$2".t (a, b) VALUES ('t1', 'e1')`);
    expect(inline('SELECT "a""$1""" , $1', ["v"])).toBe(`SELECT "a""$1""" , 'v'`);
    expect(inline("SELECT '$1', 'it''s $2', $2", ["x", "y"])).toBe("SELECT '$1', 'it''s $2', 'y'");
    expect(inline("SELECT E'\\'$1', $1", ["v"])).toBe("SELECT E'\\'$1', 'v'");
    expect(inline("SELECT $$ $1 $$, $body$ $2 $body$, $1", ["v", "w"])).toBe("SELECT $$ $1 $$, $body$ $2 $body$, 'v'");
    expect(inline("SELECT $1 -- not $2\n, $2 /* nor $1 /* nested $2 */ $1 */", ["v", "w"])).toBe("SELECT 'v' -- not $2\n, 'w' /* nor $1 /* nested $2 */ $1 */");
    expect(inline("SELECT inbox$2.col, $1", ["v"])).toBe("SELECT inbox$2.col, 'v'");
    expect(inline("SELECT $1::text[], $10", ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"])).toBe("SELECT 'a'::text[], 'j'");
  });

  it("refuses text it cannot read (an unterminated quote or comment): the statement goes with its parameters", () => {
    expect(inline("SELECT 'open $1", ["v"])).toBeNull();
    expect(inline('SELECT "open $1', ["v"])).toBeNull();
    expect(inline("SELECT $tag$ open $1", ["v"])).toBeNull();
    expect(inline("SELECT /* open $1", ["v"])).toBeNull();
  });
});
