import { InvalidPublishError } from "./errors.js";

/** Limits on what one publish may carry, beyond what AMQP itself cannot carry. */
export interface PublishLimits {
  /**
   * Largest body, in bytes. Default 16 MiB: RabbitMQ 4's default `max_message_size`. A broker
   * refuses a larger message on every attempt, so the row would never leave the outbox.
   */
  maxBodyBytes: number;
}

export const defaultPublishLimits: PublishLimits = { maxBodyBytes: 16 * 1024 * 1024 };

/** AMQP short strings (exchange, routing key, property values, table keys) hold at most 255 bytes. */
const SHORT_STRING_BYTES = 255;
/**
 * amqplib encodes a message's headers into a buffer of this size and throws on a larger table:
 * such a row would fail at every publish.
 */
const HEADERS_TABLE_BYTES = 65_536;
/** amqplib encodes nested tables recursively; a deep one could overflow the stack of the relay. */
const MAX_HEADER_DEPTH = 32;
/** From this magnitude amqplib encodes a number as a 64-bit integer, which a fraction cannot be. */
const LONG_FROM = 2 ** 50;
const LONG_MIN = -(2 ** 63);
const DOUBLE_FROM = 2 ** 63;

/** An AMQP short string: a string of at most 255 UTF-8 bytes, without NUL (PostgreSQL text cannot hold one). */
export function checkShortString(field: string, value: unknown, emptyAllowed: boolean): void {
  if (typeof value !== "string") throw new InvalidPublishError(field, `publish: ${field} must be a string, got ${value === null ? "null" : typeof value}`);
  if (!emptyAllowed && value.length === 0) throw new InvalidPublishError(field, `publish: ${field} must not be empty`);
  const bytes = Buffer.byteLength(value);
  if (bytes > SHORT_STRING_BYTES) throw new InvalidPublishError(field, `publish: ${field} is ${bytes} bytes; AMQP carries at most ${SHORT_STRING_BYTES}`);
  if (value.includes("\u0000")) throw new InvalidPublishError(field, `publish: ${field} contains a NUL character`);
}

export function checkBodySize(bytes: number, limits: PublishLimits): void {
  if (bytes > limits.maxBodyBytes) {
    throw new InvalidPublishError("body", `publish: body is ${bytes} bytes, over the limit of ${limits.maxBodyBytes} (publishLimits.maxBodyBytes)`);
  }
}

/**
 * Checks headers as the relay will read them back (JSON values) against what amqplib can encode
 * in a field table, by the same rules and sizes as its encoder: a row that passes always
 * encodes, and one that would throw in the relay is refused here, naming the header.
 */
export function checkHeaders(headers: Record<string, unknown>): void {
  const bytes = 4 + tableEntriesBytes(headers, "headers", 1);
  if (bytes > HEADERS_TABLE_BYTES) {
    throw new InvalidPublishError("headers", `publish: headers encode to ${bytes} bytes; amqplib carries at most ${HEADERS_TABLE_BYTES}`);
  }
}

function tableEntriesBytes(table: Record<string, unknown>, path: string, depth: number): number {
  let bytes = 0;
  for (const [key, value] of Object.entries(table)) {
    if (value === undefined) continue;
    const keyBytes = Buffer.byteLength(key);
    if (keyBytes > SHORT_STRING_BYTES) throw new InvalidPublishError(path, `publish: ${path} has a key of ${keyBytes} bytes; AMQP carries at most ${SHORT_STRING_BYTES}`);
    bytes += 1 + keyBytes + valueBytes(value, `${path}.${key}`, depth);
  }
  return bytes;
}

/** Bytes of one field value as amqplib encodes it, its type tag included. */
function valueBytes(value: unknown, path: string, depth: number): number {
  switch (typeof value) {
    case "string": return 5 + Buffer.byteLength(value);
    case "boolean": return 2;
    case "number": return 1 + numberBytes(value, path);
    case "object": break;
    default: throw new InvalidPublishError(path, `publish: ${path} is a ${typeof value}; a header holds JSON values`);
  }
  if (value === null) return 1;
  if (depth >= MAX_HEADER_DEPTH) throw new InvalidPublishError(path, `publish: ${path} nests deeper than ${MAX_HEADER_DEPTH} levels`);
  if (Array.isArray(value)) return 5 + value.reduce((sum: number, item, i) => sum + valueBytes(item, `${path}[${i}]`, depth + 1), 0);
  // amqplib reads an object with its own "!" key as a typed value ({ "!": "timestamp", value }).
  if (Object.hasOwn(value, "!")) throw new InvalidPublishError(path, `publish: ${path} has a "!" key, which amqplib reads as a typed value`);
  return 5 + tableEntriesBytes(value as Record<string, unknown>, path, depth + 1);
}

function numberBytes(n: number, path: string): number {
  if (!Number.isFinite(n)) throw new InvalidPublishError(path, `publish: ${path} is ${n}; AMQP carries finite numbers only`);
  if (n >= DOUBLE_FROM || (Math.abs(n) < LONG_FROM && !Number.isInteger(n))) return 8;
  if (!Number.isInteger(n)) throw new InvalidPublishError(path, `publish: ${path} is ${n}: amqplib encodes a number this large as a 64-bit integer, and it is not one`);
  if (n < LONG_MIN) throw new InvalidPublishError(path, `publish: ${path} is ${n}, below the smallest 64-bit integer`);
  if (n >= -128 && n < 128) return 1;
  if (n >= -0x8000 && n < 0x8000) return 2;
  if (n >= -0x80000000 && n < 0x80000000) return 4;
  return 8;
}
