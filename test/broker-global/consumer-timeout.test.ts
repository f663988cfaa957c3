/**
 * `consumer_timeout` expiry (issue #3 item 6) against the real broker: a handler slower than the
 * broker's acknowledgement timeout gets its channel closed with 406 PRECONDITION_FAILED. The
 * consumer logs it, reconnects, never acks the stale delivery tags on the new channel, and the
 * redelivered messages are settled as duplicates by the dedup record: every event applied once.
 *
 * The timeout is a broker-wide setting: this file runs in the `broker-global` project, on a
 * standalone node the tests start for themselves (never the system broker), and puts the
 * setting back.
 */
import { randomBytes } from "node:crypto";
import { afterEach, expect, it } from "vitest";
import { InboxConsumer } from "../../src/index.js";
import { amqpUrl, deleteConsumerQueues, messagesReady, publishAll, waitFor } from "../support/broker.js";
import { shortenConsumerTimeout } from "../support/broker-settings.js";
import { type LogLine, collectingLogger, effectsHandler, sqliteWithEffects } from "../support/sqlite-effects.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

it("a handler slower than consumer_timeout: the channel is closed by the broker, the consumer recovers, each event applies once", async () => {
  const TIMEOUT_MS = 1500;
  const restore = await shortenConsumerTimeout(TIMEOUT_MS, 250);
  cleanups.push(restore);

  const { store, effects, remove } = await sqliteWithEffects();
  cleanups.push(remove);

  const queue = `ri.test.consumer-timeout.${randomBytes(5).toString("hex")}`;
  cleanups.push(() => deleteConsumerQueues(queue));
  let slowRuns = 0;
  // The first time only: hold the delivery unacked past the broker's timeout.
  const handler = effectsHandler("timeout-test", async (event) => {
    if (event.event_id === "slow" && slowRuns++ === 0) await new Promise((resolve) => setTimeout(resolve, TIMEOUT_MS * 3));
  });
  const logs: LogLine[] = [];
  const consumer = new InboxConsumer({ url: amqpUrl, queue, store, handler, logger: collectingLogger(logs), reconnectBaseDelayMs: 50, batchSize: 1 });
  cleanups.push(() => consumer.stop());
  await consumer.start();
  await publishAll(queue, [{ tenant: "t1", event_id: "before" }, { tenant: "t1", event_id: "slow" }, { tenant: "t1", event_id: "after" }]);

  await waitFor(async () => effects().size === 3 && consumer.outcomeCounts.duplicate >= 1 && (await messagesReady(queue)) === 0, 30_000,
    `every event settled after the timeout\n${JSON.stringify(logs.filter((l) => l.level !== "debug"), null, 1)}`);
  await consumer.stop();

  // The broker closed the channel for the timeout, and the consumer said so and reconnected.
  expect(logs.some((l) => l.level === "warn" && /timed out/.test(JSON.stringify(l.fields)))).toBe(true);
  expect(logs.some((l) => l.message === "AMQP session restored")).toBe(true);
  // The slow event committed on the closed channel; its redelivery was a duplicate, not a second effect.
  expect(effects()).toEqual(new Map([["before", 1], ["slow", 1], ["after", 1]]));
  expect(slowRuns).toBe(1);
  expect(await store.countInbox("timeout-test")).toBe(3);
  // No ack of a stale tag reached the new channel (that would close it with "unknown delivery tag").
  expect(logs.some((l) => /unknown delivery tag/i.test(JSON.stringify(l.fields)))).toBe(false);
  expect(await messagesReady(queue)).toBe(0);
});
