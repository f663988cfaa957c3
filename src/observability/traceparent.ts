import type { SpanContext } from "@opentelemetry/api";

/**
 * The producer's span context of a message read straight from its W3C `traceparent` header,
 * without going through the registered propagator. Every delivery needs this much (is there an
 * upstream trace, and was it sampled?) while the propagator's regular expressions and the two
 * contexts it builds cost more than the rest of an unsampled message's tracing.
 *
 * It answers only when its answer is the one the propagator would give: the propagator must read
 * `traceparent`, the message must carry none of the propagator's other fields (`tracestate`,
 * `baggage`: only the propagator knows what to make of them), and the header must be the plain
 * version-00 form. Anything else (undefined) sends the caller to the propagator.
 */
export function quickTraceparent(headers: Record<string, unknown>, propagatorFields: readonly string[]): SpanContext | undefined {
  const raw = headers.traceparent;
  const value = typeof raw === "string" ? raw : Buffer.isBuffer(raw) ? raw.toString("latin1") : undefined;
  if (value === undefined || value.length !== 55 || !propagatorFields.includes("traceparent")) return undefined;
  for (const field of propagatorFields) {
    if (field !== "traceparent" && headers[field] !== undefined) return undefined;
  }
  if (value.charCodeAt(0) !== 48 || value.charCodeAt(1) !== 48 || value.charCodeAt(2) !== 45 || value.charCodeAt(35) !== 45 || value.charCodeAt(52) !== 45) {
    return undefined;
  }
  for (let i = 3; i < 55; i++) {
    if (i !== 35 && i !== 52 && !isLowerHex(value.charCodeAt(i))) return undefined;
  }
  return {
    traceId: value.slice(3, 35),
    spanId: value.slice(36, 52),
    traceFlags: parseInt(value.slice(53, 55), 16),
    isRemote: true,
  };
}

function isLowerHex(code: number): boolean {
  return (code >= 48 && code <= 57) || (code >= 97 && code <= 102);
}
