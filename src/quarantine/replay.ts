import type { Options } from "amqplib";
import { describeError } from "../core/errors.js";
import type { AuditRecord, QuarantineAdmin, QuarantineDetail } from "../core/store-contract/quarantine-admin.js";
import { QuarantineOperationError } from "./quarantine-errors.js";
import { noSuchEntry } from "./resolution-rules.js";

/** Headers a replay carries, so the consumer's logs and the quarantine queue can tell replays apart. */
export const REPLAY_OF_HEADER = "x-rabbit-inbox-replay-of";
export const REPLAY_AUDIT_HEADER = "x-rabbit-inbox-replay-audit";
export const REPLAY_BY_HEADER = "x-rabbit-inbox-replayed-by";

/** A message to republish to a work queue (default exchange) with publisher confirms. */
export interface ReplayMessage {
  queue: string;
  body: Buffer;
  options: Options.Publish;
}

/** Resolves once the broker confirmed the message AND routed it to the queue; rejects otherwise. */
export type ConfirmedPublish = (message: ReplayMessage) => Promise<void>;

export interface ReplayRequest {
  id: number;
  actor: string;
  reason: string;
  acceptNew?: boolean;
  acceptStale?: boolean;
  /** Replay again an entry replayed and confirmed but not applied (its first copy was lost); see ResolutionRequest. */
  again?: boolean;
}

export interface ReplayResult {
  entry: QuarantineDetail;
  audit: AuditRecord;
  queue: string;
}

/**
 * Republishes a quarantined message to the queue it came from, so that it goes through the
 * normal pipeline again: a conflict still conflicts and a stale event is still stale, unless the
 * operator granted `acceptNew` / `acceptStale`. The decision (and its grant) is committed first,
 * so the consumer that gets the message always finds it; then the message is published with
 * confirms; a failed publish revokes the grant and puts the entry back to `held`. The result's
 * audit record carries the confirm's time (`publishedAt`).
 */
export async function replayQuarantineEntry(admin: QuarantineAdmin, publish: ConfirmedPublish, request: ReplayRequest): Promise<ReplayResult> {
  const entry = await admin.getQuarantineEntry(request.id);
  if (!entry) throw noSuchEntry(request.id);
  const audit = await admin.beginResolution(request.id, {
    action: "replay", actor: request.actor, reason: request.reason,
    ...(request.acceptNew ? { acceptNew: true } : {}), ...(request.acceptStale ? { acceptStale: true } : {}), ...(request.again ? { again: true } : {}),
  });
  try {
    await publish(replayMessage(entry, audit));
  } catch (error) {
    const failure = describeError(error);
    await admin.failReplay(audit.id, failure);
    throw new QuarantineOperationError(`republishing quarantine entry #${entry.id} to ${JSON.stringify(entry.queue)} failed (${failure}); the entry is held again`, { cause: error });
  }
  await admin.confirmReplay(audit.id);
  // The record as the database now holds it: with the confirm's time.
  const confirmed = (await admin.quarantineAudit(entry.id)).find((a) => a.id === audit.id) ?? audit;
  return { entry, audit: confirmed, queue: entry.queue };
}

/** Properties that must not travel with a replay: they would be refused or would drop it. */
const DROPPED_PROPERTIES = new Set(["userId", "expiration", "headers", "deliveryMode"]);
const DROPPED_HEADER = /^(x-rabbit-inbox-|x-death$|x-first-death-|x-last-death-|x-delivery-count$)/;

/**
 * The original body and AMQP properties as the consumer recorded them (the `timestamp` stays:
 * the stale fence judges the event by its own time), minus this library's bookkeeping headers
 * (a fresh retry budget) and the broker's dead-letter headers, plus the replay's own headers.
 */
export function replayMessage(entry: QuarantineDetail, audit: AuditRecord): ReplayMessage {
  const recorded = parseRecordedProperties(entry.properties);
  const options: Options.Publish = {};
  for (const [name, value] of Object.entries(recorded.properties)) {
    if (DROPPED_PROPERTIES.has(name) || value === undefined || value === null) continue;
    (options as Record<string, unknown>)[name] = value;
  }
  const headers: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(recorded.headers)) {
    if (!DROPPED_HEADER.test(name)) headers[name] = value;
  }
  headers[REPLAY_OF_HEADER] = entry.id;
  headers[REPLAY_AUDIT_HEADER] = audit.id;
  headers[REPLAY_BY_HEADER] = audit.actor;
  return { queue: entry.queue, body: entry.body, options: { ...options, headers, persistent: true } };
}

function parseRecordedProperties(text: string): { properties: Record<string, unknown>; headers: Record<string, unknown> } {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { properties: {}, headers: {} };
  }
  const record = (v: unknown): Record<string, unknown> => (v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : {});
  // The AMQP consumer records { fields, properties }; a bare property object is accepted too.
  const outer = record(value);
  const properties = Object.hasOwn(outer, "properties") ? record(outer.properties) : outer;
  return { properties, headers: record(properties.headers) };
}
