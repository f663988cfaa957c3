/**
 * An outbox relay as its own process, for the crash tests (started by outbox-process.ts).
 *   DATABASE_URL              postgres://..., mysql://... or an SQLite file
 *   AMQP_URL                  the broker
 *   RELAY_PAUSE_AFTER_CONFIRM "1": after the first confirmed round, print
 *                             `relay: paused after-confirm <message ids>` and stop all work
 *                             (rows published and confirmed, not yet marked sent) until killed
 *   RELAY_LEASE_MS            lease on claimed rows (SQLite), default 3000
 * Prints `relay: started` once running. SIGTERM stops the relay (drains) and exits 0.
 */
import { writeSync } from "node:fs";
import { OutboxRelay, createJsonLogger, describeError, openStore } from "../../src/index.js";
import { amqpUrl } from "./broker.js";

async function main(): Promise<void> {
  const store = await openStore(process.env.DATABASE_URL ?? "", { source: "DATABASE_URL" });
  const pause = process.env.RELAY_PAUSE_AFTER_CONFIRM === "1";
  const relay = new OutboxRelay({
    url: process.env.AMQP_URL ?? amqpUrl,
    store, logger: createJsonLogger({ name: "relay-process" }),
    pollIntervalMs: 100, publishTimeoutMs: 1000, leaseMs: Number(process.env.RELAY_LEASE_MS ?? 3000), cleanupIntervalMs: 0,
    ...(pause ? {
      hook: (point: string, rows: ReadonlyArray<{ messageId: string }>) => {
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
}

main().catch((error: unknown) => {
  console.error(`relay-process: ${describeError(error)}`);
  process.exit(1);
});
