import { randomUUID } from "node:crypto";
import { InboxConfigError, InvalidPublishError } from "./errors.js";
import { type Instrumentation, noInstrumentation } from "./instrumentation.js";
import type { OutboxRecord, OutboxSource, StoreTransaction } from "./store-contract/store.js";
import { outboxMessageId } from "./outbox-message-id.js";
import { type PublishLimits, checkBodySize, checkHeaders, checkShortString, defaultPublishLimits } from "./publish-checks.js";
import type { OutboxPublish, OutboxPublishOptions } from "./publish-options.js";

/**
 * Collects the messages published during one event's handling (or one standalone transaction)
 * and turns them into outbox rows. Nothing touches the database until the owner writes
 * `seal()`'s records in the same transaction, so a rolled-back attempt leaves nothing behind.
 */
export class OutboxWriter {
  private readonly records: OutboxRecord[] = [];
  private sealed = false;
  private refused: InvalidPublishError | undefined;

  /** `instrumentation` adds the active trace to each row's headers, for the relay to continue. */
  constructor(
    private readonly source: OutboxSource | null,
    private readonly limits: PublishLimits = defaultPublishLimits,
    private readonly instrumentation: Instrumentation = noInstrumentation,
  ) {}

  /**
   * The `publish` handed to user code: validates at once, so the stack trace points at the call.
   * A message AMQP could not carry rejects with an InvalidPublishError and is not recorded.
   */
  readonly publish: OutboxPublish = (exchange, routingKey, body, options) => {
    try {
      return Promise.resolve(this.add(exchange, routingKey, body, options ?? {}));
    } catch (error) {
      if (error instanceof InvalidPublishError) this.refused ??= error;
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
  };

  /** The first publish refused as invalid, if any: whatever the handler threw afterwards, its event is at fault. */
  get refusedPublish(): InvalidPublishError | undefined {
    return this.refused;
  }

  get size(): number {
    return this.records.length;
  }

  /** The source's version (set when the event replaced an applied version through accept-new). */
  get version(): string | undefined {
    return this.source?.version;
  }

  /** Ends collection: a later publish (an un-awaited call that ran late) fails instead of being lost. */
  seal(): readonly OutboxRecord[] {
    this.sealed = true;
    return this.records;
  }

  private add(exchange: string, routingKey: string, body: unknown, options: OutboxPublishOptions): string {
    if (this.sealed) {
      throw new InboxConfigError("publish() called after its transaction's work returned; await every publish inside the handler");
    }
    checkShortString("exchange", exchange, true);
    checkShortString("routingKey", routingKey, true);
    const { orderingKey, messageId: explicitId, ...amqp } = options;
    if (orderingKey !== undefined) checkShortString("orderingKey", orderingKey, false);
    if (explicitId !== undefined) checkShortString("messageId", explicitId, false);
    const { bytes, json } = encodeBody(body);
    checkBodySize(bytes.length, this.limits);
    const position = this.records.length;
    const messageId = explicitId ?? (this.source ? outboxMessageId(this.source, position) : randomUUID());
    // The active trace goes with the row: the relay continues it whenever it publishes.
    const headers = this.instrumentation.traceHeaders(amqp.headers);
    // Seconds, fixed when the row is written, so every re-send carries the same timestamp.
    const second = Math.floor(Date.now() / 1000);
    const properties = headers === undefined && hasNoKeys(amqp)
      ? propertiesWithoutOptions(json, second)
      : encodeProperties(headers === amqp.headers ? amqp : { ...amqp, headers: headers }, json, second);
    this.records.push({
      messageId, exchange, routingKey, body: bytes, properties,
      orderingKey: orderingKey ?? null, source: this.source,
    });
    return messageId;
  }
}

/** Writes the records of `writers`, in order, through the transaction's outbox capability. */
export async function writeOutboxRecords<Tx>(tx: StoreTransaction<Tx>, writers: readonly OutboxWriter[], dialect: string): Promise<void> {
  const records = writers.flatMap((w) => w.seal());
  if (records.length === 0) return;
  if (!tx.writeOutbox) {
    throw new InboxConfigError(`the ${dialect} store has no transactional outbox (StoreTransaction.writeOutbox); publish() is not available with it`);
  }
  await tx.writeOutbox(records);
}

function encodeBody(body: unknown): { bytes: Buffer; json: boolean } {
  if (Buffer.isBuffer(body)) return { bytes: body, json: false };
  if (body instanceof Uint8Array) return { bytes: Buffer.from(body), json: false };
  if (typeof body === "string") return { bytes: Buffer.from(body, "utf8"), json: false };
  let text: string | undefined;
  try {
    text = JSON.stringify(body);
  } catch (cause) {
    throw new InvalidPublishError("body", `publish: body cannot be serialized as JSON: ${(cause as Error).message}`, { cause });
  }
  if (text === undefined) throw new InvalidPublishError("body", `publish: body is a ${typeof body}, which cannot be serialized as JSON`);
  return { bytes: Buffer.from(text, "utf8"), json: true };
}

function hasNoKeys(options: object): boolean {
  for (const _ in options) return false;
  return true;
}

/**
 * The properties of a publish without AMQP options, the usual one: what encodeProperties writes
 * for it, made once per second (its timestamp) instead of once per message.
 */
const withoutOptions = { second: Number.NaN, json: "", binary: "" };
function propertiesWithoutOptions(json: boolean, second: number): string {
  if (second !== withoutOptions.second) {
    withoutOptions.second = second;
    withoutOptions.json = encodeProperties({}, true, second);
    withoutOptions.binary = encodeProperties({}, false, second);
  }
  return json ? withoutOptions.json : withoutOptions.binary;
}

/** `timestamp`: the row's second. */
function encodeProperties(options: Omit<OutboxPublishOptions, "orderingKey" | "messageId">, json: boolean, timestamp: number): string {
  const { expiration, priority, headers, ...strings } = options;
  const properties: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(strings)) {
    if (value === undefined) continue;
    checkShortString(name, value, false);
    properties[name] = value;
  }
  if (json && properties.contentType === undefined) properties.contentType = "application/json";
  if (expiration !== undefined) {
    const ms = Number(expiration);
    if (!Number.isSafeInteger(ms) || ms < 0) throw new InvalidPublishError("expiration", `publish: expiration must be a non-negative integer of milliseconds, got ${String(expiration)}`);
    properties.expiration = String(ms);
  }
  if (priority !== undefined) {
    if (!Number.isInteger(priority) || priority < 0 || priority > 255) throw new InvalidPublishError("priority", `publish: priority must be an integer from 0 to 255, got ${priority}`);
    properties.priority = priority;
  }
  if (headers !== undefined) {
    if (headers === null || typeof headers !== "object" || Array.isArray(headers)) throw new InvalidPublishError("headers", "publish: headers must be an object");
    properties.headers = headers;
  }
  properties.timestamp = timestamp;
  let text: string;
  try {
    text = JSON.stringify(properties);
  } catch (cause) {
    throw new InvalidPublishError("headers", `publish: headers must be JSON values: ${(cause as Error).message}`, { cause });
  }
  // PostgreSQL text and jsonb cannot hold U+0000.
  if (text.includes("\\u0000")) throw new InvalidPublishError("headers", "publish: a header contains a NUL character");
  // Checked as the relay will read them back and hand them to amqplib.
  if (properties.headers !== undefined) checkHeaders((JSON.parse(text) as { headers: Record<string, unknown> }).headers);
  return text;
}
