import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type DecodeLimits, decodeJsonBody, defaultDecodeLimits, isValidFlatObject } from "../../src/core/decode.js";
import { InvalidEventError } from "../../src/core/errors.js";

type Properties = { contentType?: string; contentEncoding?: string };
const json: Properties = { contentType: "application/json" };

function decode(body: string | Buffer, properties: Properties = json, limits?: Partial<DecodeLimits>) {
  return decodeJsonBody(Buffer.isBuffer(body) ? body : Buffer.from(body, "utf8"), properties, { ...defaultDecodeLimits, ...limits });
}

/** Asserts that decoding fails with InvalidEventError (reason `invalid`) and a message matching `message`. */
function rejects(body: string | Buffer, message: RegExp, properties: Properties = json, limits?: Partial<DecodeLimits>): InvalidEventError {
  let caught: unknown;
  try {
    decode(body, properties, limits);
  } catch (error) {
    caught = error;
  }
  expect(caught, `expected ${String(body).slice(0, 60)} to be rejected`).toBeInstanceOf(InvalidEventError);
  const error = caught as InvalidEventError;
  expect(error.reason).toBe("invalid");
  expect(error.code).toBe("RI_INVALID_EVENT");
  expect(error.kind).toBe("permanent");
  expect(error.message).toMatch(message);
  // Readable: one line of text, no raw control characters from the input.
  // eslint-disable-next-line no-control-regex
  expect(error.message).not.toMatch(/[\u0000-\u001f\u007f]/);
  return error;
}

describe("decodeJsonBody", () => {
  it("returns the decoded object", () => {
    expect(decode('{"tenant":"t1","event_id":"e-1","n":[1,{"x":null}]}')).toEqual({ tenant: "t1", event_id: "e-1", n: [1, { x: null }] });
  });

  it("accepts a UTF-8 byte order mark and multi-byte characters", () => {
    const body = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"name":"事件 😀 é"}')]);
    expect(decode(body)).toEqual({ name: "事件 😀 é" });
  });

  it("rejects broken JSON with the parser's reason", () => {
    for (const body of ['{"a":1', '{"a":1,}', "{'a':1}", '{"a":tru}', "nope", '{"a":1}}', '{"a":01}']) {
      rejects(body, /^body is not valid JSON: /);
    }
  });

  it("keeps raw control characters of the input out of the error message", () => {
    // V8 quotes the input in some parse errors; a raw NUL there cannot be stored in PostgreSQL text.
    rejects("nul\u0000l", /^body is not valid JSON: /);
    rejects("x\u0001\u0002\n\u007f", /^body is not valid JSON: /);
  });

  it("rejects an empty body", () => {
    rejects("", /body is empty/);
  });

  it("rejects invalid UTF-8: stray bytes, overlong forms, encoded surrogates, truncated sequences", () => {
    for (const bytes of [
      [0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d], // {"a":"\xff"}
      [0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xc0, 0xaf, 0x22, 0x7d], // overlong "/"
      [0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xed, 0xa0, 0x80, 0x22, 0x7d], // CESU-8 surrogate
      [0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xe4, 0xba, 0x22, 0x7d], // truncated 3-byte sequence
    ]) {
      rejects(Buffer.from(bytes), /^body is not valid UTF-8$/);
    }
  });

  it("rejects unpaired UTF-16 surrogates written as \\u escapes, in values and in keys", () => {
    // They are valid JSON but not Unicode: UTF-8 encoders (pg, better-sqlite3, hashing) turn every
    // one of them into U+FFFD, so "e-\ud800" and "e-\udc00" would become one event id.
    rejects('{"event_id":"e-\\ud800"}', /surrogate/);
    rejects('{"a":["x\\udc00y"]}', /surrogate/);
    rejects('{"a":{"\\udbff":1}}', /surrogate/);
    expect(decode('{"a":"\\ud83d\\ude00"}')).toEqual({ a: "😀" });
  });

  it("rejects numbers outside the range of a double", () => {
    // JSON.parse turns 1e400 into Infinity, which would fingerprint like null.
    rejects('{"a":1e400}', /out of range/);
    rejects('{"a":[-1e999]}', /out of range/);
    expect(decode('{"a":1e308,"b":-5e-324}')).toEqual({ a: 1e308, b: -5e-324 });
  });

  it("rejects 100 000 levels of nesting without crashing", () => {
    const arrays = `{"a":${"[".repeat(100_000)}${"]".repeat(100_000)}}`;
    rejects(arrays, /nesting deeper than 32/);
    const objects = `${'{"a":'.repeat(100_000)}1${"}".repeat(100_000)}`;
    rejects(objects, /nesting deeper than 32/);
  });

  it("accepts nesting up to maxDepth and rejects one level more", () => {
    const nested = (depth: number) => `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`;
    expect(() => decode(nested(32))).not.toThrow();
    rejects(nested(33), /nesting deeper than 32 at \$(\.a)+/);
    rejects(nested(4), /nesting deeper than 3/, json, { maxDepth: 3 });
  });

  it("rejects documents with too many values", () => {
    rejects(`{"a":[${new Array(10_001).fill(0).join(",")}]}`, /more than 10000 values/);
    const keys = Object.fromEntries(Array.from({ length: 11 }, (_, i) => [`k${i}`, i]));
    rejects(JSON.stringify(keys), /more than 10 values/, json, { maxNodes: 10 });
  });

  it("rejects a body over the size limit, and accepts one at the limit", () => {
    const body = `{"pad":"${"x".repeat(100)}"}`;
    expect(() => decode(body, json, { maxBodyBytes: body.length })).not.toThrow();
    rejects(body, new RegExp(`body is ${body.length} bytes, over the limit of ${body.length - 1}`), json, { maxBodyBytes: body.length - 1 });
    const big = Buffer.alloc(defaultDecodeLimits.maxBodyBytes + 1, 0x20);
    rejects(big, /over the limit of 1048576/);
  });

  it("rejects a __proto__ key anywhere", () => {
    rejects('{"__proto__":{"admin":true}}', /forbidden key "__proto__" at \$/);
    rejects('{"a":{"b":{"__proto__":{}}}}', /forbidden key "__proto__" at \$\.a\.b/);
    rejects('{"list":[1,{"__proto__":null}]}', /forbidden key "__proto__" at \$\.list\[1\]/);
    rejects('{"a":1,"\\u005f_proto__":2}', /forbidden key "__proto__"/);
  });

  it("rejects constructor.prototype, and allows either key alone", () => {
    rejects('{"constructor":{"prototype":{"admin":true}}}', /forbidden key "constructor.prototype" at \$\.constructor/);
    rejects('{"x":[{"constructor":{"prototype":1}}]}', /constructor\.prototype/);
    expect(decode('{"constructor":"c","prototype":{"constructor":1},"__proto":"p","s":"__proto__"}')).toMatchObject({ constructor: "c", s: "__proto__" });
  });

  it("rejects the NUL character in a value or a key", () => {
    rejects('{"a":"x\\u0000y"}', /\$\.a contains a NUL character/);
    rejects('{"a":[{"b":"\\u0000"}]}', /\$\.a\[0\]\.b contains a NUL character/);
    rejects('{"a":{"k\\u0000":1}}', /a key at \$\.a contains a NUL character/);
  });

  it("rejects anything but an object at the top level", () => {
    for (const [body, got] of [["[]", "an array"], ['"x"', "string"], ["1", "number"], ["null", "null"], ["true", "boolean"], ['[{"a":1}]', "an array"]]) {
      rejects(body!, new RegExp(`^body must be a JSON object, got ${got}$`));
    }
  });

  it("accepts JSON and text/plain content types, with parameters and in any case, and no content type", () => {
    for (const contentType of ["application/json", "Application/JSON; charset=utf-8", "application/vnd.ledger+json", " text/plain ", "text/plain; charset=utf-8"]) {
      expect(decode('{"a":1}', { contentType })).toEqual({ a: 1 });
    }
    expect(decode('{"a":1}', {})).toEqual({ a: 1 });
  });

  it("rejects other content types", () => {
    for (const contentType of ["application/xml", "application/octet-stream", "text/html", "application/x-protobuf"]) {
      rejects('{"a":1}', new RegExp(`content type ${JSON.stringify(contentType)} is not JSON`), { contentType });
    }
  });

  it("accepts identity and UTF-8 content encodings, and rejects compressed bodies", () => {
    for (const contentEncoding of ["identity", "utf-8", "UTF8"]) {
      expect(decode('{"a":1}', { contentType: "application/json", contentEncoding })).toEqual({ a: 1 });
    }
    for (const contentEncoding of ["gzip", "deflate", "br", "base64"]) {
      rejects('{"a":1}', /content encoding .* is not supported/, { contentType: "application/json", contentEncoding });
    }
  });

  it("refuses a flat object (checked in one loop) for exactly the reasons the full walk refuses it nested", () => {
    // Keys and values as JSON text, some of them refusable: NUL, lone surrogates, __proto__, out-of-range numbers.
    const key = fc.oneof(
      fc.string({ maxLength: 5 }).map((k) => JSON.stringify(k)),
      fc.constantFrom('"__proto__"', '"k\\u0000"', '"\\ud800"', '"constructor"', '"prototype"', '"10"', '"\\u005f_proto__"'),
    );
    const value = fc.oneof(
      fc.constantFrom("null", "true", "false", "1e400", "-1e999", "0", "-0", "1.5", '"x\\u0000"', '"\\udc00"', '"\\ud83d\\ude00"', '""'),
      fc.string({ maxLength: 8 }).map((v) => JSON.stringify(v)),
      fc.double({ noNaN: true, noDefaultInfinity: true }).map(String),
    );
    const outcome = (body: string, limits?: Partial<DecodeLimits>) => {
      try {
        decode(body, json, limits);
        return "ok";
      } catch (error) {
        expect(error).toBeInstanceOf(InvalidEventError);
        // The nested object's paths start with $.nested__ (longer than any generated key).
        return (error as Error).message.replaceAll("$.nested__", "$").replace(/more than \d+ values/, "more than N values");
      }
    };
    fc.assert(
      fc.property(fc.uniqueArray(fc.tuple(key, value), { selector: ([k]) => k, maxLength: 6 }), fc.integer({ min: 1, max: 8 }), (pairs, maxNodes) => {
        const flat = `{${pairs.map(([k, v]) => `${k}:${v}`).join(",")}}`;
        const nested = `{"nested__":${flat}}`;
        // The same object one level down goes through the walk; its node count is one more.
        expect(outcome(flat, { maxNodes })).toBe(outcome(nested, { maxNodes: maxNodes + 1 }));
      }),
      { numRuns: 1000 },
    );
    rejects('{"k\\u0000":1}', /a key at \$ contains a NUL character/);
    rejects('{"\\ud800":1}', /a key at \$ contains an unpaired UTF-16 surrogate/);
    rejects('{"a":1}', /nesting deeper than 0 at \$/, json, { maxDepth: 0 });
  });

  it("shortens very long keys in error paths", () => {
    const key = "k".repeat(500);
    const error = rejects(`{"${key}":{"__proto__":1}}`, /forbidden key/);
    expect(error.message.length).toBeLessThan(200);
  });
});

describe("decodeJsonBody: the exact edges", () => {
  it("quotes a control character of the input as a \\u escape in the parse error", () => {
    const error = rejects("\u0001", /^body is not valid JSON: /);
    expect(error.message).toContain("Unexpected token '\\u0001'");
    expect(error.cause).toBeInstanceOf(SyntaxError);
  });

  it("keeps the decoder's error as the cause of an invalid UTF-8 refusal", () => {
    const error = rejects(Buffer.from([0x7b, 0xff, 0x7d]), /^body is not valid UTF-8$/);
    expect(error.cause).toBeInstanceOf(TypeError);
  });

  it("reads the content encoding without outer spaces", () => {
    for (const contentEncoding of [" identity ", "UTF-8 ", "\tutf8"]) {
      expect(decode('{"a":1}', { contentType: "application/json", contentEncoding })).toEqual({ a: 1 });
    }
  });

  it("takes a +json media type only when the whole media type is one", () => {
    for (const contentType of ["a b/c+json", "application/x+json-seq", "application/problem+jsonp"]) {
      rejects('{"a":1}', /is not JSON/, { contentType });
    }
  });

  it("counts nesting in arrays and objects, not in the scalars they hold", () => {
    const body = '{"a":[true,false,null,1,"s"],"b":{"c":true,"d":null}}';
    expect(decode(body, json, { maxDepth: 2 })).toEqual(JSON.parse(body));
    rejects('{"a":[[true]]}', /nesting deeper than 2 at \$\.a\[0\]$/, json, { maxDepth: 2 });
  });

  it("accepts exactly maxNodes values in a nested document and refuses one more", () => {
    expect(decode('{"a":{"b":1,"c":2}}', json, { maxNodes: 3 })).toEqual({ a: { b: 1, c: 2 } });
    rejects('{"a":{"b":1,"c":2,"d":3}}', /more than 3 values in the document/, json, { maxNodes: 3 });
    expect(decode('{"a":[1,2]}', json, { maxNodes: 3 })).toEqual({ a: [1, 2] });
    rejects('{"a":[1,2,3]}', /more than 3 values in the document/, json, { maxNodes: 3 });
  });

  it("allows any key under a constructor object but prototype", () => {
    expect(decode('{"constructor":{"name":"Account","length":1}}')).toEqual({ constructor: { name: "Account", length: 1 } });
  });

  it("shows a key of 64 characters whole in an error path, and cuts a longer one at 64 with an ellipsis", () => {
    const k64 = "k".repeat(64);
    rejects(`{"${k64}":{"__proto__":1}}`, new RegExp(`^forbidden key "__proto__" at \\$\\.${k64}$`));
    rejects(`{"${k64}x":{"__proto__":1}}`, new RegExp(`^forbidden key "__proto__" at \\$\\.${k64}…$`));
  });
});

describe("isValidFlatObject (the one-loop check of the usual event)", () => {
  const limits = defaultDecodeLimits;

  it("passes a flat object of clean scalars, so the usual event skips the full walk", () => {
    expect(isValidFlatObject({ tenant: "t1", event_id: "e-1", delta_cents: -250, ratio: 0.5, ok: true, off: false, note: null, empty: "" }, limits)).toBe(true);
    expect(isValidFlatObject({}, limits)).toBe(true);
  });

  it("passes up to maxNodes keys and a maxDepth of 1", () => {
    expect(isValidFlatObject({ a: 1, b: 2, c: 3 }, { ...limits, maxNodes: 3 })).toBe(true);
    expect(isValidFlatObject({ a: 1, b: 2, c: 3 }, { ...limits, maxNodes: 2 })).toBe(false);
    expect(isValidFlatObject({ a: 1 }, { ...limits, maxDepth: 1 })).toBe(true);
    expect(isValidFlatObject({ a: 1 }, { ...limits, maxDepth: 0 })).toBe(false);
  });

  it("leaves everything else to the walk: nesting, forbidden or broken keys, NUL, lone surrogates, numbers out of range", () => {
    for (const value of [
      { a: {} }, { a: [] }, JSON.parse('{"__proto__":1}') as object, { "k\u0000": 1 }, { "\ud800": 1 },
      { a: "x\u0000" }, { a: "\udc00" }, { a: Infinity }, { a: -Infinity }, { a: NaN }, { a: undefined }, { a: 1n },
    ]) {
      expect(isValidFlatObject(value, limits)).toBe(false);
    }
  });
});

