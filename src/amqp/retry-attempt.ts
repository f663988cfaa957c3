import { retryQueueName } from "./topology.js";

/** Header counting broker-side (delayed) retries of a message. */
export const RETRY_ATTEMPT_HEADER = "x-rabbit-inbox-retry";

/**
 * How many delayed retries the message has been through. The count in `x-rabbit-inbox-retry`
 * is believed only when the message has just come back from that very delay queue: the broker's
 * newest `x-death` entry (it puts the latest first) names `<queue>.retry.<n>` with reason
 * `expired`, for the n the header says. Anything else (a producer that sets the header, or
 * republishes a message it consumed with its headers) counts as no retry yet, so a producer
 * cannot shorten or exhaust an event's retry budget by accident.
 */
export function retryAttemptOf(headers: Readonly<Record<string, unknown>>, queue: string): number {
  const value = headers[RETRY_ATTEMPT_HEADER];
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 1) return 0;
  const deaths = headers["x-death"];
  const latest: unknown = Array.isArray(deaths) ? deaths[0] : undefined;
  if (typeof latest !== "object" || latest === null) return 0;
  const { queue: diedIn, reason } = latest as Record<string, unknown>;
  return textOf(diedIn) === retryQueueName(queue, value) && textOf(reason) === "expired" ? value : 0;
}

/** A header table's string, whichever way the client library decoded it. */
function textOf(value: unknown): string | undefined {
  if (typeof value === "string") return value;
  if (Buffer.isBuffer(value)) return value.toString("utf8");
  return undefined;
}
