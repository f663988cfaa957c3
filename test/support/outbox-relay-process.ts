/**
 * An outbox relay as its own process, for the crash tests (started by outbox-process.ts).
 *   DATABASE_URL              postgres://..., mysql://... or an SQLite file
 *   AMQP_URL                  the broker
 *   RELAY_PAUSE_AT            before-publish | after-publish | after-confirm: the first time the
 *                             relay reaches that point, print `relay: paused <point> <message ids>`
 *                             and stop all work until killed
 *   RELAY_PAUSE_AFTER_CONFIRM "1": the same as RELAY_PAUSE_AT=after-confirm
 *   RELAY_LEASE_MS            lease on claimed rows (SQLite) and on rows handed over in memory, default 3000
 *   RELAY_SENT_RETENTION_MS   the relay's sentRetentionMs; 0 deletes sent rows (and packs the
 *                             rows handed over on PostgreSQL); unset: the relay's default
 *   RELAY_WRITE               `<exchange>:<transactions>:<rows per transaction>:<keys>`: once started,
 *                             commit that many transactions through this process's store, each
 *                             with rows for the keys k0..k<keys-1> in turn (ordering key and body
 *                             `{key, seq}`, seq counting per key), and print `relay: wrote <n>`
 * Prints `relay: started` once running. SIGTERM stops the relay (drains) and exits 0.
 */
import { writeSync } from "node:fs";
import { OutboxRelay, createJsonLogger, openStore } from "../../src/index.js";
import type { RelayFaultPoint } from "../../src/outbox/outbox-relay-options.js";
import { describeError } from "../../src/core/errors.js";
import { amqpUrl } from "./broker.js";

async function main(): Promise<void> {
  const store = await openStore(process.env.DATABASE_URL ?? "", { source: "DATABASE_URL" });
  const pauseAt = (process.env.RELAY_PAUSE_AT || (process.env.RELAY_PAUSE_AFTER_CONFIRM === "1" ? "after-confirm" : undefined)) as RelayFaultPoint | undefined;
  const relay = new OutboxRelay({
    url: process.env.AMQP_URL ?? amqpUrl,
    store, logger: createJsonLogger({ name: "relay-process" }),
    pollIntervalMs: 100, publishTimeoutMs: 1000, leaseMs: Number(process.env.RELAY_LEASE_MS ?? 3000), cleanupIntervalMs: 0,
    ...(process.env.RELAY_SENT_RETENTION_MS ? { sentRetentionMs: Number(process.env.RELAY_SENT_RETENTION_MS) } : {}),
    ...(pauseAt ? {
      hook: (point: RelayFaultPoint, rows: ReadonlyArray<{ messageId: string }>) => {
        if (point !== pauseAt) return;
        writeSync(1, `relay: paused ${point} ${rows.map((r) => r.messageId).join(",")}\n`);
        return new Promise<void>(() => undefined);
      },
    } : {}),
  });
  await relay.start();
  process.on("SIGTERM", () => {
    relay.stop().then(() => store.close()).then(() => process.exit(0), () => process.exit(1));
  });
  writeSync(1, "relay: started\n");
  const write = process.env.RELAY_WRITE;
  if (write) {
    const [exchange, transactions, perTransaction, keys] = write.split(":");
    const seq = new Map<string, number>();
    let written = 0;
    for (let t = 0; t < Number(transactions); t++) {
      await store.outbox.transaction(async (_tx, publish) => {
        for (let i = 0; i < Number(perTransaction); i++) {
          const key = `k${written % Number(keys)}`;
          const n = seq.get(key) ?? 0;
          seq.set(key, n + 1);
          written++;
          await publish(exchange!, "", { key, seq: n }, { orderingKey: key });
        }
      });
    }
    writeSync(1, `relay: wrote ${written}\n`);
  }
}

main().catch((error: unknown) => {
  console.error(`relay-process: ${describeError(error)}`);
  process.exit(1);
});
