/**
 * `@opentelemetry/api` is an optional peer dependency: an application without it must be able
 * to import and run the library. Here the module loader refuses it (as Node does when it is not
 * installed): the consumer still applies, quarantines and writes outbox rows, with the headers
 * exactly as they came or as the handler gave them.
 */
import type * as NodeModule from "node:module";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { PermanentEventError } from "../../src/core/errors.js";
import type { InboxHandler } from "../../src/core/handler.js";
import { tracingApi } from "../../src/observability/tracing.js";
import type { FakeBroker } from "../support/fake-amqp.js";
import { type TestEvent, fakeBrokerPerTest, until } from "../support/fake-consumer.js";
import { type MemoryHandle, MemoryStore } from "../support/memory-store.js";

vi.mock("amqplib", async () => (await import("../support/fake-amqp.js")).amqplibOverFakeBroker());
vi.mock("node:module", async (importOriginal) => {
  const original = await importOriginal<typeof NodeModule>();
  return {
    ...original,
    createRequire: (url: string | URL) => {
      const require = original.createRequire(url);
      return Object.assign((id: string) => {
        if (id === "@opentelemetry/api") throw Object.assign(new Error(`Cannot find module '${id}'`), { code: "MODULE_NOT_FOUND" });
        return require(id) as unknown;
      }, require);
    },
  };
});

const env = fakeBrokerPerTest();
let broker: FakeBroker;
beforeEach(() => {
  broker = env.broker;
});

const TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
const event = (eventId: string) => ({ tenant: "t1", event_id: eventId });

describe("without @opentelemetry/api installed", () => {
  it("loads no API (the premise of this file)", () => {
    expect(tracingApi()).toBeUndefined();
  });

  it("applies, writes outbox rows with the handler's headers only, and copies quarantined messages unchanged", async () => {
    const store = new MemoryStore();
    store.outbox = [];
    const handler: InboxHandler<TestEvent, MemoryHandle> = {
      name: "no-api",
      async handleBatch(items) {
        for (const { event: e, ctx } of items) {
          if (e.event_id.startsWith("never")) return [{ index: items.findIndex((i) => i.event === e), reason: "account_closed", detail: "closed" }];
          await ctx.publish("downstream", "event.applied", { id: e.event_id }, { headers: { origin: "handler" } });
        }
        return [];
      },
      async handle(e, ctx) {
        if (e.event_id.startsWith("never")) throw new PermanentEventError("account_closed", "closed");
        await ctx.publish("downstream", "event.applied", { id: e.event_id }, { headers: { origin: "handler" } });
      },
    };
    const { consumer } = env.build({ handler, store });
    await consumer.start();
    broker.publishJson("work", event("e-1"), { headers: { traceparent: TRACEPARENT } });
    broker.publishJson("work", event("e-2"));
    broker.publishJson("work", event("never-1"), { headers: { traceparent: TRACEPARENT } });
    await until(() => consumer.outcomeCounts.applied === 2 && consumer.outcomeCounts.quarantined === 1, "all settled");

    expect(store.outbox.map((r) => (JSON.parse(r.properties) as { headers: unknown }).headers)).toEqual([{ origin: "handler" }, { origin: "handler" }]);
    const [copy] = broker.framesOf("publish").filter((f) => f.routingKey === "work.quarantine");
    expect((copy!.properties.headers as Record<string, unknown>).traceparent).toBe(TRACEPARENT);
  });
});
