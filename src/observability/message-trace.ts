import type { Context, Link, Span } from "@opentelemetry/api";
import type { IncomingMessage } from "../core/incoming-message.js";
import type { Outcome } from "../core/outcome.js";
import { ATTR, activeContext, extractContext, failSpan, inSpan, markError, spanMatters, tracer, tracingApi, withContext } from "./tracing.js";

/**
 * A span per delivery rather than per batch: every message of a batch may come from another
 * trace, and a process span parented by the producer's context keeps each of those traces one
 * tree (producer, consumer, transaction, outbox, relay, downstream). The batch's transaction is
 * one span, a child of its first message's span and linked to the others'.
 */
interface MessageTrace {
  /** None for a message whose producer's trace was sampled out: its context carries that on. */
  span: Span | undefined;
  context: Context;
}

/** Process spans by message; only traced messages have one (none at all without an SDK). */
const traces = new WeakMap<IncomingMessage, MessageTrace>();

export interface DeliveryFacts {
  queue: string;
  exchange: string;
  routingKey: string;
  deliveryTag: number;
  handler: string;
}

/** Starts the process span of a delivery, parented by the context its headers carry. */
export function startProcessSpan(message: IncomingMessage, facts: DeliveryFacts): void {
  const otel = tracingApi();
  if (!otel) return;
  const parent = extractContext(message.delivery.headers);
  const upstream = otel.trace.getSpanContext(parent);
  if (upstream?.isRemote && (upstream.traceFlags & otel.TraceFlags.SAMPLED) === 0) {
    // The producer sampled this trace out: no span would be recorded under a parent-based
    // sampler (the default), so none is made, and the producer's context alone carries the
    // decision on to what the handler publishes. Most messages of a head-sampled system take
    // this path, and it costs a header parse instead of a span.
    traces.set(message, { span: undefined, context: parent });
    return;
  }
  const span = tracer().startSpan(`process ${facts.queue}`, {
    kind: otel.SpanKind.CONSUMER,
    attributes: {
      [ATTR.system]: "rabbitmq", [ATTR.operationType]: "process", [ATTR.operationName]: "process",
      [ATTR.destination]: facts.queue, [ATTR.routingKey]: facts.routingKey, [ATTR.deliveryTag]: facts.deliveryTag,
      [ATTR.bodySize]: message.body.length, [ATTR.handler]: facts.handler,
      ...(message.delivery.messageId !== undefined ? { [ATTR.messageId]: message.delivery.messageId } : {}),
    },
  }, parent);
  if (!spanMatters(span)) return;
  traces.set(message, { span, context: otel.trace.setSpan(parent, span) });
}

/** The context of a message's process span, when it is traced. */
export function messageContext(message: IncomingMessage): Context | undefined {
  return traces.get(message)?.context;
}

/** Ends the process spans of a settled batch with what became of each message. */
export function endProcessSpans(messages: readonly IncomingMessage[], outcomes: readonly Outcome[]): void {
  messages.forEach((message, i) => {
    const t = traces.get(message);
    if (!t) return;
    traces.delete(message);
    if (!t.span) return;
    const outcome = outcomes[i];
    if (outcome) recordOutcome(t.span, outcome);
    t.span.end();
  });
}

/** Ends the process spans of a batch the pipeline could not process at all. */
export function failProcessSpans(messages: readonly IncomingMessage[], error: unknown): void {
  for (const message of messages) {
    const t = traces.get(message);
    if (!t) continue;
    traces.delete(message);
    if (!t.span) continue;
    failSpan(t.span, error, "the pipeline rejected the batch; delivery given back unsettled");
    t.span.end();
  }
}

function recordOutcome(span: Span, outcome: Outcome): void {
  if (!span.isRecording()) return;
  // One call for all of them: the SDK checks and copies attributes per call.
  span.setAttributes({
    [ATTR.outcome]: outcome.kind,
    [ATTR.duplicate]: outcome.kind === "duplicate",
    ...(outcome.key ? { [ATTR.tenant]: outcome.key.tenant, [ATTR.eventId]: outcome.key.eventId } : {}),
    ...(outcome.kind === "quarantined" ? { [ATTR.quarantineReason]: outcome.reason } : {}),
  });
  switch (outcome.kind) {
    case "quarantined":
      span.addEvent("quarantined", { [ATTR.quarantineReason]: outcome.reason, "rabbit_inbox.detail": outcome.detail.slice(0, 300) });
      break;
    case "delayed":
      span.addEvent("delayed retry scheduled", { "rabbit_inbox.detail": outcome.detail.slice(0, 300) });
      break;
    case "requeue":
      markError(span, "given back to the broker");
      break;
    default:
      break;
  }
}

/**
 * Runs one transaction attempt in a span of its own, a child of the first traced message's
 * process span and linked to the other messages' spans. Untraced batches run as they are.
 */
export function traceTransaction<T>(handler: string, messages: readonly IncomingMessage[], attempt: number, work: () => Promise<T>): Promise<T> {
  const traced = messages.flatMap((m) => {
    const t = traces.get(m);
    return t?.span ? [{ span: t.span, context: t.context }] : [];
  });
  const otel = tracingApi();
  if (traced.length === 0 || !otel) return work();
  const [first, ...others] = traced;
  const links: Link[] = others.map((t) => ({ context: t.span.spanContext() }));
  const span = tracer().startSpan(`transaction ${handler}`, {
    kind: otel.SpanKind.INTERNAL,
    attributes: { [ATTR.handler]: handler, [ATTR.batchCount]: messages.length, [ATTR.attempts]: attempt },
    links,
  }, first!.context);
  return withContext(otel.trace.setSpan(first!.context, span), () => inSpan(span, work));
}

/**
 * The context a handler works in for `message`: the transaction's (or a span the handler
 * started) when that belongs to the message's trace, else the message's own process span, so
 * that what it publishes continues its own trace even inside another message's transaction.
 * Undefined for an untraced message: nothing changes for it.
 */
export function handlerContextFor(message: IncomingMessage): Context | undefined {
  const own = traces.get(message);
  const otel = tracingApi();
  if (!own || !otel) return undefined;
  const active = activeContext();
  if (!own.span) return own.context;
  return otel.trace.getSpanContext(active)?.traceId === own.span.spanContext().traceId ? active : own.context;
}
