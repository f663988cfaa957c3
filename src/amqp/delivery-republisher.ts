import type { ConsumeMessage, Options } from "amqplib";
import type { Attributes } from "@opentelemetry/api";
import { describeError } from "../core/errors.js";
import type { EventKey } from "../core/event.js";
import type { Logger } from "../core/logger.js";
import type { Outcome } from "../core/outcome.js";
import { messageContext } from "../observability/message-trace.js";
import { publishInSpan } from "../observability/publish-trace.js";
import { ATTR } from "../observability/tracing.js";
import type { Delivery } from "./queue-consumer.js";
import { RETRY_ATTEMPT_HEADER, retryAttemptOf } from "./retry-attempt.js";
import { retryQueueName } from "./topology.js";

export interface DeliveryRepublisherOptions {
  handlerName: string;
  quarantineQueue: string;
  retryDelays: readonly number[];
  logger: Logger;
}

/**
 * Copies a delivery, with publisher confirms, to where its outcome sends it: the quarantine
 * queue, or the delay queue of its next retry. The copy goes over the session that delivered the
 * original, and each method resolves true only once the broker confirmed and routed it: the
 * original may be acked then, and only then.
 */
export class DeliveryRepublisher {
  constructor(private readonly options: DeliveryRepublisherOptions) {}

  async quarantine(delivery: Delivery, outcome: Extract<Outcome, { kind: "quarantined" }>): Promise<boolean> {
    const { consumer, message } = delivery;
    const { session } = consumer;
    const { handlerName, quarantineQueue, logger } = this.options;
    if (!session.isOpen) return false;
    const key: EventKey | null = outcome.key;
    try {
      await publishCopyInSpan(delivery, quarantineQueue, { [ATTR.quarantineReason]: outcome.reason }, {
          ...message.properties.headers,
          "x-rabbit-inbox-reason": outcome.reason,
          "x-rabbit-inbox-detail": outcome.detail.slice(0, 1000),
          "x-rabbit-inbox-handler": handlerName,
          "x-rabbit-inbox-original-queue": consumer.queue,
          ...(key ? { "x-rabbit-inbox-tenant": key.tenant, "x-rabbit-inbox-event-id": key.eventId } : {}),
          ...(outcome.record.fingerprint ? { "x-rabbit-inbox-fingerprint": outcome.record.fingerprint } : {}),
          ...(outcome.record.storedFingerprint ? { "x-rabbit-inbox-stored-fingerprint": outcome.record.storedFingerprint } : {}),
      }, (headers) => session.publisher.publish("", quarantineQueue, message.content, { ...copiedProperties(message), headers }));
      logger.warn("event quarantined", {
        handler: handlerName, reason: outcome.reason, tenant: key?.tenant, eventId: key?.eventId,
        detail: outcome.detail.slice(0, 300), quarantineQueue,
      });
      return true;
    } catch (error) {
      logger.error("quarantine publish not confirmed; the original stays unacked and comes back", {
        reason: outcome.reason, tenant: key?.tenant, eventId: key?.eventId, error: describeError(error),
      });
      return false;
    }
  }

  async delayRetry(delivery: Delivery, outcome: Extract<Outcome, { kind: "delayed" }>): Promise<boolean> {
    const { consumer, message } = delivery;
    const { session } = consumer;
    const { handlerName, retryDelays, logger } = this.options;
    if (!session.isOpen) return false;
    const headers = (message.properties.headers ?? {}) as Record<string, unknown>;
    const attempt = retryAttemptOf(headers, consumer.queue) + 1;
    // Back to the queue it came from (its own partition), after the delay.
    const target = retryQueueName(consumer.queue, attempt);
    try {
      await publishCopyInSpan(delivery, target, { [ATTR.attempts]: attempt },
        { ...headers, [RETRY_ATTEMPT_HEADER]: attempt, "x-rabbit-inbox-last-error": outcome.detail.slice(0, 500) },
        (copyHeaders) => session.publisher.publish("", target, message.content, { ...copiedProperties(message), headers: copyHeaders }));
      logger.warn("delayed retry scheduled", {
        handler: handlerName, tenant: outcome.key?.tenant, eventId: outcome.key?.eventId,
        attempt, delayMs: retryDelays[attempt - 1], retryQueue: target,
      });
      return true;
    } catch (error) {
      logger.error("delayed-retry publish not confirmed; the original stays unacked and comes back", {
        tenant: outcome.key?.tenant, eventId: outcome.key?.eventId, error: describeError(error),
      });
      return false;
    }
  }
}

/**
 * Publishes a copy in a publish span under the original's process span, the copy carrying that
 * span's context; an untraced original's copy goes out with its headers as they are.
 */
function publishCopyInSpan(
  delivery: Delivery, queue: string, attributes: Attributes, headers: Record<string, unknown>, publish: (headers: Record<string, unknown>) => Promise<unknown>,
): Promise<unknown> {
  const parent = messageContext(delivery.incoming);
  if (!parent) return publish(headers);
  const { message } = delivery;
  const target = { exchange: "", routingKey: queue, messageId: message.properties.messageId as string | undefined, bodySize: message.content.length };
  return publishInSpan(parent, target, attributes, headers, publish);
}

/**
 * What a quarantine or delayed-retry copy keeps of the original's properties: what an operator
 * needs to read and replay it, what the pipeline reads when the copy comes back (content type and
 * encoding, the timestamp of the stale fence), and persistence. Only properties the original has.
 */
function copiedProperties(message: ConsumeMessage): Options.Publish {
  const p = message.properties as unknown as Record<string, unknown>;
  return {
    persistent: true,
    ...(typeof p.contentType === "string" ? { contentType: p.contentType } : {}),
    ...(typeof p.contentEncoding === "string" ? { contentEncoding: p.contentEncoding } : {}),
    ...(typeof p.messageId === "string" ? { messageId: p.messageId } : {}),
    ...(typeof p.type === "string" ? { type: p.type } : {}),
    ...(typeof p.timestamp === "number" ? { timestamp: p.timestamp } : {}),
  };
}
