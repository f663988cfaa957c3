import type { Context, Link, Span, SpanContext } from "@opentelemetry/api";
import type { IncomingMessage } from "../core/incoming-message.js";
import type { DeliveryFacts, Instrumentation, ProcessSpans } from "../core/instrumentation.js";
import type { Outcome } from "../core/outcome.js";
import type { OtelApi } from "./otel-api.js";
import { withTraceHeaders } from "./publish-trace.js";
import { quickTraceparent } from "./traceparent.js";
import { ATTR, activeContext, extractContext, failSpan, inSpan, markError, spanMatters, tracer, tracingActive, tracingApi, withContext } from "./tracing.js";

interface MessageTrace {
  /** The message's own process span; none in `batch` mode or when its producer sampled it out. */
  span: Span | undefined;
  /** The span of the batch it was processed in (`batch` mode). */
  batch: BatchTrace | undefined;
  /** Whether its headers carry a producer's context, which its publishes and copies continue. */
  upstream: boolean;
  /** The producer's context, read from the headers when first needed. */
  parent: Context | undefined;
  headers: Record<string, unknown>;
  /** The context its publishes and copies continue, made when first asked for. */
  context: Context | undefined;
}

interface BatchTrace {
  span: Span;
  context: Context;
}

/** A message's trace, kept on the message itself; only traced messages have one (none at all without an SDK). */
function traceOf(message: IncomingMessage): MessageTrace | undefined {
  return message.trace as MessageTrace | undefined;
}

type Carrier = { incoming: IncomingMessage };

/**
 * Starts the process spans of a batch's deliveries: one per delivery parented by the context its
 * headers carry, or one for the batch linked to each. `facts` is asked only for deliveries that get
 * a span (the first one in `batch` mode).
 */
function startProcessSpans<D extends Carrier>(deliveries: readonly D[], facts: (delivery: D) => DeliveryFacts, mode: ProcessSpans): void {
  const otel = tracingActive();
  if (!otel || deliveries.length === 0) return;
  const fields = otel.propagation.fields();
  if (mode === "batch") startBatchSpan(otel, fields, deliveries, facts);
  else for (const delivery of deliveries) startMessageSpan(otel, fields, delivery, facts);
}

interface Upstream {
  headers: Record<string, unknown>;
  /** Set when the propagator was asked (the quick read could not answer). */
  parent: Context | undefined;
  spanContext: SpanContext | undefined;
}

const NO_HEADERS: Record<string, unknown> = Object.freeze({});

function upstreamOf(otel: typeof OtelApi, fields: readonly string[], message: IncomingMessage): Upstream {
  const raw = message.delivery.headers;
  const headers = raw && typeof raw === "object" ? raw as Record<string, unknown> : NO_HEADERS;
  const quick = quickTraceparent(headers, fields);
  if (quick) return { headers, parent: undefined, spanContext: quick };
  const parent = extractContext(headers);
  const spanContext = otel.trace.getSpanContext(parent);
  return { headers, parent, spanContext: spanContext?.isRemote ? spanContext : undefined };
}

function startMessageSpan<D extends Carrier>(otel: typeof OtelApi, fields: readonly string[], delivery: D, facts: (delivery: D) => DeliveryFacts): void {
  const message = delivery.incoming;
  const { headers, parent: extracted, spanContext } = upstreamOf(otel, fields, message);
  if (spanContext && (spanContext.traceFlags & otel.TraceFlags.SAMPLED) === 0) {
    // The producer sampled this trace out: no span would be recorded under a parent-based
    // sampler (the default), so none is made, and the producer's context alone carries the
    // decision on to what the handler publishes, read from the headers only if it publishes.
    // Most messages of a head-sampled system take this path.
    message.trace = { span: undefined, batch: undefined, upstream: true, parent: extracted, headers, context: undefined } satisfies MessageTrace;
    return;
  }
  const parent = extracted ?? (spanContext ? otel.trace.setSpanContext(otel.ROOT_CONTEXT, spanContext) : otel.ROOT_CONTEXT);
  const f = facts(delivery);
  const span = tracer().startSpan(`process ${f.queue}`, {
    kind: otel.SpanKind.CONSUMER,
    attributes: {
      [ATTR.system]: "rabbitmq", [ATTR.operationType]: "process", [ATTR.operationName]: "process",
      [ATTR.destination]: f.queue, [ATTR.routingKey]: f.routingKey, [ATTR.deliveryTag]: f.deliveryTag,
      [ATTR.bodySize]: message.body.length, [ATTR.handler]: f.handler,
      ...(message.delivery.messageId !== undefined ? { [ATTR.messageId]: message.delivery.messageId } : {}),
    },
  }, parent);
  if (!spanMatters(span)) return;
  message.trace = { span, batch: undefined, upstream: spanContext !== undefined, parent, headers, context: undefined } satisfies MessageTrace;
}

function startBatchSpan<D extends Carrier>(otel: typeof OtelApi, fields: readonly string[], deliveries: readonly D[], facts: (delivery: D) => DeliveryFacts): void {
  const upstreams = deliveries.map((d) => upstreamOf(otel, fields, d.incoming));
  const links: Link[] = [];
  for (const u of upstreams) if (u.spanContext) links.push({ context: u.spanContext });
  const f = facts(deliveries[0]!);
  // A partitioned consumer's batch can hold deliveries of several partition queues. The
  // messaging conventions then name the span after the operation alone, without a destination;
  // the queues are listed in an attribute of their own.
  const queues = [...new Set(deliveries.map((d) => d.incoming.delivery.queue))].sort();
  const destination = queues.length === 1 ? { [ATTR.destination]: f.queue } : { [ATTR.queues]: queues };
  // A root of its own: the batch belongs to none of its messages' traces more than to another.
  const span = tracer().startSpan(queues.length === 1 ? `process ${f.queue}` : "process", {
    kind: otel.SpanKind.CONSUMER,
    root: true,
    attributes: {
      [ATTR.system]: "rabbitmq", [ATTR.operationType]: "process", [ATTR.operationName]: "process",
      ...destination, [ATTR.batchCount]: deliveries.length, [ATTR.handler]: f.handler,
    },
    links,
  }, otel.ROOT_CONTEXT);
  if (!spanMatters(span)) return;
  const batch: BatchTrace = { span, context: otel.trace.setSpan(otel.ROOT_CONTEXT, span) };
  deliveries.forEach((d, i) => {
    const u = upstreams[i]!;
    d.incoming.trace = { span: undefined, batch, upstream: u.spanContext !== undefined, parent: u.parent, headers: u.headers, context: undefined } satisfies MessageTrace;
  });
}

/** The context a message's copies continue (its span's, else its producer's, else its batch's), when it is traced. */
export function messageContext(message: IncomingMessage): Context | undefined {
  const t = traceOf(message);
  return t ? contextOf(t) : undefined;
}

function contextOf(t: MessageTrace): Context {
  if (t.context) return t.context;
  if (t.span) t.context = tracingApi()!.trace.setSpan(parentOf(t), t.span);
  else if (t.upstream || !t.batch) t.context = parentOf(t);
  else t.context = t.batch.context;
  return t.context;
}

function parentOf(t: MessageTrace): Context {
  t.parent ??= extractContext(t.headers);
  return t.parent;
}

/**
 * True when what a message's handler publishes continues a context of the message's own (its
 * span's or its producer's); otherwise it continues whatever context is active.
 */
function isTraced(message: IncomingMessage): boolean {
  const t = traceOf(message);
  return t !== undefined && (t.span !== undefined || t.upstream);
}

/**
 * Ends the process spans of a settled batch with what became of each message, at the time of
 * this call but on the next turn of the event loop: recording and ending a span per message
 * would otherwise delay the next batch's transaction, which starts as this batch is settled.
 */
function endProcessSpansSoon(messages: readonly IncomingMessage[], outcomes: readonly Outcome[]): void {
  if (!tracingApi()) return;
  const settledAt = performance.now();
  setImmediate(() => endProcessSpans(messages, outcomes, settledAt));
}

/** Ends the process spans of a settled batch with what became of each message. */
function endProcessSpans(messages: readonly IncomingMessage[], outcomes: readonly Outcome[], endTime?: number): void {
  const batches = new Map<BatchTrace, Outcome[]>();
  messages.forEach((message, i) => {
    const t = traceOf(message);
    if (!t) return;
    message.trace = undefined;
    const outcome = outcomes[i];
    if (t.batch) {
      let settled = batches.get(t.batch);
      if (!settled) batches.set(t.batch, (settled = []));
      if (outcome) settled.push(outcome);
    }
    if (!t.span) return;
    if (outcome) recordOutcome(t.span, outcome, endTime);
    t.span.end(endTime);
  });
  for (const [batch, settled] of batches) {
    recordBatchOutcomes(batch.span, settled, endTime);
    batch.span.end(endTime);
  }
}

/** Ends the process spans of a batch the pipeline could not process at all. */
function failProcessSpans(messages: readonly IncomingMessage[], error: unknown): void {
  const batches = new Set<BatchTrace>();
  for (const message of messages) {
    const t = traceOf(message);
    if (!t) continue;
    message.trace = undefined;
    if (t.batch) batches.add(t.batch);
    if (!t.span) continue;
    failSpan(t.span, error, "the pipeline rejected the batch; delivery given back unsettled");
    t.span.end();
  }
  for (const batch of batches) {
    failSpan(batch.span, error, "the pipeline rejected the batch; deliveries given back unsettled");
    batch.span.end();
  }
}

/** A batch's span counts its outcomes by kind, and tells each one that is not applied or a duplicate as an event. */
function recordBatchOutcomes(span: Span, outcomes: readonly Outcome[], at: number | undefined): void {
  if (!span.isRecording()) return;
  const counts: Record<string, number> = {};
  for (const outcome of outcomes) {
    counts[`${ATTR.outcomeCount}.${outcome.kind}`] = (counts[`${ATTR.outcomeCount}.${outcome.kind}`] ?? 0) + 1;
    if (outcome.kind === "applied" || outcome.kind === "duplicate") continue;
    span.addEvent(outcome.kind, {
      ...(outcome.key ? { [ATTR.tenant]: outcome.key.tenant, [ATTR.eventId]: outcome.key.eventId } : {}),
      ...(outcome.kind === "quarantined" ? { [ATTR.quarantineReason]: outcome.reason } : {}),
      ...("detail" in outcome ? { "rabbit_inbox.detail": outcome.detail.slice(0, 300) } : {}),
    }, at);
  }
  span.setAttributes(counts);
  if (counts[`${ATTR.outcomeCount}.requeue`]) markError(span, "deliveries given back to the broker");
}

function recordOutcome(span: Span, outcome: Outcome, at: number | undefined): void {
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
      span.addEvent("quarantined", { [ATTR.quarantineReason]: outcome.reason, "rabbit_inbox.detail": outcome.detail.slice(0, 300) }, at);
      break;
    case "delayed":
      span.addEvent("delayed retry scheduled", { "rabbit_inbox.detail": outcome.detail.slice(0, 300) }, at);
      break;
    case "requeue":
      markError(span, "given back to the broker");
      break;
    default:
      break;
  }
}

/**
 * Runs one transaction attempt in a span of its own: in `batch` mode a child of the batch's
 * span; per message, a child of the first traced message's process span and linked to the
 * other messages' spans. Untraced batches run as they are.
 */
function traceTransaction<T>(handler: string, messages: readonly IncomingMessage[], attempt: number, work: () => Promise<T>): Promise<T> {
  const otel = tracingApi();
  if (!otel) return work();
  let parent: Context | undefined;
  const links: Link[] = [];
  for (const m of messages) {
    const t = traceOf(m);
    if (t?.batch) {
      parent = t.batch.context;
      break;
    }
    if (!t?.span) continue;
    if (parent) links.push({ context: t.span.spanContext() });
    else parent = contextOf(t);
  }
  if (!parent) return work();
  const span = tracer().startSpan(`transaction ${handler}`, {
    kind: otel.SpanKind.INTERNAL,
    attributes: { [ATTR.handler]: handler, [ATTR.batchCount]: messages.length, [ATTR.attempts]: attempt },
    links,
  }, parent);
  return withContext(otel.trace.setSpan(parent, span), () => inSpan(span, work));
}

/**
 * The context a handler works in for `message`: the transaction's (or a span the handler
 * started) when that belongs to the message's trace, else the message's own process span (or
 * its producer's), so that what it publishes continues its own trace even inside another
 * message's transaction. Undefined when the message brings no context of its own: then it is
 * whatever is active (the transaction's, in `batch` mode).
 */
function handlerContextFor(message: IncomingMessage): Context | undefined {
  const own = traceOf(message);
  const otel = tracingApi();
  if (!own || !otel) return undefined;
  if (!own.span) return own.upstream ? contextOf(own) : undefined;
  const active = activeContext();
  return otel.trace.getSpanContext(active)?.traceId === own.span.spanContext().traceId ? active : contextOf(own);
}

/**
 * The consumer's tracing through the OpenTelemetry API: what the consumer hands its pipeline.
 * Without the API installed every part of it returns at once.
 */
export const openTelemetryInstrumentation: Instrumentation = {
  startDeliveries: startProcessSpans,
  deliveriesSettled: endProcessSpansSoon,
  deliveriesFailed: failProcessSpans,
  transaction: traceTransaction,
  ownsContext: isTraced,
  handlerContext: handlerContextFor,
  inContext: (context, work) => withContext(context as Context, work),
  traceHeaders: withTraceHeaders,
};
