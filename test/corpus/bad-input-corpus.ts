/**
 * The bad-input corpus: hundreds of ledger messages that must each be quarantined with reason
 * `invalid`, with 0 crashes and 0 business writes. Every case has a distinct body, so each
 * gets its own quarantine entry. Every would-be event targets account `a` of tenant `t1`
 * (which exists) with a positive delta, so a case wrongly accepted shows up in the balance.
 * `validControls` are well-formed events with odd headers or formatting that MUST apply.
 */
export interface CorpusCase {
  name: string;
  body: Buffer;
  contentType?: string;
  contentEncoding?: string;
  headers?: Record<string, unknown>;
}

const base = (id: string) => ({ type: "balance.adjusted", tenant: "t1", event_id: `bad-${id}`, account_id: "a", delta_cents: 1 });
const json = (value: unknown) => Buffer.from(JSON.stringify(value));
const text = (value: string) => Buffer.from(value, "utf8");

const WRONG_VALUES: ReadonlyArray<[string, unknown]> = [
  ["number", 42], ["zero", 0], ["negative", -1], ["float", 1.5], ["true", true], ["false", false], ["null", null],
  ["array", ["a"]], ["empty-array", []], ["object", { id: "a" }], ["empty-object", {}], ["nested-array", [[["x"]]]],
];

function wrongTypes(): CorpusCase[] {
  const cases: CorpusCase[] = [];
  for (const field of ["tenant", "event_id", "account_id", "type"]) {
    for (const [label, value] of WRONG_VALUES) {
      const id = `${field}-${label}`;
      // Keep the body distinct even when the bad field is event_id itself.
      cases.push({ name: `${field} is ${label}`, body: json({ ...base(id), [field]: value, case: id }) });
    }
    cases.push({ name: `${field} missing`, body: json((() => { const b: Record<string, unknown> = { ...base(`${field}-missing`), case: `${field}-missing` }; delete b[field]; return b; })()) });
  }
  const badDeltas: ReadonlyArray<[string, unknown]> = [
    ["string", "100"], ["numeric string", "1"], ["float", 1.5], ["tiny float", 0.0001], ["negative float", -2.25],
    ["2^53", 2 ** 53], ["2^53+1 text", "9007199254740993"], ["-2^53", -(2 ** 53)], ["1e300", 1e300], ["true", true],
    ["null", null], ["array", [1]], ["object", { cents: 1 }], ["empty string", ""], ["hex string", "0x10"],
  ];
  for (const [label, value] of badDeltas) cases.push({ name: `delta_cents is ${label}`, body: json({ ...base(`delta-${label}`), delta_cents: value }) });
  cases.push({ name: "delta_cents missing", body: json((() => { const b: Record<string, unknown> = base("delta-missing"); delete b.delta_cents; return b; })()) });
  // Numbers JSON.stringify cannot produce but a producer can send as text.
  for (const [label, literal] of [["2^53+1", "9007199254740993"], ["-2^53-1", "-9007199254740993"], ["1e400", "1e400"], ["-1e400", "-1e400"], ["1.0e2 float form", "100.5"], ["huge exponent", "1e99999"]] as const) {
    cases.push({ name: `delta_cents literal ${label}`, body: text(`{"type":"balance.adjusted","tenant":"t1","event_id":"bad-lit-${label}","account_id":"a","delta_cents":${literal}}`) });
  }
  for (const [label, value] of [["unknown type", "balance.deleted"], ["upper case", "BALANCE.ADJUSTED"], ["padded", " balance.adjusted"], ["empty", ""]] as const) {
    cases.push({ name: `type ${label}`, body: json({ ...base(`type-${label}`), type: value }) });
  }
  return cases;
}

function brokenJson(): CorpusCase[] {
  const good = JSON.stringify(base("broken"));
  const variants: string[] = [
    "", " ", "\n", "{", "}", "[", "]", "{]", "[}", "null", "true", "false", "0", "-1", "\"a string\"", "[]", "[1,2,3]",
    "[{\"type\":\"balance.adjusted\"}]", good.slice(0, -1), good.slice(1), good + "}", good + ",", good.replace(/"/g, "'"),
    good.replace(",", ",,"), good.replace("}", ",}"), good.replace(":", "="), "{type:balance.adjusted}", "{\"a\":NaN}",
    "{\"a\":Infinity}", "{\"a\":undefined}", "{\"a\":1}// comment", "/* c */{\"a\":1}", "{\"a\":01}", "{\"a\":.5}",
    "{\"a\":\"\\x41\"}", "{\"a\":\"\\u12\"}", "{\"a\":\"unterminated}", "{\"a\" \"b\"}", good + good, "\u0000" + good,
    "<xml/>", "event_id=e-1&tenant=t1", "{\"a\":1}\u0000", "\u00a0" + good.replace("{", "{ ,"),
  ];
  return variants.map((v, i) => ({ name: `broken JSON #${i} ${JSON.stringify(v.slice(0, 30))}`, body: text(v + (v.length === 0 ? "" : "")) }))
    // Distinct bodies: the empty ones differ by whitespace already; drop accidental repeats.
    .filter((c, i, all) => all.findIndex((o) => o.body.equals(c.body)) === i);
}

function invalidUtf8(): CorpusCase[] {
  const sequences: ReadonlyArray<[string, number[]]> = [
    ["lone continuation", [0x80]], ["lone continuation 2", [0xbf]], ["overlong slash", [0xc0, 0xaf]], ["overlong nul", [0xc0, 0x80]],
    ["overlong 3-byte", [0xe0, 0x80, 0xaf]], ["utf-16 surrogate high", [0xed, 0xa0, 0x80]], ["utf-16 surrogate low", [0xed, 0xbf, 0xbf]],
    ["truncated 2-byte", [0xc3]], ["truncated 3-byte", [0xe2, 0x82]], ["truncated 4-byte", [0xf0, 0x9f, 0x98]], ["0xff", [0xff]],
    ["0xfe", [0xfe]], ["beyond U+10FFFF", [0xf4, 0x90, 0x80, 0x80]], ["5-byte form", [0xf8, 0x88, 0x80, 0x80, 0x80]], ["latin-1 e-acute", [0xe9]],
  ];
  const cases: CorpusCase[] = [];
  for (const [label, bytes] of sequences) {
    for (const field of ["tenant", "account_id"]) {
      const prefix = Buffer.from(`{"type":"balance.adjusted","event_id":"bad-utf8-${label}-${field}","delta_cents":1,"${field === "tenant" ? "account_id" : "tenant"}":"${field === "tenant" ? "a" : "t1"}","${field}":"`);
      cases.push({ name: `invalid UTF-8 (${label}) in ${field}`, body: Buffer.concat([prefix, Buffer.from(bytes), Buffer.from("\"}")]) });
    }
  }
  return cases;
}

function nesting(): CorpusCase[] {
  const cases: CorpusCase[] = [];
  for (const depth of [33, 64, 1000, 10_000, 100_000]) {
    cases.push({ name: `arrays nested ${depth} deep`, body: text(`{"type":"balance.adjusted","tenant":"t1","event_id":"bad-deep-a-${depth}","account_id":"a","delta_cents":1,"meta":${"[".repeat(depth)}${"]".repeat(depth)}}`) });
    cases.push({ name: `objects nested ${depth} deep`, body: text(`{"type":"balance.adjusted","tenant":"t1","event_id":"bad-deep-o-${depth}","account_id":"a","delta_cents":1,"meta":${"{\"x\":".repeat(depth)}1${"}".repeat(depth)}}`) });
  }
  cases.push({ name: "100 000-deep nesting without a wrapper object", body: text("[".repeat(100_000) + "]".repeat(100_000)) });
  cases.push({ name: "wide document (20 000 keys)", body: json({ ...base("wide"), meta: Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`k${i}`, i])) }) });
  return cases;
}

function pollution(): CorpusCase[] {
  const event = (id: string) => JSON.stringify(base(id)).slice(0, -1);
  return [
    ["top-level __proto__", `${event("proto-top")},"__proto__":{"isAdmin":true}}`],
    ["top-level __proto__ null", `${event("proto-null")},"__proto__":null}`],
    ["nested __proto__", `${event("proto-nested")},"meta":{"__proto__":{"polluted":1}}}`],
    ["__proto__ in array", `${event("proto-array")},"meta":[{"__proto__":{"x":1}}]}`],
    ["deep __proto__", `${event("proto-deep")},"meta":{"a":{"b":{"__proto__":{"c":1}}}}}`],
    ["constructor.prototype", `${event("ctor")},"constructor":{"prototype":{"polluted":true}}}`],
    ["nested constructor.prototype", `${event("ctor-nested")},"meta":{"constructor":{"prototype":{"x":1}}}}`],
    ["__proto__ as delta holder", `{"type":"balance.adjusted","tenant":"t1","event_id":"bad-proto-delta","account_id":"a","__proto__":{"delta_cents":5}}`],
    ["__proto__ carrying tenant", `{"type":"balance.adjusted","event_id":"bad-proto-tenant","account_id":"a","delta_cents":1,"__proto__":{"tenant":"t1"}}`],
    ["escaped __proto__ key", `${event("proto-escaped")},"\\u005f\\u005fproto\\u005f\\u005f":{"x":1}}`],
  ].map(([name, body]) => ({ name: name!, body: text(body!) }));
}

function identifiers(): CorpusCase[] {
  const cases: CorpusCase[] = [];
  const values: ReadonlyArray<[string, string]> = [
    ["empty", ""], ["257 chars", "x".repeat(257)], ["4096 chars", "y".repeat(4096)], ["space only", " "], ["leading space", " a"],
    ["trailing space", "a "], ["tab", "a\tb"], ["newline", "a\nb"], ["carriage return", "a\rb"], ["unit separator", "a\u001fb"],
    ["DEL", "a\u007fb"], ["NUL", "a\u0000b"], ["escape", "\u001b[31m"],
  ];
  for (const field of ["tenant", "event_id", "account_id"]) {
    for (const [label, value] of values) {
      cases.push({ name: `${field} ${label}`, body: json({ ...base(`id-${field}-${label}`), [field]: value, case: `${field}-${label}` }) });
    }
  }
  cases.push({ name: "NUL inside an unrelated field", body: json({ ...base("nul-meta"), meta: "a\u0000b" }) });
  return cases;
}

function transport(): CorpusCase[] {
  const cases: CorpusCase[] = [];
  for (const contentType of ["text/xml", "application/octet-stream", "image/png", "application/x-www-form-urlencoded", "multipart/form-data"]) {
    cases.push({ name: `content type ${contentType}`, body: json(base(`ct-${contentType}`)), contentType });
  }
  for (const contentEncoding of ["gzip", "deflate", "br", "base64"]) {
    cases.push({ name: `content encoding ${contentEncoding}`, body: json(base(`ce-${contentEncoding}`)), contentEncoding });
  }
  cases.push({ name: "body over the 1 MiB limit", body: json({ ...base("huge"), padding: "p".repeat(1024 * 1024) }) });
  cases.push({ name: "body of 5 MiB", body: json({ ...base("huge5"), padding: "q".repeat(5 * 1024 * 1024) }) });
  // Odd headers do not make an event invalid by themselves: these pair them with bad bodies.
  const oddHeaders: ReadonlyArray<Record<string, unknown>> = [
    { "x-delivery-count": "many" }, { "x-rabbit-inbox-retry": -5 }, { "x-rabbit-inbox-retry": "2" }, { "x-death": "not-a-list" },
    { "x-rabbit-inbox-reason": "conflict" }, { "x-big": "h".repeat(10_000) }, { "x-nested": { a: { b: { c: [1, 2, { d: null }] } } } },
    { "": "empty header name" }, { "x-number": Number.MAX_SAFE_INTEGER }, { "x-bool": false },
  ];
  oddHeaders.forEach((headers, i) => cases.push({ name: `odd header #${i} with an invalid body`, body: text(`{"type":"balance.adjusted","event_id":"bad-hdr-${i}"`), headers }));
  return cases;
}

export function badInputCorpus(): CorpusCase[] {
  const all = [...wrongTypes(), ...brokenJson(), ...invalidUtf8(), ...nesting(), ...pollution(), ...identifiers(), ...transport()];
  const seen = new Set<string>();
  for (const c of all) {
    const key = c.body.toString("base64");
    if (seen.has(key)) throw new Error(`corpus case "${c.name}" repeats another case's body`);
    seen.add(key);
  }
  return all;
}

/** Well-formed events with odd but legal headers and formatting: each must apply once. */
export function validControls(): Array<CorpusCase & { deltaCents: number }> {
  return [
    { name: "pretty-printed with odd key order", body: text(`{\n  "delta_cents": 2,\n  "account_id": "a",\n  "event_id": "ok-pretty",\n  "tenant": "t1",\n  "type": "balance.adjusted"\n}`), deltaCents: 2 },
    { name: "unicode ids elsewhere", body: json({ type: "balance.adjusted", tenant: "t1", event_id: "ok-ünïcødé-事件-🐇", account_id: "a", delta_cents: 3 }), deltaCents: 3 },
    { name: "odd headers", body: json({ type: "balance.adjusted", tenant: "t1", event_id: "ok-headers", account_id: "a", delta_cents: 5 }), headers: { "x-big": "h".repeat(5000), "x-nested": { a: [1, { b: null }] }, "x-delivery-count": "n/a" }, deltaCents: 5 },
    { name: "no content type", body: json({ type: "balance.adjusted", tenant: "t1", event_id: "ok-no-ct", account_id: "a", delta_cents: 7 }), contentType: "", deltaCents: 7 },
    { name: "text/plain JSON", body: json({ type: "balance.adjusted", tenant: "t1", event_id: "ok-text", account_id: "a", delta_cents: 11 }), contentType: "text/plain", deltaCents: 11 },
    { name: "negative delta at the safe limit", body: json({ type: "balance.adjusted", tenant: "t1", event_id: "ok-neg", account_id: "a", delta_cents: -13 }), deltaCents: -13 },
    { name: "256-char event id", body: json({ type: "balance.adjusted", tenant: "t1", event_id: "k".repeat(256), account_id: "a", delta_cents: 17 }), deltaCents: 17 },
    { name: "extra fields ignored", body: json({ type: "balance.adjusted", tenant: "t1", event_id: "ok-extra", account_id: "a", delta_cents: 19, note: "hi", tags: ["x"] }), deltaCents: 19 },
  ];
}
