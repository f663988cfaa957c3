/**
 * A statement larger than MariaDB's `max_allowed_packet` is the event's own permanent failure,
 * not a lost database: the event is quarantined at once as `too_large`, naming the limit; the
 * rest of its batch applies and publishes; nothing is retried, requeued or logged as "database
 * unavailable", and the consumer goes on. The store refuses such a statement before sending it,
 * its own (an outbox row with a huge body) as the handler's (a huge value through `ctx.tx`): sent,
 * the server answers 1153 and closes the session, or closes it while the client still writes,
 * and mysql2 then reports `write ECONNRESET` (seen here in about one run in five), which cannot
 * be told from a lost network. Before, 1153 was taken for a lost connection: the batch was
 * retried and requeued for minutes.
 *
 * The packet limit cannot be lowered for one session (MariaDB: "SESSION variable
 * 'max_allowed_packet' is read-only"), and changing it globally would change the server for
 * everyone: the test sends one MiB over the server's own limit instead.
 */
import { randomBytes } from "node:crypto";
import mysql from "mysql2/promise";
import { afterEach, describe, expect, it } from "vitest";
import { InboxConsumer } from "../../src/index.js";
import type { MysqlConnection } from "../../src/store/mysql/index.js";
import { amqpUrl, deleteConsumerQueues, drainQueue, messagesReady, publishAll, waitFor } from "../support/broker.js";
import { publishingDatabase } from "../support/outbox.js";
import { type LogLine, logged, recordingLogger } from "../support/recording-logger.js";
import { onSelectedDatabases } from "../support/test-databases.js";

type Event = { tenant: string; event_id: string; huge?: "publish" | "insert" };

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
});

describe.each(onSelectedDatabases(["mysql"] as const))("a statement over max_allowed_packet, on %s", (kind) => {
  it.each(["publish", "insert"] as const)("%s: quarantines that event at once as too_large; the others apply and publish", async (huge) => {
    const { db, store, accounts, exchange, tap } = await publishingDatabase(kind, "too.large", cleanups);
    const connection = await mysql.createConnection(db.url);
    const [[{ packet }]] = (await connection.query("SELECT @@max_allowed_packet AS packet")) as unknown as [[{ packet: number }]];
    await connection.query("CREATE TABLE blobs (b LONGBLOB) ENGINE=InnoDB");
    await connection.end();

    const queue = `ri.test.too-large.${randomBytes(4).toString("hex")}`;
    const lines: LogLine[] = [];
    const consumer = new InboxConsumer<Event, unknown>({
      url: amqpUrl, queue, store, logger: recordingLogger(lines), retryDelaysMs: [100], publishLimits: { maxBodyBytes: packet + 2 * 1024 * 1024 },
      handler: {
        name: "ledger",
        async handle(event, ctx) {
          await accounts.insert(ctx.tx, event.event_id);
          const blob = Buffer.alloc(packet + 1024 * 1024, 120);
          if (event.huge === "insert") await (ctx.tx as MysqlConnection).execute("INSERT INTO blobs (b) VALUES (?)", [blob]);
          await ctx.publish(exchange, "", event.huge === "publish" ? blob : { caused_by: event.event_id });
        },
      },
    });
    cleanups.push(() => deleteConsumerQueues(queue), () => consumer.stop());
    await consumer.start();
    await publishAll(queue, [
      { tenant: "t1", event_id: "e-1" }, { tenant: "t1", event_id: "e-2", huge }, { tenant: "t1", event_id: "e-3" },
    ]);
    await tap.waitForCount(2);
    await waitFor(() => consumer.outcomeCounts.quarantined === 1, 30_000, "the huge event quarantined");

    expect(consumer.outcomeCounts).toMatchObject({ applied: 2, quarantined: 1, requeue: 0, delayed: 0 });
    expect(await accounts.list()).toEqual(["e-1", "e-3"]);
    const [entry] = await store.listQuarantine({ handler: "ledger" });
    expect(entry).toMatchObject({ eventId: "e-2", reason: "too_large" });
    expect(entry!.detail).toMatch(new RegExp(`^MySQL: a statement of about \\d+ bytes is over the server's max_allowed_packet \\(${packet} bytes\\); it was not sent$`));
    expect(logged(lines, "database unavailable after retries; deliveries go back to the broker")).toEqual([]);
    expect(logged(lines, "transaction failed, retrying")).toEqual([]);
    expect(await messagesReady(queue)).toBe(0);
    expect((await drainQueue(`${queue}.quarantine`)).length).toBe(1);
    expect(consumer.health()).toMatchObject({ state: "running", consuming: true });
    // The session MariaDB closed was not given back to the pool: the next event applies.
    await publishAll(queue, [{ tenant: "t1", event_id: "e-4" }]);
    await tap.waitForCount(3);
    expect(await accounts.list()).toEqual(["e-1", "e-3", "e-4"]);
  });
});
