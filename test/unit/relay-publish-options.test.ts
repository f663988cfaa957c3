import { createRequire } from "node:module";
import { describe, expect, it } from "vitest";
import type { OutboxRow } from "../../src/core/store-contract/outbox-relay-store.js";
import { publishOptions } from "../../src/outbox/relay-session.js";

const amqplibRequire = createRequire(createRequire(import.meta.url).resolve("amqplib"));
const args = amqplibRequire("./lib/api_args.js") as { publish: (exchange: string, routingKey: string, options: object) => Record<string, unknown> };
const defs = amqplibRequire("./lib/defs.js") as {
  BasicProperties: number;
  encodeProperties: (id: number, channel: number, size: number, fields: object) => Buffer;
  decode: (id: number, buffer: Buffer) => Record<string, unknown>;
};

function rowWith(properties: Record<string, unknown>): OutboxRow {
  return { id: 1, messageId: "msg-1", exchange: "x", routingKey: "k", body: Buffer.from("{}"), properties, orderingKey: null, attempts: 0 };
}

/** The properties a consumer receives for these publish options, through amqplib's own encoder and decoder. */
function received(options: object): Record<string, unknown> {
  const frame = defs.encodeProperties(defs.BasicProperties, 1, 2, args.publish("x", "k", options));
  // A header frame: type, channel, size, then class, weight, body size (12 bytes) before the flags.
  const decoded = defs.decode(defs.BasicProperties, frame.subarray(7 + 12, frame.length - 1));
  return Object.fromEntries(Object.entries(decoded).filter(([, v]) => v !== undefined));
}

describe("publishOptions (how the relay publishes a row)", () => {
  it("carries every stored property, persistent and mandatory, with the row's message id", () => {
    const headers = { tenant: "t1", n: 3 };
    const options = publishOptions(rowWith({
      contentType: "application/json", contentEncoding: "gzip", type: "balance.changed", correlationId: "c-1", replyTo: "r",
      expiration: "5000", appId: "ledger", priority: 4, timestamp: 1_700_000_000, headers,
    }));
    expect(options).toMatchObject({
      persistent: true, mandatory: true, messageId: "msg-1", contentType: "application/json", contentEncoding: "gzip", type: "balance.changed",
      correlationId: "c-1", replyTo: "r", expiration: "5000", appId: "ledger", priority: 4, timestamp: 1_700_000_000, headers: { tenant: "t1", n: 3 },
    });
    // A copy: the row's properties may be shared by other rows.
    expect(options.headers).not.toBe(headers);
    expect(received(options)).toEqual({
      contentType: "application/json", contentEncoding: "gzip", headers: { tenant: "t1", n: 3 }, deliveryMode: 2, priority: 4,
      correlationId: "c-1", replyTo: "r", expiration: "5000", messageId: "msg-1", timestamp: 1_700_000_000, type: "balance.changed", appId: "ledger",
    });
  });

  it("sends nothing for a property the row does not have or holds with the wrong type", () => {
    const options = publishOptions(rowWith({ contentType: 7, priority: "4", timestamp: "now", headers: ["a"], appId: null }));
    expect(Object.entries(options).filter(([, v]) => v !== undefined)).toEqual([["persistent", true], ["mandatory", true], ["messageId", "msg-1"]]);
    expect(received(options)).toEqual({ headers: {}, deliveryMode: 2, messageId: "msg-1" });
    expect(received(publishOptions(rowWith({})))).toEqual({ headers: {}, deliveryMode: 2, messageId: "msg-1" });
  });
});
