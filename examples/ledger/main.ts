/**
 * The ledger service: consumes LEDGER_QUEUE and applies each event once (MISSION.md). For every
 * applied `balance.adjusted` it publishes, through the transactional outbox, a persistent
 * `balance.changed` JSON message to the durable fanout exchange `<LEDGER_QUEUE>.balance-changed`
 * (declared at start) with a message id that is the same on every re-send; the outbox relay
 * runs in this process.
 *   AMQP_URL            default amqp://guest:guest@127.0.0.1:5672
 *   DATABASE_URL        default ./data/ledger.sqlite; postgres://... and mysql://... (mariadb://...) also accepted
 *   LEDGER_QUEUE        default ledger.events
 *   LEDGER_BATCH_SIZE   deliveries per transaction, default 500 (1 = strict mode)
 *   LEDGER_PREFETCH     default twice the batch size, at least 200
 *   LEDGER_QUEUE_TYPE   classic (default) or quorum, used when the queue is declared
 *   RABBIT_INBOX_FAULT  <point>:<action>[:<nth>] fault injection (before-commit | after-commit | after-ack; crash | pause)
 * SIGTERM or SIGINT drains in-flight work and exits 0.
 */
import {
  InboxConsumer, InboxError, OutboxRelay, createJsonLogger, describeAmqpConnectError, describeError, faultInjection, parseFaultSpec, redactSecrets,
} from "../../src/index.js";
import { openLedgerDatabase } from "./ledger-database.js";

const DEFAULT_AMQP_URL = "amqp://guest:guest@127.0.0.1:5672";

/**
 * Runs one step of the start, so that a failure says which service it concerns: "connect
 * ECONNREFUSED 127.0.0.1:5699" alone does not tell the broker from the database.
 */
async function step<T>(what: string, work: () => Promise<T>, describe: (error: unknown) => string = describeError): Promise<T> {
  try {
    return await work();
  } catch (error) {
    // A configuration error already says what is wrong with which setting.
    if (error instanceof InboxError && error.kind === "config") throw error;
    throw new Error(`${what}: ${describe(error)}`, { cause: error });
  }
}

function positiveInt(name: string, fallback: number): number {
  const text = process.env[name];
  if (text === undefined || text === "") return fallback;
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < 1) throw new Error(`${name} must be a positive integer, got ${JSON.stringify(text)}`);
  return value;
}

async function main(): Promise<void> {
  const logger = createJsonLogger({ name: "ledger" });
  const queue = process.env.LEDGER_QUEUE || "ledger.events";
  const amqpUrl = process.env.AMQP_URL || DEFAULT_AMQP_URL;
  const faultText = process.env.RABBIT_INBOX_FAULT;
  const fault = faultText ? parseFaultSpec(faultText) : undefined;
  const batchSize = positiveInt("LEDGER_BATCH_SIZE", 500);
  const prefetch = positiveInt("LEDGER_PREFETCH", Math.max(200, 2 * batchSize));
  const queueType = process.env.LEDGER_QUEUE_TYPE || "classic";
  if (queueType !== "classic" && queueType !== "quorum") throw new Error(`LEDGER_QUEUE_TYPE must be classic or quorum, got ${JSON.stringify(queueType)}`);

  const balanceChangedExchange = `${queue}.balance-changed`;
  const databaseUrl = process.env.DATABASE_URL;
  const db = await step(`database (DATABASE_URL=${redactSecrets(databaseUrl || "./data/ledger.sqlite")})`,
    () => openLedgerDatabase(databaseUrl, logger, { balanceChangedExchange }),
    (error) => (/^invalid url$/i.test(describeError(error))
      ? "DATABASE_URL is not a valid URL: percent-encode @ : / ? # in the user or password (%40 %3A %2F %3F %23)"
      : describeError(error)));
  const relay = db.outbox
    ? new OutboxRelay({
      url: amqpUrl, store: db.outbox, logger,
      topology: async (channel) => { await channel.assertExchange(balanceChangedExchange, "fanout", { durable: true }); },
      // Unroutable (nobody bound yet) or refused messages are retried soon, and never dropped.
      retryBaseDelayMs: 250, retryMaxDelayMs: 5000,
    })
    : undefined;
  if (!relay) logger.warn("this database has no transactional outbox yet: balance.changed is not published", { database: db.description });
  const consumer = new InboxConsumer({
    url: amqpUrl, queue, store: db.store, handler: db.handler, logger, batchSize, prefetch,
    ...(queueType === "quorum" ? { queueArguments: { "x-queue-type": "quorum" } } : {}),
    ...(fault ? { hook: faultInjection(fault) } : {}),
  });
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info("draining before exit", { signal });
    // The consumer first, so the relay's drain also sends what the last batches committed.
    consumer.stop()
      .then(() => relay?.stop())
      .then(() => db.close())
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
  console.log(`ledger: consuming ${queue} from ${redactSecrets(amqpUrl)} into ${db.description}${fault ? ` (fault ${faultText})` : ""}`);
}

main().catch((error: unknown) => {
  console.error(`ledger: ${redactSecrets(describeError(error))}`);
  process.exit(1);
});
