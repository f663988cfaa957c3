/**
 * A handler's `ctx.publish` that AMQP could not carry (a routing key over 255 bytes, a header
 * amqplib cannot encode, a body over the cap...) is that event's permanent failure: the event is
 * quarantined as `invalid_publish` with a detail that names the field, and the other events of
 * its batch apply once, with their messages. Before, the call threw an InboxConfigError, the
 * pipeline rejected the whole batch and the consumer stopped; the event came back after every
 * restart until its redeliveries ran out and it was quarantined as `retries_exhausted`, without
 * its cause.
 */
import { describe, expect, it } from "vitest";
import type { BatchItem, HandlerContext, InboxHandler } from "../../src/core/handler.js";
import { InvalidPublishError } from "../../src/core/errors.js";
import { InboxPipeline, type PipelineOptions } from "../../src/core/pipeline.js";
import type { OutboxPublishOptions } from "../../src/core/publish-options.js";
import { type MemoryHandle, memoryStoreWithOutbox } from "../support/memory-store.js";
import { incomingMessage } from "../support/messages.js";
import { type LogLine, recordingLogger } from "../support/recording-logger.js";

type Body = { tenant: string; event_id: string; bad?: string };

/** What each bad event publishes: one valid message first (it must not survive), then the bad one. */
const badCalls: Record<string, { routingKey?: string; body?: unknown; options?: OutboxPublishOptions; field: string }> = {
  "long-key": { routingKey: "k".repeat(300), field: "routingKey" },
  "header-key": { options: { headers: { ["h".repeat(256)]: 1 } }, field: "headers" },
  "typed-header": { options: { headers: { when: { "!": "timestamp", value: "soon" } } }, field: "headers.when" },
  "huge-header": { options: { headers: { blob: "x".repeat(70_000) } }, field: "headers" },
  "big-body": { body: "x".repeat(2048), field: "body" },
  "bigint-body": { body: { n: 1n }, field: "body" },
  "long-type": { options: { type: "t".repeat(256) }, field: "type" },
};

async function publishFor(event: Body, ctx: HandlerContext<MemoryHandle>): Promise<void> {
  ctx.tx.effects.push(event.event_id);
  await ctx.publish("events", "changed", { caused_by: event.event_id });
  const bad = event.bad ? badCalls[event.bad]! : undefined;
  if (bad) await ctx.publish("events", bad.routingKey ?? "changed", bad.body ?? { again: event.event_id }, bad.options);
}

function setup(handler: Omit<InboxHandler<Body, MemoryHandle>, "name">, options: Partial<PipelineOptions<Body, MemoryHandle>> = {}) {
  const store = memoryStoreWithOutbox();
  const lines: LogLine[] = [];
  const pipeline = new InboxPipeline<Body, MemoryHandle>({
    store, handler: { name: "billing", ...handler }, logger: recordingLogger(lines),
    retry: { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 2, maxTotalMs: 1000 },
    publishLimits: { maxBodyBytes: 1024 },
    ...options,
  });
  return { store, lines, pipeline };
}

const message = (eventId: string, bad?: string) => incomingMessage({ tenant: "t1", event_id: eventId, ...(bad ? { bad } : {}) });

describe.each([
  ["handle()", { handle: publishFor }],
  ["handleBatch()", {
    async handleBatch(items: ReadonlyArray<BatchItem<Body, MemoryHandle>>) {
      for (const { event, ctx } of items) await publishFor(event, ctx);
    },
  }],
] as const)("a bad publish from %s", (_name, handler) => {
  it.each(Object.entries(badCalls))("%s: only that event is quarantined, with the field named; the rest of the batch applies once, with its messages", async (bad, { field }) => {
    const { store, pipeline, lines } = setup(handler);
    const outcomes = await pipeline.process([message("e-1"), message("e-2", bad), message("e-3")]);
    expect(outcomes.map((o) => o.kind)).toEqual(["applied", "quarantined", "applied"]);
    const quarantined = outcomes[1]!;
    expect(quarantined).toMatchObject({ reason: "invalid_publish", key: { tenant: "t1", eventId: "e-2" } });
    expect((quarantined as { detail: string }).detail).toContain(`publish: ${field} `);
    expect(store.quarantined.map((r) => [r.key?.eventId, r.reason])).toEqual([["e-2", "invalid_publish"]]);
    // Nothing of e-2 committed: neither its business write nor the valid message it published first.
    expect(store.effects).toEqual(["e-1", "e-3"]);
    expect(store.outbox!.map((r) => r.source?.eventId)).toEqual(["e-1", "e-3"]);
    expect([...store.dedup.keys()].length).toBe(2);
    // Not a failed attempt: never retried in process, never a reason to stop.
    expect(lines.filter((l) => l.message === "transaction failed, retrying")).toEqual([]);
  });
});

describe("a bad publish, and what it is not", () => {
  it("rejects at the call with an InvalidPublishError that names the field, a permanent error whose reason is invalid_publish", async () => {
    const seen: unknown[] = [];
    const { pipeline } = setup({
      async handle(event, ctx) {
        await ctx.publish("events", "k".repeat(256), {}).catch((error: unknown) => { seen.push(error); throw error; });
      },
    });
    await pipeline.process([message("e-1")]);
    expect(seen[0]).toBeInstanceOf(InvalidPublishError);
    expect(seen[0]).toMatchObject({ code: "RI_INVALID_PUBLISH", kind: "permanent", reason: "invalid_publish", field: "routingKey" });
    expect((seen[0] as Error).message).toBe("publish: routingKey is 256 bytes; AMQP carries at most 255");
  });

  it("a handler that catches the rejection decides: its event applies, without that message", async () => {
    const { store, pipeline } = setup({
      async handle(event, ctx) {
        ctx.tx.effects.push(event.event_id);
        await ctx.publish("events", "k".repeat(300), {}).catch(() => undefined);
        await ctx.publish("events", "fine", {});
      },
    });
    expect((await pipeline.process([message("e-1")])).map((o) => o.kind)).toEqual(["applied"]);
    expect(store.outbox!.map((r) => r.routingKey)).toEqual(["fine"]);
  });

  it("a body at the cap is accepted; the cap defaults to 16 MiB", async () => {
    const { store, pipeline } = setup({ handle: (event, ctx) => ctx.publish("events", "k", Buffer.alloc(1024)).then(() => undefined) });
    expect((await pipeline.process([message("e-1")])).map((o) => o.kind)).toEqual(["applied"]);
    expect(store.outbox![0]!.body.length).toBe(1024);
    const defaults = setup({ handle: (event, ctx) => ctx.publish("events", "k", Buffer.alloc(16 * 1024 * 1024 + 1)).then(() => undefined) }, { publishLimits: {} });
    expect(await defaults.pipeline.process([message("e-1")])).toMatchObject([{ kind: "quarantined", reason: "invalid_publish" }]);
  });

  it("a handler that wraps the rejection in an error of its own: still that event's failure, not retried", async () => {
    const { store, pipeline, lines } = setup({
      async handleBatch(items) {
        for (const { event, ctx } of items) {
          try {
            await publishFor(event, ctx);
          } catch (error) {
            throw new Error("my batch failed", { cause: error });
          }
        }
      },
    });
    const outcomes = await pipeline.process([message("e-1"), message("e-2", "long-key"), message("e-3")]);
    expect(outcomes.map((o) => o.kind)).toEqual(["applied", "quarantined", "applied"]);
    expect(outcomes[1]).toMatchObject({ reason: "invalid_publish" });
    expect(store.effects).toEqual(["e-1", "e-3"]);
    expect(lines.map((l) => l.message)).not.toContain("transaction failed, retrying");
  });
});
