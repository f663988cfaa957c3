/**
 * The retention settings an operator types, and the event time the stale fence reads: pure
 * functions, checked here next to the retention tests that rely on them.
 */
import { describe, expect, it } from "vitest";
import type { DeliveryInfo } from "../../src/core/handler.js";
import { MINIMUM_REPLAY_WINDOW_MS, checkReplayWindow, resolveReplayWindow } from "../../src/retention/replay-window.js";
import { RetentionGuardError, formatDuration, parseDuration } from "../../src/operations.js";
import { eventTimeOf } from "../../src/core/event-time.js";
import { InvalidEventError } from "../../src/core/errors.js";

const delivery = (timestamp?: Date): DeliveryInfo => ({ queue: "q", redelivered: false, deliveryCount: undefined, messageId: undefined, timestamp, headers: {} });

describe("durations", () => {
  it.each([
    ["0s", 0], ["500ms", 500], ["90m", 5_400_000], ["36h", 129_600_000], ["14d", 1_209_600_000], ["2w", 1_209_600_000], ["1d12h", 129_600_000], ["1.5h", 5_400_000],
  ])("%s is %d ms", (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each(["14", "", "d", "7 days", "1x", "-1d", "1d 2h", "P14D"])("refuses %j: a unit is required, nothing else", (text) => {
    expect(() => parseDuration(text)).toThrow(/is not a duration/);
  });

  it("formats back to the largest units", () => {
    expect([0, 1_209_600_000, 5_400_000, 1500, 86_400_000 + 1].map(formatDuration)).toEqual(["0s", "14d", "1h30m", "1s500ms", "1d1ms"]);
  });
});

describe("the replay window", () => {
  it("has no default: the first source that sets it wins, none is an error naming them all", () => {
    expect(resolveReplayWindow([{ source: "--older-than", value: undefined }, { source: "ENV", value: "14d" }])).toEqual({ ms: 1_209_600_000, source: "ENV" });
    expect(resolveReplayWindow([{ source: "--older-than", value: "2d" }, { source: "ENV", value: "14d" }]).source).toBe("--older-than");
    expect(() => resolveReplayWindow([{ source: "--older-than", value: "" }, { source: "ENV", value: "  " }])).toThrow(/pass --older-than or set ENV/);
  });

  it("refuses less than the minimum unless forced", () => {
    expect(MINIMUM_REPLAY_WINDOW_MS).toBe(86_400_000);
    expect(() => checkReplayWindow(MINIMUM_REPLAY_WINDOW_MS - 1)).toThrow(RetentionGuardError);
    expect(() => checkReplayWindow(MINIMUM_REPLAY_WINDOW_MS)).not.toThrow();
    expect(() => checkReplayWindow(0, { force: true })).not.toThrow();
    expect(() => checkReplayWindow(-1, { force: true })).toThrow(RetentionGuardError);
  });
});

describe("event time for the stale fence", () => {
  const at = new Date("2026-01-02T03:04:05Z");

  it("is the AMQP timestamp when set, even when the body has the field", () => {
    expect(eventTimeOf(delivery(at), { occurred_at: "2020-01-01T00:00:00Z" }, { eventTimeField: "occurred_at" })).toEqual(at);
  });

  it("else the configured body field (ISO-8601 with a zone, or epoch ms), else none", () => {
    expect(eventTimeOf(delivery(), { occurred_at: "2026-01-02T03:04:05.250+02:00" }, { eventTimeField: "occurred_at" })).toEqual(new Date("2026-01-02T01:04:05.250Z"));
    expect(eventTimeOf(delivery(), { occurred_at: at.getTime() }, { eventTimeField: "occurred_at" })).toEqual(at);
    expect(eventTimeOf(delivery(), { occurred_at: null }, { eventTimeField: "occurred_at" })).toBeUndefined();
    expect(eventTimeOf(delivery(), { occurred_at: at.getTime() }, undefined)).toBeUndefined();
    expect(eventTimeOf(delivery(), {}, { eventTimeField: "occurred_at" })).toBeUndefined();
  });

  it("an unreadable body time is an invalid event, not a guess", () => {
    for (const bad of ["2026-01-02", "2026-01-02T03:04:05", "yesterday", at.getTime() / 1000, true, {}]) {
      expect(() => eventTimeOf(delivery(), { occurred_at: bad }, { eventTimeField: "occurred_at" })).toThrow(InvalidEventError);
    }
  });

  it("subtracts the clock-skew tolerance", () => {
    expect(eventTimeOf(delivery(at), {}, { clockSkewToleranceMs: 30_000 })).toEqual(new Date(at.getTime() - 30_000));
  });
});
