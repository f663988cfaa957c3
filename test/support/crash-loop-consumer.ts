/**
 * A consumer whose handler kills its own process (SIGKILL, as a native crash or the OOM killer
 * would) on one event, every time it sees it: the poison-message tests start it again and again.
 *   DATABASE_URL     postgres://... or an SQLite file; an `effects` table (no unique key) must exist
 *   AMQP_URL         the broker
 *   QUEUE            the work queue
 *   POISON_EVENT     the event id that kills the process
 *   MAX_DELIVERIES   the consumer's poison threshold
 *   QUORUM           "1": the work queue is a quorum queue
 * Prints `consumer: started` once consuming. SIGTERM drains and exits 0.
 */
import { writeSync } from "node:fs";
import { InboxConsumer, type InboxHandler, createJsonLogger, openStore } from "../../src/index.js";
import { quorumQueueArguments } from "../../src/amqp/topology.js";
import type { PgClient } from "../../src/store/postgres/index.js";
import type { SqliteDatabase } from "../../src/store/sqlite/index.js";
import { amqpUrl } from "./broker.js";

interface Effect { tenant: string; event_id: string }

async function main(): Promise<void> {
  const poison = process.env.POISON_EVENT ?? "";
  const store = await openStore(process.env.DATABASE_URL ?? "", { source: "DATABASE_URL" });
  if (store.dialect === "mysql") throw new Error("the crash-loop consumer's handler is written for PostgreSQL and SQLite only");
  const isPostgres = store.dialect === "postgres";
  const crashOn = (eventId: string) => {
    if (eventId === poison) process.kill(process.pid, "SIGKILL");
  };
  const handler: InboxHandler<Effect, PgClient> | InboxHandler<Effect, SqliteDatabase> = isPostgres
    ? {
      name: "crash-loop",
      async handle(event, ctx) {
        crashOn(event.event_id);
        await ctx.tx.query("INSERT INTO effects (tenant, event_id) VALUES ($1, $2)", [event.tenant, event.event_id]);
      },
    } satisfies InboxHandler<Effect, PgClient>
    : {
      name: "crash-loop",
      handle(event, ctx) {
        crashOn(event.event_id);
        ctx.tx.prepare("INSERT INTO effects (tenant, event_id) VALUES (?, ?)").run(event.tenant, event.event_id);
        return Promise.resolve();
      },
    } satisfies InboxHandler<Effect, SqliteDatabase>;
  const consumer = new InboxConsumer<Effect, unknown>({
    url: process.env.AMQP_URL ?? amqpUrl,
    queue: process.env.QUEUE ?? "",
    store: store,
    handler: handler,
    maxDeliveries: Number(process.env.MAX_DELIVERIES ?? 10),
    retryDelaysMs: [],
    logger: createJsonLogger({ name: "crash-loop-consumer" }),
    ...(process.env.QUORUM === "1" ? { queueArguments: quorumQueueArguments() } : {}),
  });
  await consumer.start();
  process.on("SIGTERM", () => {
    consumer.stop().then(() => store.close()).then(() => process.exit(0), () => process.exit(1));
  });
  writeSync(1, "consumer: started\n");
}

main().catch((error: unknown) => {
  writeSync(2, `consumer: failed to start: ${String(error)}\n`);
  process.exit(1);
});
