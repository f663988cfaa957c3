/**
 * A connection blocked by a broker resource alarm (issue #3 item 6) against the real broker: with
 * the memory alarm raised, the broker stops reading from a connection once it publishes, so a
 * quarantine publish is never confirmed. The consumer logs the block, never acks the original
 * without a confirmed quarantine copy, and once the alarm clears everything settles: valid events
 * applied once, the malformed one quarantined once in the database (occurrences counted), a copy
 * in the quarantine queue, nothing left in the work queue.
 *
 * The alarm blocks every publisher on the broker: this file runs in the `broker-global` project,
 * on a standalone node the tests start for themselves (never the system broker), and clears the
 * alarm in any case.
 */
import { randomBytes } from "node:crypto";
import { afterEach, expect, it } from "vitest";
import { InboxConsumer } from "../../src/index.js";
import { amqpUrl, deleteConsumerQueues, drainQueue, messagesReady, publishAll, waitFor, withChannel } from "../support/broker.js";
import { alarmsActive, raiseMemoryAlarm } from "../support/broker-settings.js";
import { type LogLine, collectingLogger, effectsHandler, sqliteWithEffects } from "../support/sqlite-effects.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

it("a connection blocked by a memory alarm: nothing acked without its confirmed quarantine copy, everything settles once the alarm clears", async () => {
  const { store, effects, remove } = await sqliteWithEffects();
  cleanups.push(remove);

  const queue = `ri.test.blocked.${randomBytes(5).toString("hex")}`;
  cleanups.push(() => deleteConsumerQueues(queue));
  const handler = effectsHandler("blocked-test");
  // Published before the alarm: during it the test's own publisher would be blocked too.
  await withChannel((ch) => ch.assertQueue(queue, { durable: true }));
  await publishAll(queue, [{ tenant: "t1", event_id: "before" }, "{ not json", { tenant: "t1", event_id: "after" }]);
  const restore = await raiseMemoryAlarm();
  cleanups.push(restore);
  await waitFor(alarmsActive, 10_000, "the memory alarm");

  const logs: LogLine[] = [];
  const consumer = new InboxConsumer({
    url: amqpUrl, queue, store, handler, logger: collectingLogger(logs),
    confirmTimeoutMs: 1000, requeueDelayMs: 200, batchSize: 1,
  });
  cleanups.push(() => consumer.stop());
  await consumer.start();
  const dump = () => JSON.stringify(logs.filter((l) => l.level !== "debug"), null, 1);

  // Blocked: the quarantine copy cannot be confirmed, so the malformed message is not acked.
  await waitFor(() => logs.some((l) => l.message.startsWith("quarantine publish not confirmed")), 15_000, `an unconfirmed quarantine publish\n${dump()}`);
  expect(logs.some((l) => l.message.startsWith("broker blocked the connection"))).toBe(true);
  await waitFor(() => effects().size === 2, 10_000, `the valid events applied while blocked\n${dump()}`);
  expect(effects()).toEqual(new Map([["before", 1], ["after", 1]]));
  expect(consumer.outcomeCounts.requeue).toBeGreaterThanOrEqual(1);

  await restore();
  await waitFor(async () => !(await alarmsActive()), 10_000, "the alarm to clear");
  await waitFor(() => logs.some((l) => l.message === "event quarantined"), 20_000, `the quarantine copy confirmed after the alarm\n${dump()}`);
  await consumer.stop();

  expect(logs.some((l) => l.message === "broker unblocked the connection")).toBe(true);
  // Nothing left unsettled: stopping would have given any unacked delivery back to the queue.
  expect(await messagesReady(queue)).toBe(0);
  expect(effects()).toEqual(new Map([["before", 1], ["after", 1]]));
  const entries = await store.listQuarantine({ handler: "blocked-test" });
  expect(entries).toHaveLength(1);
  expect(entries[0]).toMatchObject({ reason: "invalid" });
  expect(entries[0]!.body.toString()).toBe("{ not json");
  // The copy published while blocked arrives once the broker reads again; the redelivery then
  // publishes another: at least one copy, all of the malformed message, never a valid event.
  const copies = await drainQueue(`${queue}.quarantine`);
  expect(copies.length).toBeGreaterThanOrEqual(1);
  for (const copy of copies) expect(copy.content.toString()).toBe("{ not json");
  expect(entries[0]!.occurrences).toBe(copies.length);
  expect(logs.some((l) => /unknown delivery tag/i.test(JSON.stringify(l.fields)))).toBe(false);
});
