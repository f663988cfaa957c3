import { describe, expect, it } from "vitest";
import { FilterTextError, filterFromText, timeOf } from "../../src/quarantine/filter-text.js";

const now = new Date("2026-12-01T12:00:00.000Z");

function refused(fn: () => unknown): FilterTextError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(FilterTextError);
    return error as FilterTextError;
  }
  throw new Error("expected a FilterTextError");
}

describe("a quarantine filter typed by an operator", () => {
  it("maps every field to the library's filter, trimmed", () => {
    const fp = "a".repeat(64);
    expect(filterFromText({
      handler: " ledger ", reason: "account_missing", tenant: "t1", fingerprint: fp, group: "0123456789abcdef", text: "never opened",
      since: "2026-11-30T06:00:00Z", until: "1h",
    }, now)).toEqual({
      handler: "ledger", reason: "account_missing", tenant: "t1", fingerprint: fp, group: "0123456789abcdef", text: "never opened",
      since: new Date("2026-11-30T06:00:00Z"), until: new Date("2026-12-01T11:00:00.000Z"),
    });
    expect(filterFromText({}, now)).toStrictEqual({});
    expect(filterFromText({ since: "1h" }, now)).toStrictEqual({ since: new Date("2026-12-01T11:00:00.000Z") });
    expect(filterFromText({ until: "2026-12-31" }, now)).toStrictEqual({ until: new Date("2026-12-31T00:00:00.000Z") });
  });

  it("reads times as ISO (UTC when no zone is given, whatever the machine's zone) or as a duration ago", () => {
    const zone = process.env.TZ;
    process.env.TZ = "America/New_York";
    try {
      expect(timeOf("2026-11-30", now)).toEqual(new Date("2026-11-30T00:00:00.000Z"));
      expect(timeOf("2026-11-30T06:30", now)).toEqual(new Date("2026-11-30T06:30:00.000Z"));
      expect(timeOf("2026-11-30 06:30:15.5", now)).toEqual(new Date("2026-11-30T06:30:15.500Z"));
      expect(timeOf("2026-11-30T06:30:00+02:00", now)).toEqual(new Date("2026-11-30T04:30:00.000Z"));
      expect(timeOf("2026-11-30T06:30+0200", now)).toEqual(new Date("2026-11-30T04:30:00.000Z"));
      expect(timeOf("2026-11-30T06:30:15.25Z", now)).toEqual(new Date("2026-11-30T06:30:15.250Z"));
    } finally {
      if (zone === undefined) delete process.env.TZ;
      else process.env.TZ = zone;
    }
    expect(timeOf("1.25h", now)).toEqual(new Date("2026-12-01T10:45:00.000Z"));
    expect(timeOf("90m", now)).toEqual(new Date("2026-12-01T10:30:00.000Z"));
    expect(timeOf("2028-02-29", now)).toEqual(new Date("2028-02-29T00:00:00.000Z"));
    expect(timeOf("1d12h", now)).toEqual(new Date("2026-11-30T00:00:00.000Z"));
    // What Date alone would read leniently is refused.
    for (const bad of ["yesterday", "14", "2026-11-31T99:00", "2026-02-30", "2026-11-31", "2026-13-01", "2026-00-10", "2026-11-00T10:00Z", "12026-11-30", "2026-11-30junk", "2hours", "Dec 1, 2026", "2026", "1x", "h"]) expect(timeOf(bad, now), bad).toBeUndefined();
  });

  it("refuses what it cannot mean, naming the field as the caller names it", () => {
    const flag = (field: string) => `--${field}`;
    expect(refused(() => filterFromText({ since: "yesterday" }, now, flag)).message).toMatch(/^--since takes an ISO time .* or a duration ago .* got "yesterday"$/);
    expect(refused(() => filterFromText({ until: "yesterday" }, now)).message).toMatch(/^until takes an ISO time/);
    const order = refused(() => filterFromText({ since: "1h", until: "2h" }, now, flag));
    expect(order.field).toBe("since");
    expect(order.message).toBe("--since (2026-12-01T11:00:00.000Z) must be before --until (2026-12-01T10:00:00.000Z)");
    expect(refused(() => filterFromText({ since: "1h", until: "1h" }, now)).message).toMatch(/^since .* must be before until/);
    expect(refused(() => filterFromText({ group: "XYZ" }, now)).message).toMatch(/^group must be a group key \(16 characters 0-9a-f/);
    expect(refused(() => filterFromText({ group: "0123456789ABCDEF" }, now)).field).toBe("group");
    for (const group of ["x0123456789abcdef", "0123456789abcdefx"]) expect(refused(() => filterFromText({ group }, now)).field).toBe("group");
    for (const fingerprint of [`x${"a".repeat(64)}`, `${"a".repeat(64)}x`]) expect(refused(() => filterFromText({ fingerprint }, now)).field).toBe("fingerprint");
    expect(refused(() => filterFromText({ group: "?" }, now)).name).toBe("FilterTextError");
    // A time no database can compare with is the operator's mistake, refused before any query.
    const far = refused(() => filterFromText({ since: "99999999d" }, now, flag));
    expect(far.field).toBe("since");
    expect(far.message).toBe('--since "99999999d" is out of range: times run from 0001-01-01 to 9999-12-31 (UTC)');
    expect(refused(() => filterFromText({ until: "3000000d" }, now)).message).toMatch(/^until "3000000d" is out of range/);
    expect(refused(() => filterFromText({ since: "0000-12-31T23:59Z" }, now)).field).toBe("since");
    expect(refused(() => filterFromText({ until: "9999-12-31T23:00-02:00" }, now)).field).toBe("until");
    expect(filterFromText({ since: "0001-01-01", until: "9999-12-31T23:59:59.999Z" }, now)).toEqual({
      since: new Date("0001-01-01T00:00:00.000Z"), until: new Date("9999-12-31T23:59:59.999Z"),
    });
    expect(refused(() => filterFromText({ fingerprint: "a".repeat(63) }, now)).message).toMatch(/^fingerprint must be a SHA-256/);
    for (const field of ["handler", "reason", "tenant", "text", "since"] as const) {
      const error = refused(() => filterFromText({ [field]: "  " }, now, flag));
      expect(error.field).toBe(field);
      expect(error.message).toBe(`--${field} needs a value`);
    }
  });
});
