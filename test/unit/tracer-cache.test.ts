/**
 * The library keeps its tracer between spans, but only while the same provider is registered:
 * a provider registered later (or a replacement after `disable()`) must get the next span.
 */
import { ROOT_CONTEXT, context, propagation, trace } from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { afterEach, describe, expect, it } from "vitest";
import { startPublishSpan, tracingActive } from "../../src/observability/tracing.js";

afterEach(() => {
  trace.disable();
  context.disable();
  propagation.disable();
});

function provider(): { exporter: InMemorySpanExporter; provider: BasicTracerProvider } {
  const exporter = new InMemorySpanExporter();
  return { exporter, provider: new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }) };
}

const publishSpan = () => startPublishSpan(ROOT_CONTEXT, { exchange: "x", routingKey: "k", bodySize: 1 });

describe("the library's tracer", () => {
  it("follows the registered provider: none, then a first one, then its replacement", () => {
    const before = publishSpan();
    expect(before.isRecording()).toBe(false);
    before.end();

    const first = provider();
    trace.setGlobalTracerProvider(first.provider);
    publishSpan().end();
    publishSpan().end();
    expect(first.exporter.getFinishedSpans().map((s) => s.name)).toEqual(["publish x", "publish x"]);

    trace.disable();
    const second = provider();
    trace.setGlobalTracerProvider(second.provider);
    publishSpan().end();
    expect(second.exporter.getFinishedSpans()).toHaveLength(1);
    expect(first.exporter.getFinishedSpans()).toHaveLength(2);

    trace.disable();
    const after = publishSpan();
    expect(after.isRecording()).toBe(false);
    after.end();
    expect(second.exporter.getFinishedSpans()).toHaveLength(1);
  });
});

describe("whether spans can come to anything (per-row and per-message work skips them when not)", () => {
  it("no while neither a provider nor a propagator is registered, yes with either, asked anew each time", () => {
    expect(tracingActive()).toBeUndefined();
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    // A propagator alone passes a producer's context on: not skipped.
    expect(tracingActive()).toBeDefined();
    propagation.disable();
    expect(tracingActive()).toBeUndefined();
    trace.setGlobalTracerProvider(provider().provider);
    expect(tracingActive()).toBeDefined();
    trace.disable();
    expect(tracingActive()).toBeUndefined();
  });
});
