/**
 * The properties an outbox row stores: the AMQP options of the publish, a JSON body's content
 * type, and the second the row was written. A publish without options takes a text made once
 * per second: it must be exactly the text the general encoding writes, and carry its own second.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { OutboxWriter } from "../../src/core/outbox-writer.js";

afterEach(() => {
  vi.useRealTimers();
});

const source = { tenant: "t1", handler: "h", eventId: "e1" };

async function propertiesOf(publish: (w: OutboxWriter) => Promise<unknown>): Promise<string[]> {
  const writer = new OutboxWriter(source);
  await publish(writer);
  return writer.seal().map((r) => r.properties);
}

describe("an outbox row's properties", () => {
  it("without options: the content type of a JSON body and the second it was written, the same text as with empty options", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(new Date("2026-12-03T10:00:00.250Z"));
    const second = Date.parse("2026-12-03T10:00:00Z") / 1000;
    const [json, bytes, withEmpty, withUndefined] = await propertiesOf(async (w) => {
      await w.publish("x", "k", { a: 1 });
      await w.publish("x", "k", Buffer.from("raw"));
      await w.publish("x", "k", { a: 1 }, { orderingKey: "o" });
      await w.publish("x", "k", { a: 1 }, { contentType: undefined });
    });
    expect(JSON.parse(json!)).toEqual({ contentType: "application/json", timestamp: second });
    expect(JSON.parse(bytes!)).toEqual({ timestamp: second });
    expect(withEmpty).toBe(json);
    expect(withUndefined).toBe(json);
  });

  it("carries the second of each publish, not the one the text was first made in", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(new Date("2026-12-03T10:00:00.999Z"));
    const writer = new OutboxWriter(source);
    await writer.publish("x", "k", { a: 1 });
    await writer.publish("x", "k", Buffer.from("raw"));
    vi.setSystemTime(new Date("2026-12-03T10:00:01.000Z"));
    await writer.publish("x", "k", { a: 2 });
    await writer.publish("x", "k", Buffer.from("raw"));
    const stamps = writer.seal().map((r) => (JSON.parse(r.properties) as { timestamp: number }).timestamp);
    const first = Date.parse("2026-12-03T10:00:00Z") / 1000;
    expect(stamps).toEqual([first, first, first + 1, first + 1]);
  });

  it("with options: those options, the JSON content type unless one is given, and the second", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(new Date("2026-12-03T10:00:00Z"));
    const [given, typed] = await propertiesOf(async (w) => {
      await w.publish("x", "k", { a: 1 }, { headers: { h: "v" }, priority: 3, correlationId: "c" });
      await w.publish("x", "k", { a: 1 }, { contentType: "application/cloudevents+json" });
    });
    expect(JSON.parse(given!)).toEqual({ correlationId: "c", contentType: "application/json", priority: 3, headers: { h: "v" }, timestamp: Date.parse("2026-12-03T10:00:00Z") / 1000 });
    expect(JSON.parse(typed!)).toEqual({ contentType: "application/cloudevents+json", timestamp: Date.parse("2026-12-03T10:00:00Z") / 1000 });
  });
});
