import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { InboxPipeline } from "../../src/core/pipeline.js";
import { type InboxHandler, type Logger, OutboxRelay } from "../../src/index.js";
import { incomingMessage } from "../support/messages.js";
import { amqpUrl } from "../support/broker.js";
import {
  type OutboxTestDatabase, type OutboxTestStore, createOutboxDatabase, declareExchanges, deleteExchanges, eventually, randomExchangeName,
} from "../support/outbox.js";
import { onSelectedDatabases } from "../support/test-databases.js";

/**
 * A relay whose publishes keep failing (nothing bound to the exchange: every publish comes back
 * unroutable) against the real broker: the failure is logged once, then as one line per interval
 * with its count, never once per attempt.
 */
describe.each(onSelectedDatabases(["postgres", "sqlite"] as const))("outbox relay logs on %s", (kind) => {
  let db: OutboxTestDatabase;
  let store: OutboxTestStore;
  let exchange: string;

  beforeEach(async () => {
    db = await createOutboxDatabase(kind);
    store = await db.open();
    await store.migrate();
    exchange = randomExchangeName("outbox.noise");
    await declareExchanges(exchange);
  });

  afterEach(async () => {
    await store.close();
    await deleteExchanges(exchange);
    await db.remove();
  });

  it("100 identical failures make a bounded number of log lines, which carry the count", async () => {
    const lines: Array<{ level: string; msg: string; fields: Record<string, unknown> }> = [];
    const at = (level: string) => (msg: string, fields?: Record<string, unknown>) => { lines.push({ level, msg, fields: fields ?? {} }); };
    const logger: Logger = { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
    await store.outbox.transaction(async (_tx, publish) => { await publish(exchange, "nowhere", { n: 1 }); });
    const relay = new OutboxRelay({
      url: amqpUrl, store, logger, pollIntervalMs: 5, retryBaseDelayMs: 1, retryMaxDelayMs: 1, cleanupIntervalMs: 0, listen: false,
    });
    await relay.start();
    try {
      await eventually(() => (relay.counts.failed >= 100 ? true : undefined), "100 failed publishes", 60_000);
    } finally {
      await relay.stop();
    }
    const failures = relay.counts.failed;
    expect(failures).toBeGreaterThanOrEqual(100);
    const failureLines = lines.filter((l) => /keep failing to publish|publish failed/.test(l.msg));
    // One line at once and one summary per level (warn for the first attempts, error after ten).
    expect(failureLines.length).toBeGreaterThanOrEqual(2);
    expect(failureLines.length).toBeLessThanOrEqual(4);
    const counted = failureLines.reduce((n, l) => n + (typeof l.fields.repeated === "number" ? l.fields.repeated : 1), 0);
    expect(counted).toBe(failures);
    expect(failureLines.some((l) => typeof l.fields.repeated === "number" && l.fields.repeated > 50)).toBe(true);
    expect(failureLines.at(-1)?.fields.messages).toEqual([expect.objectContaining({ exchange, error: expect.stringMatching(/unroutable/) as string })]);
    // The row is still pending, counted: nothing was lost by logging less.
    const [row] = await db.rows();
    expect(row).toMatchObject({ sent: false });
    expect(row!.attempts).toBe(failures);
  });

  it("a burst of duplicates with unsent output nudges the relay every time but logs it once", async () => {
    const lines: Array<{ level: string; msg: string }> = [];
    const at = (level: string) => (msg: string) => { lines.push({ level, msg }); };
    const logger: Logger = { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
    const handler: InboxHandler<Record<string, unknown>, unknown> = {
      name: "noisy", async handle(_event, ctx) { await ctx.publish(exchange, "nowhere", { n: 1 }); },
    };
    const pipeline = new InboxPipeline({ store, logger, handler });
    const event = { tenant: "t1", event_id: "dup-burst" };
    expect((await pipeline.process([incomingMessage(event)])).map((o) => o.kind)).toEqual(["applied"]);
    for (let i = 0; i < 50; i++) {
      expect((await pipeline.process([incomingMessage(event, { redelivered: true })])).map((o) => o.kind)).toEqual(["duplicate"]);
    }
    expect(lines.filter((l) => /relay was nudged/.test(l.msg))).toEqual([{ level: "info", msg: "duplicates had unsent outbox messages; the relay was nudged" }]);
    // The nudges themselves still happened: the row is due now, not sent, never attempted.
    expect(await db.rows()).toEqual([expect.objectContaining({ sent: false, attempts: 0 })]);
  });
});
