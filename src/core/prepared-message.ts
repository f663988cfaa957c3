import { type DecodeLimits, decodeJsonBody } from "./decode.js";
import { InboxConfigError, PermanentEventError, RetryLaterError, describeError } from "./errors.js";
import { type EventKey, type ParsedEvent, defaultEventKey, eventKeyString } from "./event.js";
import { fingerprintOf } from "./fingerprint.js";
import type { InboxHandler } from "./handler.js";
import type { IncomingMessage } from "./incoming-message.js";
import { type StaleFenceOptions, eventTimeOf } from "./event-time.js";

/**
 * A message once decoded, validated and fingerprinted, before any database work: either an
 * event ready to claim, or one refused by validation (quarantined as `invalid`).
 * `index` is its position in the messages being processed; `eventTime` (AMQP `timestamp` or a
 * configured body field) is read by its claim's stale fence and by its quarantine row.
 */
export type Prepared<E> =
  | { index: number; ok: true; key: EventKey; keyString: string; event: E; fingerprint: string; redeliveries: number; eventTime: Date | undefined }
  | {
    index: number; ok: false; key: EventKey | null; fingerprint: string | null; detail: string; eventTime: Date | undefined;
    /** The quarantine reason: `invalid`, or the reason of a PermanentEventError or RetryLaterError the parser threw. */
    reason: string;
    /** The parser said "not yet" (RetryLaterError): the message waits in the delayed retries first. */
    retryLater: boolean;
    /** An error of kind `config` from the parser: nobody's event is at fault, so the batch fails with it. */
    fail?: InboxConfigError;
  };

export type Ready<E> = Extract<Prepared<E>, { ok: true }>;

export interface PrepareOptions<E, Tx> {
  handler: InboxHandler<E, Tx>;
  limits: DecodeLimits;
  staleFence: StaleFenceOptions | undefined;
}

export function prepareMessage<E, Tx>(message: IncomingMessage, index: number, options: PrepareOptions<E, Tx>): Prepared<E> {
  const { handler } = options;
  let key: EventKey | null = null;
  let fingerprint: string | null = null;
  let body: Record<string, unknown> | undefined;
  let eventTime: Date | undefined;
  let stage = "parse";
  try {
    body = decodeJsonBody(message.body, message, options.limits);
    const parsed: ParsedEvent<E> = handler.parse
      ? handler.parse(body, message.delivery)
      : { key: defaultEventKey(body), event: body as E };
    key = parsed.key;
    eventTime = eventTimeOf(message.delivery, body, options.staleFence);
    const source = parsed.fingerprintSource ?? body;
    stage = "fingerprint";
    fingerprint = handler.fingerprint ? handler.fingerprint(source) : fingerprintOf(source);
    const redeliveries = message.delivery.deliveryCount ?? 0;
    return { index, ok: true, key, keyString: eventKeyString(key), event: parsed.event, fingerprint, redeliveries, eventTime };
  } catch (error) {
    // For the operator only: an event refused by validation still shows its tenant and id in
    // quarantine when they are readable. Its quarantine entry is keyed by the body's hash.
    if (key === null && body !== undefined) key = readableKey(body);
    const refused = { index, ok: false as const, key, fingerprint, eventTime, retryLater: false };
    // The error keeps its kind, as a handler's does.
    if (error instanceof InboxConfigError) return { ...refused, reason: "invalid", detail: error.message, fail: error };
    if (error instanceof RetryLaterError) return { ...refused, reason: error.reason, detail: error.message, retryLater: true };
    if (error instanceof PermanentEventError) return { ...refused, reason: error.reason, detail: error.message };
    // A parser that crashes on odd input is a bug in the parser, but the message is still bad
    // input as far as this delivery goes: quarantine it rather than loop on it.
    return { ...refused, reason: "invalid", detail: `${stage} failed: ${describeError(error)}` };
  }
}

function readableKey(body: Record<string, unknown>): EventKey | null {
  try {
    return defaultEventKey(body);
  } catch {
    return null;
  }
}
