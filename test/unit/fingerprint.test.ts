import { isDeepStrictEqual } from "node:util";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { canonicalJson, fingerprintOf, flatObjectKeys, sortedInPlace } from "../../src/core/fingerprint.js";

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Path = Array<string | number>;

/** JSON values as a decoded message body holds them (a JSON round trip turns -0 into 0). */
const jsonValue = (maxDepth = 4) =>
  fc.jsonValue({ maxDepth, stringUnit: "grapheme" }).map((v) => JSON.parse(JSON.stringify(v)) as Json);
const jsonObject = fc.dictionary(fc.string({ unit: "grapheme", maxLength: 6 }), jsonValue(3), { maxKeys: 6 })
  .map((v) => JSON.parse(JSON.stringify(v)) as { [key: string]: Json });

/** A tiny seeded PRNG so one generated seed decides every key order and whitespace choice. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** JSON text of `value` with keys in a random order and random (legal) whitespace. */
function scrambledJson(value: Json, random: () => number): string {
  const ws = () => [" ", "\n", "\t", "\r\n  ", ""][Math.floor(random() * 5)]!;
  const write = (v: Json): string => {
    if (v === null || typeof v !== "object") return ws() + JSON.stringify(v) + ws();
    if (Array.isArray(v)) return `${ws()}[${v.map(write).join(",")}]${ws()}`;
    const keys = Object.keys(v);
    for (let i = keys.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [keys[i], keys[j]] = [keys[j]!, keys[i]!];
    }
    return `${ws()}{${keys.map((k) => `${ws()}${JSON.stringify(k)}${ws()}:${write(v[k]!)}`).join(",")}}${ws()}`;
  };
  return write(value);
}

/** Every node of a value with its path, the root first. */
function nodes(value: Json, path: Path = [], out: Array<{ path: Path; node: Json }> = []) {
  out.push({ path, node: value });
  if (Array.isArray(value)) value.forEach((child, i) => nodes(child, [...path, i], out));
  else if (value !== null && typeof value === "object") for (const k of Object.keys(value)) nodes(value[k]!, [...path, k], out);
  return out;
}

function replaceAt(root: Json, path: Path, replacement: Json): Json {
  if (path.length === 0) return replacement;
  const copy = structuredClone(root) as Record<string | number, Json>;
  let parent = copy;
  for (const step of path.slice(0, -1)) parent = parent[step] as Record<string | number, Json>;
  parent[path[path.length - 1]!] = replacement;
  return copy;
}

function pick<T>(items: readonly T[], n: number): T {
  return items[n % items.length]!;
}

/** The same value in another JSON type: 1 -> "1", true -> "true", null -> "null", [] -> {}... */
function otherType(v: Json): Json {
  if (v === null) return "null";
  if (typeof v === "boolean" || typeof v === "number") return String(v);
  if (typeof v === "string") return v === "null" ? null : v === "true" ? true : Number.isFinite(Number(v)) && v.trim() !== "" ? Number(v) : [v];
  if (Array.isArray(v)) return Object.fromEntries(v.map((x, i) => [String(i), x]));
  return Object.values(v);
}

/** A different value of the same type. */
function otherLeaf(v: Json): Json {
  if (v === null) return false;
  if (typeof v === "boolean") return !v;
  if (typeof v === "number") return v === 0 ? 1 : v * 2 === v ? 0 : v * 2;
  if (typeof v === "string") return v + "x";
  return v;
}

describe("canonicalJson", () => {
  it("sorts keys at every level and drops whitespace", () => {
    expect(canonicalJson({ b: 1, a: { d: [3, { z: 1, y: 2 }], c: "x" } })).toBe('{"a":{"c":"x","d":[3,{"y":2,"z":1}]},"b":1}');
    expect(canonicalJson(JSON.parse(' { "b" :\n 1 ,\t"a":[ ] } '))).toBe('{"a":[],"b":1}');
  });

  it("escapes keys and strings so that no two structures print the same", () => {
    expect(canonicalJson({ 'a":1,"b': 2 })).not.toBe(canonicalJson({ a: 1, b: 2 }));
    expect(canonicalJson(["a,b"])).not.toBe(canonicalJson(["a", "b"]));
  });

  it("is the JSON text of the value when keys are already sorted", () => {
    fc.assert(
      fc.property(jsonValue(), (v) => {
        expect(JSON.parse(canonicalJson(v))).toEqual(v);
      }),
    );
  });

  it("writes a flat object (its one-call fast path) exactly as the general walk writes it nested", () => {
    const key = fc.oneof(fc.string({ unit: "grapheme", maxLength: 6 }), fc.nat().map(String), fc.constantFrom("", "a\"b", "\\", "\u2028", "10", "01", "-1"));
    const scalar = fc.oneof(fc.constant(null), fc.boolean(), fc.string({ unit: "grapheme" }), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.integer(), fc.constant(-0));
    fc.assert(
      fc.property(fc.dictionary(key, scalar, { maxKeys: 8 }), (flat) => {
        // Inside an array the object goes through the general walk, not the fast path.
        expect(canonicalJson(flat)).toBe(canonicalJson([flat]).slice(1, -1));
      }),
      { numRuns: 500 },
    );
    expect(canonicalJson({ b: 1, a: null, c: "x", 10: true, 9: false })).toBe('{"10":true,"9":false,"a":null,"b":1,"c":"x"}');
    // An own "__proto__" key (JSON.parse makes one) must not become the prototype of a copy.
    expect(canonicalJson(JSON.parse('{"b":1,"__proto__":{"x":1},"a":3}'))).toBe('{"__proto__":{"x":1},"a":3,"b":1}');
    expect(canonicalJson(JSON.parse('{"b":1,"__proto__":2,"a":3}'))).toBe('{"__proto__":2,"a":3,"b":1}');
    expect(canonicalJson(JSON.parse('{"__proto__":2}'))).toBe('{"__proto__":2}');
    // "0" is an integer key (enumerated first by every object) that sorts after "!" and "-1".
    expect(canonicalJson({ "!": 1, "0": 2, "-1": 3 })).toBe('{"!":1,"-1":3,"0":2}');
  });

  it("writes what JSON cannot hold as JSON.stringify writes it in an array, at any depth", () => {
    expect(canonicalJson({ a: [Infinity, -Infinity, NaN], b: { c: undefined } })).toBe('{"a":[null,null,null],"b":{"c":null}}');
    expect(canonicalJson({ a: [() => 1, Symbol("s")] })).toBe('{"a":[null,null]}');
    expect(canonicalJson(() => 1)).toBe("null");
    expect(canonicalJson(undefined)).toBe("null");
  });

  it("writes a bigint as its decimal digits, so a handler's 64-bit amounts fingerprint exactly", () => {
    expect(canonicalJson({ amount: 12345678901234567891n, list: [1n, -2n] })).toBe('{"amount":12345678901234567891,"list":[1,-2]}');
    expect(fingerprintOf({ amount: 12345678901234567891n })).not.toBe(fingerprintOf({ amount: 12345678901234567890n }));
  });

  it("takes the one-call path for a flat object of JSON scalars, and only for one", () => {
    expect(flatObjectKeys({ tenant: "t1", b: 1.5, a: null, ok: false, yes: true, empty: "" })).toEqual(["a", "b", "empty", "ok", "tenant", "yes"]);
    expect(flatObjectKeys({})).toEqual([]);
    for (const value of [null, "s", 1, [1], [], { a: {} }, { a: [] }, { a: undefined }, { a: Infinity }, { a: NaN }, { a: 1n }, { a: () => 1 }, { a: "x", b: { c: 1 } }]) {
      expect(flatObjectKeys(value)).toBeNull();
    }
  });

  it("handles 100 000 levels of nesting without overflowing the stack", () => {
    let deep: Json = 1;
    for (let i = 0; i < 100_000; i++) deep = i % 2 === 0 ? [deep] : { k: deep };
    const text = canonicalJson(deep);
    expect(text.length).toBeGreaterThan(300_000);
    expect(fingerprintOf(deep)).toMatch(/^[0-9a-f]{64}$/);
  });
});

describe("fingerprintOf", () => {
  it("is a SHA-256 hex digest", () => {
    expect(fingerprintOf({ a: 1 })).toBe("015abd7f5cc57a2dd94b7590f04ad8084273905ee33ec5cebeae62276a97f862");
  });

  it("does not depend on key order or whitespace of the JSON text", () => {
    fc.assert(
      fc.property(jsonValue(), fc.integer(), (value, seed) => {
        const text = scrambledJson(value, prng(seed));
        expect(fingerprintOf(JSON.parse(text))).toBe(fingerprintOf(value));
      }),
      { numRuns: 300 },
    );
  });

  it("treats number spellings of the same double as the same value", () => {
    expect(fingerprintOf(JSON.parse('{"a":1.0,"b":1e2}'))).toBe(fingerprintOf({ a: 1, b: 100 }));
  });

  it("changes when a leaf value changes", () => {
    fc.assert(
      fc.property(jsonObject, fc.nat(), (value, n) => {
        const leaves = nodes(value).filter((x) => x.node === null || typeof x.node !== "object");
        fc.pre(leaves.length > 0);
        const { path, node } = pick(leaves, n);
        const changed = replaceAt(value, path, otherLeaf(node));
        fc.pre(!isDeepStrictEqual(changed, value));
        expect(fingerprintOf(changed)).not.toBe(fingerprintOf(value));
      }),
      { numRuns: 300 },
    );
  });

  it("changes when a key is added, at any level", () => {
    fc.assert(
      fc.property(jsonObject, fc.nat(), fc.string({ unit: "grapheme", maxLength: 4 }), jsonValue(2), (value, n, key, added) => {
        const objects = nodes(value).filter((x) => x.node !== null && typeof x.node === "object" && !Array.isArray(x.node));
        const { path, node } = pick(objects, n);
        const target = node as { [key: string]: Json };
        fc.pre(!Object.hasOwn(target, key));
        const changed = replaceAt(value, path, { ...target, [key]: added });
        expect(fingerprintOf(changed)).not.toBe(fingerprintOf(value));
      }),
      { numRuns: 300 },
    );
  });

  it("changes when a key is removed, at any level", () => {
    fc.assert(
      fc.property(jsonObject, fc.nat(), fc.nat(), (value, n, m) => {
        const objects = nodes(value).filter((x) => x.node !== null && typeof x.node === "object" && !Array.isArray(x.node) && Object.keys(x.node).length > 0);
        fc.pre(objects.length > 0);
        const { path, node } = pick(objects, n);
        const target = { ...(node as { [key: string]: Json }) };
        delete target[pick(Object.keys(target), m)];
        const changed = replaceAt(value, path, target);
        expect(fingerprintOf(changed)).not.toBe(fingerprintOf(value));
      }),
      { numRuns: 300 },
    );
  });

  it("changes when a value changes type, even to the same text (1 vs \"1\", [] vs {}, null vs \"null\")", () => {
    fc.assert(
      fc.property(jsonObject, fc.nat(), (value, n) => {
        const { path, node } = pick(nodes(value), n);
        const changed = replaceAt(value, path, otherType(node));
        fc.pre(!isDeepStrictEqual(changed, value));
        expect(fingerprintOf(changed)).not.toBe(fingerprintOf(value));
      }),
      { numRuns: 300 },
    );
    for (const [a, b] of [[1, "1"], [[], {}], [null, "null"], [true, "true"], [[1, 2], { 0: 1, 1: 2 }], ["", null], [0, false]] as Array<[Json, Json]>) {
      expect(fingerprintOf({ v: a }), `${JSON.stringify(a)} vs ${JSON.stringify(b)}`).not.toBe(fingerprintOf({ v: b }));
    }
  });

  it("changes when array elements change order", () => {
    fc.assert(
      fc.property(jsonObject, fc.nat(), fc.nat(), (value, n, m) => {
        const arrays = nodes(value).filter((x) => Array.isArray(x.node) && x.node.length > 1);
        fc.pre(arrays.length > 0);
        const { path, node } = pick(arrays, n);
        const items = [...(node as Json[])];
        const shift = 1 + (m % (items.length - 1));
        const rotated = [...items.slice(shift), ...items.slice(0, shift)];
        const changed = replaceAt(value, path, rotated);
        fc.pre(!isDeepStrictEqual(changed, value));
        expect(fingerprintOf(changed)).not.toBe(fingerprintOf(value));
      }),
      { numRuns: 300 },
    );
    expect(fingerprintOf({ lines: [1, 2] })).not.toBe(fingerprintOf({ lines: [2, 1] }));
  });

  it("tells apart any two values that are not deeply equal", () => {
    fc.assert(
      fc.property(jsonValue(3), jsonValue(3), (a, b) => {
        fc.pre(!isDeepStrictEqual(a, b));
        expect(fingerprintOf(a)).not.toBe(fingerprintOf(b));
      }),
      { numRuns: 500 },
    );
  });
});

describe("sortedInPlace", () => {
  it("orders keys exactly as the built-in sort does, at every length either side of the insertion sort's limit", () => {
    const alphabet = ["", "a", "A", "aa", "b", "B", "_", "10", "9", "é", "e\u0301", "😀", "\uffff", "z", "Z", "a b", "ab", "a_b"];
    for (let length = 0; length <= 24; length++) {
      for (let round = 0; round < 20; round++) {
        const keys = Array.from({ length }, (_, i) => alphabet[(i * 7 + round * 13 + ((i * round) % 5)) % alphabet.length]! + (round % 3 === 0 ? "" : String(i % 4)));
        expect(sortedInPlace([...keys]), keys.join("|")).toEqual([...keys].sort());
      }
    }
  });

  it("sorts the array it is given", () => {
    const keys = ["c", "a", "b"];
    expect(sortedInPlace(keys)).toBe(keys);
    expect(keys).toEqual(["a", "b", "c"]);
  });
});
