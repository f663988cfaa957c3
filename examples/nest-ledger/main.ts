/**
 * The ledger as a Nest application on TypeORM: `npm run start:nest`. The same contract as
 * `npm start` (examples/ledger/main.ts): the same environment, events, validation and business
 * logic, tables, queues, `balance.changed` through the outbox, quarantine reasons and fault
 * points; the ledger's commands (`npm run --silent ledger -- balances --json`) read its database.
 * What differs: DATABASE_URL must be PostgreSQL or MySQL/MariaDB (TypeORM), one host; the
 * consumer, the relay and their lifecycle are RabbitInboxModule's; /readyz is terminus's.
 *   AMQP_URL, DATABASE_URL, LEDGER_QUEUE, LEDGER_BATCH_SIZE, LEDGER_PREFETCH, LEDGER_QUEUE_TYPE,
 *   LEDGER_PARTITIONS, LEDGER_RETRY_DELAYS_MS, LEDGER_OUTBOX_MAX_PENDING, LEDGER_OUTBOX_SENT_RETENTION_MS, RABBIT_INBOX_FAULT,
 *   LEDGER_METRICS_PORT, LEDGER_METRICS_HOST, LEDGER_PROCESS_SPANS, OTEL_*: as for `npm start`.
 * SIGTERM or SIGINT drains in-flight work (Nest's shutdown hooks) and exits 0.
 */
import "reflect-metadata";
import type { INestApplicationContext } from "@nestjs/common";
import { NestFactory } from "@nestjs/core";
import { createJsonLogger, databaseTargetOf } from "../../src/index.js";
import { describeAmqpConnectError, redactSecrets } from "../../src/operations.js";
import { RabbitInboxService } from "../../src/nestjs/index.js";
import { openLedgerDatabase } from "../ledger/ledger-database.js";
import { describeDatabaseUrlError, describeError, readLedgerSettings, step } from "../ledger/settings.js";
import { startTracing } from "../ledger/tracing.js";
import { LedgerAppModule } from "./ledger-app.module.js";

async function main(): Promise<void> {
  const logger = createJsonLogger({ name: "ledger" });
  const settings = readLedgerSettings();
  const { databaseUrl, amqpUrl, queue, partitions, faultText } = settings;
  if (!databaseUrl) throw new Error("DATABASE_URL is required: postgres://... or mysql://... (the Nest ledger runs on TypeORM, not SQLite)");
  const target = databaseTargetOf(databaseUrl, "DATABASE_URL");
  if (target.kind === "sqlite") throw new Error(`DATABASE_URL must be postgres://... or mysql://... for the Nest ledger (TypeORM), not an SQLite file: ${target.description}`);
  const stopTracing = await startTracing(logger);
  // Loaded only when asked for: a ledger without metrics never loads prom-client.
  const registry = settings.metricsPort === undefined ? undefined : new (await import("prom-client")).Registry();
  const database = await step(`database (DATABASE_URL=${redactSecrets(databaseUrl)})`,
    () => openLedgerDatabase(databaseUrl, logger, { balanceChangedExchange: settings.balanceChangedExchange }), describeDatabaseUrlError);
  const { outbox } = database;
  if (!outbox) throw new Error(`${target.description} has no transactional outbox`);
  const module = LedgerAppModule.register({
    settings, logger, ...(registry ? { registry } : {}), database: { ...database, outbox }, onShutdown: stopTracing,
    typeorm: { type: target.kind === "postgres" ? "postgres" : "mariadb", url: databaseUrl },
  });
  const nestOptions = { logger: ["error" as const, "warn" as const], abortOnError: false };
  let app: INestApplicationContext;
  const broker = `RabbitMQ (AMQP_URL=${redactSecrets(amqpUrl)})`;
  if (registry) {
    const http = await NestFactory.create(module, nestOptions);
    http.enableShutdownHooks(["SIGTERM", "SIGINT"], { useProcessExit: true });
    await step(broker, () => http.listen(settings.metricsPort!, settings.metricsHost), (error) => describeAmqpConnectError(error, amqpUrl));
    console.log(`ledger: metrics on ${(await http.getUrl()).replace("[::1]", "127.0.0.1")}/metrics (also /healthz, /readyz)`);
    app = http;
  } else {
    app = await NestFactory.createApplicationContext(module, nestOptions);
    // Exits 0 once closed (Nest would otherwise raise the signal again, and exit by it).
    app.enableShutdownHooks(["SIGTERM", "SIGINT"], { useProcessExit: true });
    await step(broker, () => app.init(), (error) => describeAmqpConnectError(error, amqpUrl));
  }
  const held = app.get(RabbitInboxService).consumers.get("ledger")?.heldPartitions ?? [];
  const source = partitions ? `${queue} (${partitions} partitions, holding ${held.join(",") || "none yet"})` : queue;
  console.log(`ledger: consuming ${source} from ${redactSecrets(amqpUrl)} into ${database.description} (nest, typeorm)${faultText ? ` (fault ${faultText})` : ""}`);
}

main().catch((error: unknown) => {
  console.error(`ledger: ${redactSecrets(describeError(error))}`);
  process.exit(1);
});
