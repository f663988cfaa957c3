/**
 * The quick `traceparent` read against the W3C propagator it stands in for: wherever it answers,
 * its span context is the one the propagator extracts, and it leaves to the propagator what only
 * the propagator may read (other fields, other versions, malformed values).
 */
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { ROOT_CONTEXT, trace } from "@opentelemetry/api";
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from "@opentelemetry/core";
import { quickTraceparent } from "../../src/observability/traceparent.js";
import { amqpHeaderGetter } from "../../src/observability/tracing.js";

const w3c = new W3CTraceContextPropagator();
const W3C_FIELDS = w3c.fields();
/** What the propagator extracts through the library's header getter (a Buffer read as UTF-8). */
const byPropagator = (headers: Record<string, unknown>) => trace.getSpanContext(w3c.extract(ROOT_CONTEXT, headers, amqpHeaderGetter));

const VALID = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

const hex = (length: number) => fc.string({ unit: fc.constantFrom(..."0123456789abcdefABCDEFg-"), minLength: length, maxLength: length });
/** Mostly well-formed values with one part varied, so that both answers are common. */
const traceparents = fc.oneof(
  fc.tuple(fc.constantFrom("00", "01", "ff", "0g", "0"), hex(32), hex(16), fc.constantFrom("00", "01", "ff", "0A", "1"), fc.constantFrom("", "-x", " "))
    .map(([v, t, s, f, rest]) => `${v}-${t}-${s}-${f}${rest}`),
  fc.tuple(fc.nat(54), fc.constantFrom("-", "A", "z", " ", "0", "é")).map(([at, c]) => VALID.slice(0, at) + c + VALID.slice(at + 1)),
  fc.string({ maxLength: 60 }),
);

describe("quickTraceparent", () => {
  it("answers as the W3C propagator does wherever it answers", () => {
    let answered = 0;
    fc.assert(fc.property(traceparents, fc.boolean(), (value, asBuffer) => {
      const headers = { traceparent: asBuffer ? Buffer.from(value, "utf8") : value };
      const quick = quickTraceparent(headers, W3C_FIELDS);
      if (quick === undefined) return;
      answered++;
      expect(quick).toEqual(byPropagator(headers));
    }), { numRuns: 3000 });
    expect(answered).toBeGreaterThan(100);
  });

  it("reads the plain version-00 form, sampled or not, from a string or a Buffer", () => {
    expect(quickTraceparent({ traceparent: VALID }, W3C_FIELDS)).toEqual({
      traceId: "4bf92f3577b34da6a3ce929d0e0e4736", spanId: "00f067aa0ba902b7", traceFlags: 1, isRemote: true,
    });
    const unsampled = VALID.replace(/01$/, "00");
    expect(quickTraceparent({ traceparent: Buffer.from(unsampled) }, W3C_FIELDS)?.traceFlags).toBe(0);
  });

  it("leaves to the propagator a message that carries another of its fields, or a propagator that does not read traceparent", () => {
    expect(quickTraceparent({ traceparent: VALID, tracestate: "vendor=1" }, W3C_FIELDS)).toBeUndefined();
    const withBaggage = new CompositePropagator({ propagators: [w3c, new W3CBaggagePropagator()] }).fields();
    expect(quickTraceparent({ traceparent: VALID }, withBaggage)).toBeDefined();
    expect(quickTraceparent({ traceparent: VALID, baggage: "user=1" }, withBaggage)).toBeUndefined();
    expect(quickTraceparent({ traceparent: VALID }, [])).toBeUndefined();
    expect(quickTraceparent({ traceparent: VALID }, ["b3"])).toBeUndefined();
  });

  it("leaves other versions, upper case and padded values to the propagator", () => {
    expect(quickTraceparent({ traceparent: `01${VALID.slice(2)}` }, W3C_FIELDS)).toBeUndefined();
    expect(quickTraceparent({ traceparent: VALID.toUpperCase() }, W3C_FIELDS)).toBeUndefined();
    expect(quickTraceparent({ traceparent: ` ${VALID}` }, W3C_FIELDS)).toBeUndefined();
    expect(quickTraceparent({ traceparent: 42 }, W3C_FIELDS)).toBeUndefined();
    expect(quickTraceparent({}, W3C_FIELDS)).toBeUndefined();
  });
});
