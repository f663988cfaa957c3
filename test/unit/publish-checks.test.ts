/**
 * What the outbox accepts at `publish` is what amqplib can put on the wire: the relay is never
 * handed a row that would throw at every publish attempt (and stay pending forever, holding its
 * ordering key). The headers check is held against amqplib's own field-table encoder, loaded
 * from its file (the package does not export it): every header set the writer accepts encodes,
 * and every one it refuses fails to encode, except the two refusals the writer adds on purpose
 * (deep nesting, and a "!" key that amqplib reads as a typed value).
 */
import { createRequire } from "node:module";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { InvalidPublishError } from "../../src/core/errors.js";
import { Outbox } from "../../src/outbox/outbox.js";
import { OutboxWriter } from "../../src/core/outbox-writer.js";
import type { OutboxJsonValue } from "../../src/core/publish-options.js";
import { publishOptions } from "../../src/outbox/relay-session.js";
import { MemoryStore } from "../support/memory-store.js";

const amqplibRequire = createRequire(createRequire(import.meta.url).resolve("amqplib"));
const codec = amqplibRequire("./lib/codec.js") as { encodeTable(buffer: Buffer, table: unknown, offset: number): number };
const defs = amqplibRequire("./lib/defs.js") as { encodeProperties(id: number, channel: number, size: number, fields: unknown): Buffer; BasicProperties: number };

/** Whether amqplib can encode these headers (in the 64 KiB buffer it encodes every message's headers into). */
function amqplibEncodes(headers: unknown): boolean {
  try {
    codec.encodeTable(Buffer.alloc(65_536), headers, 0);
    return true;
  } catch {
    return false;
  }
}

/** The writer's verdict: the stored row's headers as the relay reads them back, or the refusal. */
function written(headers: Record<string, OutboxJsonValue>): { headers: Record<string, unknown> } | { refused: InvalidPublishError } {
  const writer = new OutboxWriter(null);
  void writer.publish("x", "k", {}, { headers }).catch(() => undefined);
  const refused = writer.refusedPublish;
  if (refused) return { refused };
  const row = writer.seal()[0]!;
  return { headers: (JSON.parse(row.properties) as { headers: Record<string, unknown> }).headers };
}

const edgeNumbers = [0, -0, 1, -1, 127, 128, -128, -129, 32767, 32768, -32769, 2 ** 31, -(2 ** 31) - 1, 2 ** 50, 2 ** 50 + 0.5, -(2 ** 50) - 0.5,
  2 ** 53, 2 ** 63, -(2 ** 63), -(2 ** 64), 1e300, -1e300, 0.1, -2.5, Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER];
const key = fc.oneof(fc.string({ maxLength: 8 }), fc.constantFrom("k".repeat(255), "k".repeat(256), "é".repeat(128), "é".repeat(127)));
const leaf: fc.Arbitrary<OutboxJsonValue> = fc.oneof(
  fc.constantFrom(...edgeNumbers), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.integer(), fc.boolean(), fc.constant(null),
  fc.string({ maxLength: 20 }), fc.constantFrom("x".repeat(30_000), "x".repeat(65_000)),
);
const value: fc.Arbitrary<OutboxJsonValue> = fc.letrec<{ v: OutboxJsonValue }>((tie) => ({
  v: fc.oneof({ depthSize: "small", withCrossShrink: true }, leaf, fc.array(tie("v"), { maxLength: 4 }), fc.dictionary(key, tie("v"), { maxKeys: 4 })),
})).v;

describe("the headers a publish may carry", () => {
  it("are exactly those amqplib's encoder takes (nothing nested deeper than 32, no \"!\" keys)", () => {
    fc.assert(fc.property(fc.dictionary(key, value, { maxKeys: 6 }), (headers) => {
      const verdict = written(headers);
      if ("refused" in verdict) {
        expect(verdict.refused.field.startsWith("headers")).toBe(true);
        expect(amqplibEncodes(JSON.parse(JSON.stringify(headers)))).toBe(false);
      } else {
        expect(amqplibEncodes(verdict.headers)).toBe(true);
      }
    }), { numRuns: 500 });
  });

  it("takes a table of exactly 64 KiB and refuses one byte more, as amqplib does", () => {
    const fits = { a: "x".repeat(65_525) };
    expect(written(fits)).toHaveProperty("headers");
    expect(amqplibEncodes(fits)).toBe(true);
    const over = { a: "x".repeat(65_526) };
    expect(written(over)).toHaveProperty("refused");
    expect(amqplibEncodes(over)).toBe(false);
  });

  it("a row the writer accepts encodes as a whole message's properties, as the relay publishes it", () => {
    const writer = new OutboxWriter(null);
    void writer.publish("x", "k".repeat(255), "body", {
      headers: { big: "x".repeat(65_000), n: -(2 ** 63), f: 2 ** 63, list: [1, "a", null, { deep: true }] },
      type: "t".repeat(255), correlationId: "c".repeat(255), contentType: "text/plain", priority: 9, expiration: 1000, messageId: "m".repeat(255),
    });
    const row = writer.seal()[0]!;
    const options = publishOptions({ id: 1, messageId: row.messageId, exchange: row.exchange, routingKey: row.routingKey, body: row.body, properties: JSON.parse(row.properties) as Record<string, unknown>, orderingKey: null, attempts: 0 });
    expect(() => defs.encodeProperties(defs.BasicProperties, 1, row.body.length, options)).not.toThrow();
  });

  it.each([
    ["a typed value amqplib would take", { when: { "!": "timestamp", value: 1 } }, "headers.when", /has a "!" key/],
    ["nesting deeper than 32 levels", { deep: Array.from({ length: 32 }).reduce<OutboxJsonValue>((inner) => [inner], 1) }, `headers.deep${"[0]".repeat(31)}`, /nests deeper than 32 levels/],
    ["a key over 255 bytes, inside a table", { outer: { ["é".repeat(128)]: 1 } }, "headers.outer", /has a key of 256 bytes; AMQP carries at most 255/],
    ["a fraction amqplib would encode as a 64-bit integer", { n: 2 ** 50 + 0.5 }, "headers.n", /is 1125899906842624.5: amqplib encodes a number this large as a 64-bit integer/],
    ["an integer below -2^63", { n: -(2 ** 64) }, "headers.n", /below the smallest 64-bit integer/],
    ["a table over 64 KiB", { a: "x".repeat(40_000), b: "x".repeat(40_000) }, "headers", /headers encode to 80018 bytes; amqplib carries at most 65536/],
  ] as const)("refuses %s, naming where", (_what, headers, field, message) => {
    const verdict = written(headers);
    expect(verdict).toHaveProperty("refused");
    const { refused } = verdict as { refused: InvalidPublishError };
    expect(refused.field).toBe(field);
    expect(refused.message).toMatch(message);
  });
});

describe("publish outside a consumer", () => {
  it("rejects a bad call with an InvalidPublishError naming the field, and the transaction rolls back", async () => {
    const store = new MemoryStore();
    store.outbox = [];
    const outbox = new Outbox(store);
    const error = await outbox.transaction(async (_tx, publish) => {
      await publish("orders", "order.paid", { id: 1 });
      await publish("orders", "k".repeat(300), { id: 1 });
    }).then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidPublishError);
    expect(error).toMatchObject({ code: "RI_INVALID_PUBLISH", field: "routingKey", message: "publish: routingKey is 300 bytes; AMQP carries at most 255" });
    expect(store.outbox).toEqual([]);
  });

  it("takes its body limit from the transaction's options", async () => {
    const store = new MemoryStore();
    store.outbox = [];
    const outbox = new Outbox(store);
    const tooBig = outbox.transaction((_tx, publish) => publish("x", "k", Buffer.alloc(11)), { publishLimits: { maxBodyBytes: 10 } });
    await expect(tooBig).rejects.toThrow("publish: body is 11 bytes, over the limit of 10 (publishLimits.maxBodyBytes)");
    await outbox.transaction((_tx, publish) => publish("x", "k", Buffer.alloc(10)), { publishLimits: { maxBodyBytes: 10 } });
    expect(store.outbox.map((r) => r.body.length)).toEqual([10]);
  });
});
