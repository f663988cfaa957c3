/**
 * What `quarantine diff` and `quarantine replay` compute before any I/O: path-level payload
 * differences, the side-by-side columns, and the message a replay republishes.
 */
import { describe, expect, it } from "vitest";
import { payloadLines, sideBySide } from "../../src/quarantine/side-by-side.js";
import { decodePayload, payloadChanges } from "../../src/quarantine/payload-diff.js";
import { replayMessage } from "../../src/quarantine/replay.js";
import type { AuditRecord, QuarantineDetail } from "../../src/operations.js";

describe("payload differences", () => {
  it("lists changed, added and removed paths in order, through objects and arrays", () => {
    const stored = { amount: 100, lines: [{ sku: "a" }, { sku: "b" }], meta: { by: "x" }, "odd key": 1 };
    const incoming = { amount: 150, lines: [{ sku: "a" }, { sku: "c" }, { sku: "d" }], extra: true, "odd key": 1 };
    expect(payloadChanges(stored, incoming)).toEqual([
      { path: "$.amount", kind: "changed", stored: 100, incoming: 150 },
      { path: "$.extra", kind: "added", incoming: true },
      { path: "$.lines[1].sku", kind: "changed", stored: "b", incoming: "c" },
      { path: "$.lines[2]", kind: "added", incoming: { sku: "d" } },
      { path: "$.meta", kind: "removed", stored: { by: "x" } },
    ]);
    expect(payloadChanges({ a: [1, 2] }, { a: [1, 2] })).toEqual([]);
    expect(payloadChanges({ a: 1 }, [1])).toEqual([{ path: "$", kind: "changed", stored: { a: 1 }, incoming: [1] }]);
  });

  it("survives a deeply nested payload", () => {
    let deep: unknown = 1;
    for (let i = 0; i < 50_000; i++) deep = [deep];
    expect(payloadChanges(deep, deep)).toEqual([]);
  });

  it("marks lines only on one side", () => {
    const out = sideBySide(["a", "b", "c"], ["a", "c", "d"], 40, ["l", "r"]);
    expect(out.slice(2)).toEqual([`${"a".padEnd(20)}   a`, `${"b".padEnd(20)} <`, `${"c".padEnd(20)}   c`, `${"".padEnd(20)} > d`]); // columns are at least 20 wide
  });

  it("decodes JSON, keeps other text, and base64s what is not UTF-8", () => {
    expect(decodePayload(Buffer.from('{"a":1}'))).toEqual({ json: true, value: { a: 1 } });
    expect(decodePayload(Buffer.from("{broken"))).toEqual({ json: false, text: "{broken" });
    expect(decodePayload(Buffer.from([0xff, 0xfe]))).toEqual({ json: false, text: "base64://4=" });
  });
});

describe("side by side", () => {
  it("aligns common lines and marks changed lines", () => {
    const left = payloadLines({ json: true, value: { b: 2, a: 1, c: 3 } });
    const right = payloadLines({ json: true, value: { a: 1, b: 5, d: 4 } });
    const out = sideBySide(left, right, 60, ["stored", "new"]);
    expect(out[0]).toBe(`${"stored".padEnd(28)}   new`);
    expect(out.slice(1)).toEqual([
      "----------------------------   ----------------------------",
      "{                              {",
      '  "a": 1,                        "a": 1,',
      '  "b": 2,                    |   "b": 5,',
      '  "c": 3                     |   "d": 4',
      "}                              }",
    ]);
  });
});

describe("the replayed message", () => {
  const entry: QuarantineDetail = {
    id: 7, handler: "ledger", tenant: "t1", eventId: "e-1", reason: "conflict", detail: "", status: "held",
    fingerprint: "f2", storedFingerprint: "f1", occurrences: 1, body: Buffer.from('{"x":1}'), bodyTruncated: false,
    properties: JSON.stringify({
      fields: { exchange: "", routingKey: "ledger.events", redelivered: true },
      properties: {
        contentType: "application/json", messageId: "m-1", timestamp: 1_700_000_000, userId: "guest", expiration: "60000", deliveryMode: 1,
        headers: { "x-rabbit-inbox-retry-attempt": 2, "x-death": [{ count: 1 }], "x-delivery-count": 3, "trace-id": "abc" },
      },
    }),
    queue: "ledger.events", eventTime: null, firstSeen: new Date(), lastSeen: new Date(),
  };
  const audit: AuditRecord = { id: 3, quarantineId: 7, action: "replay", actor: "ops", reason: "r", options: "", at: new Date(), publishedAt: null, failure: null };

  it("keeps the body, the original timestamp and the producer's properties; drops bookkeeping; names the replay", () => {
    const message = replayMessage(entry, audit);
    expect(message.queue).toBe("ledger.events");
    expect(message.body.toString()).toBe('{"x":1}');
    expect(message.options).toEqual({
      contentType: "application/json", messageId: "m-1", timestamp: 1_700_000_000, persistent: true,
      headers: { "trace-id": "abc", "x-rabbit-inbox-replay-of": 7, "x-rabbit-inbox-replay-audit": 3, "x-rabbit-inbox-replayed-by": "ops" },
    });
  });
});
