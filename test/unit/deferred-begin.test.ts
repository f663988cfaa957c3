import { describe, expect, it } from "vitest";
import { inlineParameters } from "../../src/store/postgres/deferred-begin.js";

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
