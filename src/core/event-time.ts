import { InvalidEventError } from "./errors.js";
import type { DeliveryInfo } from "./handler.js";

/** How the pipeline finds an event's own time, for the stale fence. */
export interface StaleFenceOptions {
  /**
   * Body field holding the event time, used when the producer sets no AMQP `timestamp`
   * property: ISO-8601 text with a time zone, or epoch milliseconds. A present but unreadable
   * value makes the event `invalid`; an absent one means "first seen now" (never stale).
   * Default: none (the AMQP timestamp only).
   */
  eventTimeField?: string;
  /**
   * How far a producer's clock may run ahead of the database's. An event is stale when its time
   * minus this tolerance is at or before the purge horizon, so a fast producer clock cannot slip
   * a purged event past the fence. Default 0. Keep it far below the replay window.
   */
  clockSkewToleranceMs?: number;
}

// Years 2000-2200 in ms: anything else in the field is a unit mistake (seconds, microseconds).
const MIN_EPOCH_MS = 946_684_800_000;
const MAX_EPOCH_MS = 7_258_118_400_000;

/**
 * The time the stale fence compares with the purge horizon: the AMQP `timestamp` property when
 * set (second precision), else the configured body field, else undefined (first seen now).
 * The tolerance is already subtracted.
 */
export function eventTimeOf(delivery: DeliveryInfo, body: Readonly<Record<string, unknown>>, options: StaleFenceOptions | undefined): Date | undefined {
  const own = delivery.timestamp ?? bodyEventTime(body, options?.eventTimeField);
  if (own === undefined) return undefined;
  const tolerance = options?.clockSkewToleranceMs ?? 0;
  return tolerance > 0 ? new Date(own.getTime() - tolerance) : own;
}

function bodyEventTime(body: Readonly<Record<string, unknown>>, field: string | undefined): Date | undefined {
  if (field === undefined || !Object.hasOwn(body, field)) return undefined;
  const value = body[field];
  if (value === null || value === undefined) return undefined;
  let ms: number;
  if (typeof value === "number") {
    ms = value;
  } else if (typeof value === "string" && /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})$/i.test(value)) {
    ms = Date.parse(value);
  } else {
    throw new InvalidEventError(`${field} must be an ISO-8601 time with a zone or epoch milliseconds, got ${JSON.stringify(value)?.slice(0, 60)}`);
  }
  if (!Number.isFinite(ms) || ms < MIN_EPOCH_MS || ms > MAX_EPOCH_MS) {
    throw new InvalidEventError(`${field} is not a plausible event time (epoch milliseconds between 2000 and 2200): ${JSON.stringify(value)?.slice(0, 60)}`);
  }
  return new Date(ms);
}
