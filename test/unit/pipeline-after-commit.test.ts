/**
 * Once a transaction committed, its outcome is the one reported: what runs after COMMIT (the
 * `after-commit` hook, the commit's metric, the outbox nudge for duplicates) is logged when it
 * throws and never runs the transaction again. Before, such a throw fell into the transaction's
 * retry loop: the committed batch ran again, came back as `duplicate` instead of `applied` after
 * a "transaction failed, retrying" line, and a config-kind throw there stopped the consumer
 * although its work had committed.
 */
import { describe, expect, it } from "vitest";
import { InboxConfigError } from "../../src/core/errors.js";
import type { InboxHandler } from "../../src/core/handler.js";
import { InboxPipeline, type PipelineOptions } from "../../src/core/pipeline.js";
import { noConsumerMetrics } from "../../src/observability/inbox-metrics.js";
import { type MemoryHandle, MemoryStore } from "../support/memory-store.js";
import { incomingMessage } from "../support/messages.js";
import { type LogLine, recordingLogger } from "../support/recording-logger.js";

type Body = { tenant: string; event_id: string };

const handler: InboxHandler<Body, MemoryHandle> = {
  name: "after-commit",
  handle(event, ctx) {
    ctx.tx.effects.push(event.event_id);
    return Promise.resolve();
  },
};

function setup(options: Partial<PipelineOptions<Body, MemoryHandle>>, store = new MemoryStore()) {
  const lines: LogLine[] = [];
  const pipeline = new InboxPipeline<Body, MemoryHandle>({
    store, handler, logger: recordingLogger(lines), retry: { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 2, maxTotalMs: 1000 }, ...options,
  });
  return { store, lines, pipeline };
}

const messages = () => [incomingMessage({ tenant: "t1", event_id: "e-1" }), incomingMessage({ tenant: "t1", event_id: "e-2" })];

describe.each([
  ["an after-commit hook that throws", { hook: (point: string) => { if (point === "after-commit") throw new Error("hook broke"); } }],
  ["an after-commit hook that throws a config error", { hook: (point: string) => { if (point === "after-commit") throw new InboxConfigError("hook misconfigured"); } }],
  ["an after-commit hook that rejects", { hook: (point: string) => (point === "after-commit" ? Promise.reject(new Error("hook broke")) : undefined) }],
  ["a commit metric that throws", { metrics: { ...noConsumerMetrics, transactionCommitted: () => { throw new Error("metric broke"); } } }],
] as const)("%s", (_what, options) => {
  it("leaves the committed outcome as it is: applied, one transaction, no retry; the failure is logged", async () => {
    const { store, lines, pipeline } = setup(options);
    const outcomes = await pipeline.process(messages());
    expect(outcomes.map((o) => o.kind)).toEqual(["applied", "applied"]);
    expect(store.transactions).toBe(1);
    expect(store.effects).toEqual(["e-1", "e-2"]);
    expect(lines.map((l) => l.message)).not.toContain("transaction failed, retrying");
    const logged = lines.filter((l) => l.message === "work after COMMIT failed; the committed outcome stands");
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatchObject({ level: "error", fields: { handler: "after-commit", messages: 2 } });
  });
});

describe("the outbox nudge for duplicates, after COMMIT", () => {
  it("a store whose nudge fails: the duplicates stand, and the next batch is unaffected", async () => {
    const store = new MemoryStore();
    let nudges = 0;
    (store as { resendOutbox?: () => Promise<number> }).resendOutbox = () => { nudges++; return Promise.reject(new Error("nudge broke")); };
    const { pipeline, lines } = setup({}, store);
    await pipeline.process(messages());
    expect((await pipeline.process(messages())).map((o) => o.kind)).toEqual(["duplicate", "duplicate"]);
    expect(nudges).toBe(1);
    expect(store.transactions).toBe(2);
    expect(lines.map((l) => l.message)).not.toContain("transaction failed, retrying");
  });
});
