/**
 * The store's array parameters in PostgreSQL's binary format: what PostgreSQL reads from them is
 * exactly what a plain array (node-postgres's text literal) gives, for the values a batch carries.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { binaryArrays, plainArrays } from "../../src/store/postgres/array-parameters.js";
import { pgUrl } from "../support/databases.js";
import { decodeBinaryArray } from "../support/binary-array.js";

const STRINGS = [
  "", "a", "'", "''", '"', "\\", "\\\\x00", "{", "}", "{}", "{a,b}", ",", "NULL", "null", " padded ", "$1", "--", "/*",
  "😀", "\u202e", "e\u0301", "\u{10FFFF}", "x".repeat(5000), "\n\t\r",
];
const JSONS = ['{"contentType":"application/json","timestamp":1}', '{"headers":{"a":"\\"quoted\\"","b":[1,2,{"c":null}]}}', "{}", '"text"', "[]", '{"u":"😀\\u00e9"}'];
const BYTES = [Buffer.alloc(0), Buffer.from([0]), Buffer.from([0, 255, 92, 34, 39, 123, 125]), Buffer.from("hello"), Buffer.alloc(70_000, 7)];
const INTS = [0, 1, -1, 2 ** 31 - 1, 2 ** 31, -(2 ** 31), -(2 ** 31) - 1, 2 ** 32, 2 ** 32 + 5, Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER, 123_456_789_012];

let client: pg.Client;
beforeAll(async () => {
  client = new pg.Client({ connectionString: pgUrl });
  await client.connect();
});
afterAll(async () => {
  await client.end();
});

/** What PostgreSQL makes of an array parameter: its elements as text, in order, with NULLs kept. */
async function roundTrip(cast: string, value: unknown): Promise<Array<string | null>> {
  const { rows } = await client.query<{ v: string | null }>({
    text: `SELECT e::text AS v FROM unnest($1::${cast}) WITH ORDINALITY AS t(e, ord) ORDER BY ord`, values: [value],
  });
  return rows.map((r) => r.v);
}

describe("array parameters in binary", () => {
  it("text, with NULLs, arrives as the plain array does", async () => {
    const values = [...STRINGS, null, "after a null"];
    const binary = await roundTrip("text[]", binaryArrays.text(values));
    expect(binary).toEqual(values);
    expect(binary).toEqual(await roundTrip("text[]", plainArrays.text(values)));
  });

  it("jsonb arrives as the plain array does", async () => {
    const binary = await roundTrip("jsonb[]", binaryArrays.jsonb(JSONS));
    expect(binary).toEqual(await roundTrip("jsonb[]", plainArrays.jsonb(JSONS)));
    expect(binary.map((v) => JSON.parse(v!) as unknown)).toEqual(JSONS.map((j) => JSON.parse(j) as unknown));
  });

  it("bytea, any byte, arrives byte for byte", async () => {
    const { rows } = await client.query<{ v: Buffer }>({
      text: "SELECT e AS v FROM unnest($1::bytea[]) WITH ORDINALITY AS t(e, ord) ORDER BY ord", values: [binaryArrays.bytea(BYTES)],
    });
    expect(rows.map((r) => r.v)).toEqual(BYTES);
  });

  it("int8, negative and beyond 32 bits, arrives as the plain array does", async () => {
    const binary = await roundTrip("bigint[]", binaryArrays.int8(INTS));
    expect(binary).toEqual(INTS.map(String));
    expect(binary).toEqual(await roundTrip("bigint[]", plainArrays.int8(INTS)));
  });

  it("an empty array of each type is empty, and takes part in unnest like one", async () => {
    for (const [cast, value] of [["text[]", binaryArrays.text([])], ["jsonb[]", binaryArrays.jsonb([])], ["bytea[]", binaryArrays.bytea([])], ["bigint[]", binaryArrays.int8([])]] as const) {
      expect(await roundTrip(cast, value), cast).toEqual([]);
      const { rows } = await client.query<{ n: number }>({ text: `SELECT cardinality($1::${cast}) AS n`, values: [value] });
      expect(rows[0]!.n, cast).toBe(0);
    }
  });

  it("the element type is checked by PostgreSQL: a text array is refused where bigint[] is expected", async () => {
    await expect(client.query({ text: "SELECT cardinality($1::bigint[])", values: [binaryArrays.text(["1"])] })).rejects.toThrow(/element type/);
  });

  it("an int8 element that is not a safe integer is refused before anything is sent", () => {
    for (const bad of [1.5, Number.NaN, 2 ** 53, Infinity]) expect(() => binaryArrays.int8([1, bad]), String(bad)).toThrow(/safe integer/);
  });

  it("the test's own decoder reads every encoding back (it checks what the store sends elsewhere)", () => {
    expect(decodeBinaryArray(binaryArrays.text(["a", null, "😀"]) as Buffer)).toEqual(["a", null, "😀"]);
    expect(decodeBinaryArray(binaryArrays.jsonb(["{}"]) as Buffer)).toEqual(["{}"]);
    expect(decodeBinaryArray(binaryArrays.bytea(BYTES) as Buffer)).toEqual(BYTES);
    expect(decodeBinaryArray(binaryArrays.int8(INTS) as Buffer)).toEqual(INTS);
    expect(decodeBinaryArray(binaryArrays.text([]) as Buffer)).toEqual([]);
  });
});
