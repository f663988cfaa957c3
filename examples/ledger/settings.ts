/**
 * The ledger's environment, read and checked in one place for both services (`npm start` and
 * `npm run start:nest`), so that they take the same variables with the same defaults and refuse
 * the same mistakes.
 */
import { type FaultSpec, parseFaultSpec } from "../../src/operations.js";
import { InboxError } from "../../src/index.js";

export const DEFAULT_AMQP_URL = "amqp://guest:guest@127.0.0.1:5672";

export interface LedgerSettings {
  queue: string;
  amqpUrl: string;
  databaseUrl: string | undefined;
  /** RABBIT_INBOX_FAULT, parsed, and as given (for the start line). */
  fault: FaultSpec | undefined;
  faultText: string | undefined;
  batchSize: number;
  prefetch: number;
  retryDelaysMs: number[] | undefined;
  outboxMaxPending: number | undefined;
  /**
   * LEDGER_OUTBOX_SENT_RETENTION_MS: how long the outbox keeps sent rows. Default 0: each row
   * is deleted once its publish is confirmed. Nothing here needs them afterwards: the inbox
   * writes each event's balance.changed once, and its message id lets consumers drop the copies
   * an at-least-once relay may send.
   */
  outboxSentRetentionMs: number;
  processSpans: "message" | "batch" | undefined;
  partitions: number | undefined;
  queueType: "classic" | "quorum";
  metricsPort: number | undefined;
  metricsHost: string;
  /** `<queue>.balance-changed`: the fanout exchange balance.changed goes to. */
  balanceChangedExchange: string;
  /** LEDGER_SINK_QUEUE: a durable queue to declare and bind to that exchange, or undefined. */
  sinkQueue: string | undefined;
}

function positiveInt(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  return integerSetting(env, name, fallback, 1, "a positive integer");
}

/** A whole number of milliseconds, 0 allowed. */
function nonNegativeInt(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  return integerSetting(env, name, fallback, 0, "a whole number of milliseconds (0 or more)");
}

/** An integer setting of at least `min`; unset or empty: `fallback`. The error names the variable and what it must be. */
function integerSetting(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, what: string): number {
  const text = env[name];
  if (text === undefined || text === "") return fallback;
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < min) throw new Error(`${name} must be ${what}, got ${JSON.stringify(text)}`);
  return value;
}

/** A comma-separated list of positive integers, e.g. `200,1000,5000`; unset or empty: undefined. */
function positiveIntList(env: NodeJS.ProcessEnv, name: string): number[] | undefined {
  const text = env[name];
  if (text === undefined || text.trim() === "") return undefined;
  return text.split(",").map((part) => {
    const value = Number(part.trim());
    if (part.trim() === "" || !Number.isSafeInteger(value) || value < 1) {
      throw new Error(`${name} must be comma-separated positive integers (milliseconds), got ${JSON.stringify(text)}`);
    }
    return value;
  });
}

/** LEDGER_METRICS_PORT: a TCP port (0 = any free one); unset or empty: undefined. */
function metricsPort(env: NodeJS.ProcessEnv): number | undefined {
  const text = env.LEDGER_METRICS_PORT;
  if (text === undefined || text.trim() === "") return undefined;
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < 0 || value > 65535) throw new Error(`LEDGER_METRICS_PORT must be a port from 0 to 65535, got ${JSON.stringify(text)}`);
  return value;
}

export function readLedgerSettings(env: NodeJS.ProcessEnv = process.env): LedgerSettings {
  const queue = env.LEDGER_QUEUE || "ledger.events";
  const faultText = env.RABBIT_INBOX_FAULT || undefined;
  const batchSize = positiveInt(env, "LEDGER_BATCH_SIZE", 500);
  const processSpans = env.LEDGER_PROCESS_SPANS || undefined;
  if (processSpans !== undefined && processSpans !== "message" && processSpans !== "batch") {
    throw new Error(`LEDGER_PROCESS_SPANS must be message or batch, got ${JSON.stringify(processSpans)}`);
  }
  const partitions = env.LEDGER_PARTITIONS ? positiveInt(env, "LEDGER_PARTITIONS", 1) : undefined;
  // Partitions are quorum queues unless asked otherwise: they must outlive a broker node.
  const queueType = env.LEDGER_QUEUE_TYPE || (partitions ? "quorum" : "classic");
  if (queueType !== "classic" && queueType !== "quorum") throw new Error(`LEDGER_QUEUE_TYPE must be classic or quorum, got ${JSON.stringify(queueType)}`);
  return {
    queue, faultText, batchSize, processSpans, partitions, queueType,
    amqpUrl: env.AMQP_URL || DEFAULT_AMQP_URL,
    databaseUrl: env.DATABASE_URL,
    fault: faultText ? parseFaultSpec(faultText) : undefined,
    prefetch: positiveInt(env, "LEDGER_PREFETCH", Math.max(200, 2 * batchSize)),
    retryDelaysMs: positiveIntList(env, "LEDGER_RETRY_DELAYS_MS"),
    outboxMaxPending: env.LEDGER_OUTBOX_MAX_PENDING ? positiveInt(env, "LEDGER_OUTBOX_MAX_PENDING", 1) : undefined,
    outboxSentRetentionMs: nonNegativeInt(env, "LEDGER_OUTBOX_SENT_RETENTION_MS", 0),
    metricsPort: metricsPort(env),
    metricsHost: env.LEDGER_METRICS_HOST || "127.0.0.1",
    balanceChangedExchange: `${queue}.balance-changed`,
    sinkQueue: env.LEDGER_SINK_QUEUE?.trim() || undefined,
  };
}

/** The work queue's arguments: quorum when asked (or partitioned), classic stated for partitions. */
export function ledgerQueueArguments(settings: LedgerSettings): Record<string, unknown> | undefined {
  if (settings.queueType === "quorum") return { "x-queue-type": "quorum" };
  return settings.partitions ? { "x-queue-type": "classic" } : undefined;
}

/**
 * Runs one step of the start, so that a failure says which service it concerns: "connect
 * ECONNREFUSED 127.0.0.1:5699" alone does not tell the broker from the database.
 */
export async function step<T>(what: string, work: () => Promise<T>, describe: (error: unknown) => string = describeError): Promise<T> {
  try {
    return await work();
  } catch (error) {
    // A configuration error already says what is wrong with which setting.
    if (error instanceof InboxError && error.kind === "config") throw error;
    throw new Error(`${what}: ${describe(error)}`, { cause: error });
  }
}

/** An error's message, or the thrown value as text when it is not an Error. */
export function describeError(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** What a DATABASE_URL that `new URL` refuses usually needs. */
export function describeDatabaseUrlError(error: unknown): string {
  return /^invalid url$/i.test(describeError(error))
    ? "DATABASE_URL is not a valid URL: percent-encode @ : / ? # in the user or password (%40 %3A %2F %3F %23)"
    : describeError(error);
}
