/**
 * The identity of a quarantine entry, which every store uses to count a message that comes back
 * as another occurrence of the same entry rather than a second entry.
 */
import { describe, expect, it } from "vitest";
import { sha256Hex } from "../../src/core/fingerprint.js";
import { type QuarantineRecord, quarantineDedupKey } from "../../src/core/store-contract/store.js";

function record(body: string, over: Partial<QuarantineRecord> = {}): QuarantineRecord {
  const bytes = Buffer.from(body);
  return {
    handler: "ledger", key: { tenant: "t1", eventId: "e-1" }, reason: "conflict", detail: "d", fingerprint: "f1", storedFingerprint: null,
    bodySha256: sha256Hex(bytes), body: bytes, bodyTruncated: false, properties: "{}", queue: "q", ...over,
  };
}

describe("quarantineDedupKey", () => {
  it("is the event key and payload fingerprint when both are known: the same event in other bytes is one entry", () => {
    const a = record('{"tenant":"t1","event_id":"e-1","x":1}');
    const b = record('{ "x": 1, "event_id": "e-1", "tenant": "t1" }');
    expect(a.bodySha256).not.toBe(b.bodySha256);
    expect(quarantineDedupKey(a)).toBe(quarantineDedupKey(b));
    expect(quarantineDedupKey(a)).toBe(`event:${JSON.stringify(["t1", "e-1", "f1"])}`);
  });

  it("tells apart other payloads, events and tenants", () => {
    const base = quarantineDedupKey(record("x"));
    expect(quarantineDedupKey(record("x", { fingerprint: "f2" }))).not.toBe(base);
    expect(quarantineDedupKey(record("x", { key: { tenant: "t1", eventId: "e-2" } }))).not.toBe(base);
    expect(quarantineDedupKey(record("x", { key: { tenant: "t2", eventId: "e-1" } }))).not.toBe(base);
  });

  it("falls back on the body's hash when the message has no readable key or no fingerprint", () => {
    const noKey = record("not json", { key: null, fingerprint: null });
    expect(quarantineDedupKey(noKey)).toBe(`body:${noKey.bodySha256}`);
    const noFingerprint = record('{"tenant":"t1","event_id":"e-1"}', { fingerprint: null });
    expect(quarantineDedupKey(noFingerprint)).toBe(`body:${noFingerprint.bodySha256}`);
  });
});
