/**
 * The ledger service: consumes LEDGER_QUEUE and applies each event once. For every
 * applied `balance.adjusted` it publishes, through the transactional outbox, a persistent
 * `balance.changed` JSON message to the durable fanout exchange `<LEDGER_QUEUE>.balance-changed`
 * (declared at start) with a message id that is the same on every re-send; the outbox relay
 * runs in this process.
 *   AMQP_URL            default amqp://guest:guest@127.0.0.1:5672; a cluster's nodes comma-separated (failover)
 *   DATABASE_URL        default ./data/ledger.sqlite; postgres://... and mysql://... (mariadb://...) also accepted,
 *                       with several nodes in libpq's form (postgres://u@h1:5441,h2:5442/db?target_session_attrs=read-write):
 *                       the service writes to the writable node and follows a failover
 *   LEDGER_QUEUE        default ledger.events
 *   LEDGER_BATCH_SIZE   deliveries per transaction, default 500 (1 = strict mode)
 *   LEDGER_PREFETCH     default twice the batch size, at least 200
 *   LEDGER_QUEUE_TYPE   classic (default) or quorum, used when the queue is declared
 *   LEDGER_PARTITIONS   P: consume the quorum queues <LEDGER_QUEUE>.p0 .. p<P-1> behind the
 *                       x-consistent-hash exchange <LEDGER_QUEUE> (producers publish there with
 *                       routing key <tenant>/<account_id>); replicas share the partitions and
 *                       keep each account's order. Unset: one queue.
 *   LEDGER_RETRY_DELAYS_MS  delays of the broker-side retries, comma-separated ms, default 1000,10000,60000:
 *                       an event that cannot apply yet (an adjustment before its account's opening) or
 *                       whose transient failures outlived the in-process retries waits in
 *                       `<LEDGER_QUEUE>.retry.<n>` for each in turn, and is quarantined after the last
 *   LEDGER_SINK_QUEUE   a queue name: declare this durable queue and bind it to the balance.changed exchange, so that
 *                       a ledger alone on a broker has somewhere to deliver them (else they are unroutable and wait in
 *                       the outbox until something binds); unset: declare nothing, bind your own consumers' queues
 *   LEDGER_OUTBOX_MAX_PENDING  N: consumption pauses while the outbox holds N unsent rows or more, and goes on
 *                       below N/2 (the relay catches up before more events are applied); unset: never pauses
 *   LEDGER_OUTBOX_SENT_RETENTION_MS  how long sent outbox rows are kept, in ms; default 0: each is deleted once
 *                       its publish is confirmed (consumers drop copies by message id; nothing reads sent rows)
 *   RABBIT_INBOX_FAULT  <point>:<action>[:<nth>] fault injection (before-commit | after-commit | after-ack; crash | pause)
 *   LEDGER_METRICS_PORT serve /metrics (Prometheus), /healthz and /readyz on this port (0: any free port,
 *                       printed at start); unset: no server, and prom-client is not loaded
 *   LEDGER_METRICS_HOST the address it listens on, default 127.0.0.1
 *   OTEL_*              traces, when the OpenTelemetry SDK packages are installed: see ./tracing.ts
 *   LEDGER_PROCESS_SPANS  batch: a process span per batch, linked to each event's producer; message: one per event, its
 *                       producer's child. Default: the library's (batch; message when LEDGER_BATCH_SIZE is 1)
 * SIGTERM or SIGINT drains in-flight work and exits 0.
 */
import type { DatabaseHealth } from "../../src/observability-entry.js";
import { InboxConsumer, OutboxRelay, createJsonLogger, outboxBackpressure } from "../../src/index.js";
import { describeAmqpConnectError, faultInjection, redactSecrets } from "../../src/operations.js";
import { openLedgerDatabase } from "./ledger-database.js";
import { startMetricsServer, withinMs } from "./metrics-server.js";
import { describeDatabaseUrlError, describeError, ledgerQueueArguments, readLedgerSettings, step } from "./settings.js";
import { startTracing } from "./tracing.js";

async function main(): Promise<void> {
  const logger = createJsonLogger({ name: "ledger" });
  const settings = readLedgerSettings();
  const { queue, amqpUrl, fault, faultText, batchSize, prefetch, retryDelaysMs, outboxMaxPending, processSpans, partitions } = settings;

  // Before the consumer and the relay exist: their first spans already go to the provider.
  const stopTracing = await startTracing(logger);
  const port = settings.metricsPort;
  // Loaded only when asked for: a ledger without metrics never loads prom-client.
  const registry = port === undefined ? undefined : new (await import("prom-client")).Registry();
  const metrics = registry ? { metrics: { registry } } : {};

  const { balanceChangedExchange, databaseUrl, sinkQueue, outboxSentRetentionMs } = settings;
  const db = await step(`database (DATABASE_URL=${redactSecrets(databaseUrl || "./data/ledger.sqlite")})`,
    () => openLedgerDatabase(databaseUrl, logger, { balanceChangedExchange }), describeDatabaseUrlError);
  const relay = db.outbox
    ? new OutboxRelay({
      url: amqpUrl, store: db.outbox, logger,
      topology: async (channel) => {
        await channel.assertExchange(balanceChangedExchange, "fanout", { durable: true });
        if (sinkQueue) {
          await channel.assertQueue(sinkQueue, { durable: true });
          await channel.bindQueue(sinkQueue, balanceChangedExchange, "");
        }
      },
      // Unroutable (nobody bound yet) or refused messages are retried soon, and never dropped.
      retryBaseDelayMs: 250, retryMaxDelayMs: 5000, sentRetentionMs: outboxSentRetentionMs, ...metrics,
    })
    : undefined;
  if (!relay) logger.warn("this database has no transactional outbox yet: balance.changed is not published", { database: db.description });
  if (outboxMaxPending !== undefined && !db.outbox) throw new Error("LEDGER_OUTBOX_MAX_PENDING is set, but this database has no transactional outbox to count");
  const consumer = new InboxConsumer({
    url: amqpUrl, queue, store: db.store, handler: db.handler, logger, batchSize, prefetch, ...(processSpans ? { processSpans } : {}),
    ...(ledgerQueueArguments(settings) ? { queueArguments: ledgerQueueArguments(settings) } : {}),
    ...(partitions ? { partitions: { count: partitions } } : {}),
    ...(fault ? { hook: faultInjection(fault) } : {}),
    ...(retryDelaysMs ? { retryDelaysMs } : {}), ...metrics,
    ...(outboxMaxPending !== undefined && db.outbox ? { backpressure: outboxBackpressure({ store: db.outbox, maxPending: outboxMaxPending }) } : {}),
  });
  if (registry && port !== undefined) {
    const host = settings.metricsHost;
    const server = await step(`metrics server (LEDGER_METRICS_HOST=${host} LEDGER_METRICS_PORT=${port})`, () => startMetricsServer({
      host, port, registry,
      ready: async () => {
        const consumerHealth = consumer.health();
        const relayConnected = relay ? (await relay.health()).connected : true;
        // A write the database refuses while it refuses writes: an empty transaction would pass on a read-only node.
        let health: DatabaseHealth | undefined;
        const answered = await withinMs(2000, async () => { health = await db.checkWrites(); });
        const database = answered && health?.available === true;
        const problem = health?.problem ?? (answered ? null : { reason: "timeout", message: "the database did not answer within 2 s" });
        return {
          ready: consumerHealth.connected && consumerHealth.consuming && relayConnected && database,
          detail: {
            broker: consumerHealth.connected, consuming: consumerHealth.consuming, relay: relayConnected, database, databaseNode: health?.node ?? null,
            ...(problem ? { databaseProblem: { reason: problem.reason, error: redactSecrets(problem.message) } } : {}),
          },
        };
      },
    }));
    console.log(`ledger: metrics on ${server.url}/metrics (also /healthz, /readyz)`);
  }
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info("draining before exit", { signal });
    // The consumer first, so the relay's drain also sends what the last batches committed.
    consumer.stop()
      .then(() => relay?.stop())
      .then(() => db.close())
      .then(() => stopTracing())
      .then(() => process.exit(0))
      .catch((error: unknown) => {
        logger.error("shutdown failed", { error: describeError(error) });
        process.exit(1);
      });
  };
  process.on("SIGTERM", () => shutdown("SIGTERM"));
  process.on("SIGINT", () => shutdown("SIGINT"));
  // The relay first: the exchange exists before the first event is consumed.
  const broker = `RabbitMQ (AMQP_URL=${redactSecrets(amqpUrl)})`;
  await step(broker, async () => { await relay?.start(); }, (error) => describeAmqpConnectError(error, amqpUrl));
  await step(broker, () => consumer.start(), (error) => describeAmqpConnectError(error, amqpUrl));
  const source = partitions ? `${queue} (${partitions} partitions, holding ${consumer.heldPartitions.join(",") || "none yet"})` : queue;
  console.log(`ledger: consuming ${source} from ${redactSecrets(amqpUrl)} into ${db.description}${fault ? ` (fault ${faultText})` : ""}`);
}

main().catch((error: unknown) => {
  console.error(`ledger: ${redactSecrets(describeError(error))}`);
  process.exit(1);
});
