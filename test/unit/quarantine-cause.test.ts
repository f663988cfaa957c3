import { describe, expect, it } from "vitest";
import { CAUSE_PREFIX_CHARS, groupKeyOf, groupKeyOfEntry, normaliseCause } from "../../src/quarantine/quarantine-cause.js";

describe("normaliseCause", () => {
  it("takes out what differs from one event to the next", () => {
    expect(normaliseCause("account b of tenant t1 was never opened (event e-17, attempt 3)"))
      .toBe("account b of tenant t<n> was never opened (event e-<n>, attempt <n>)");
    expect(normaliseCause('duplicate key value violates unique constraint "orders_pkey" (id 4711)'))
      .toBe('duplicate key value violates unique constraint "…" (id <n>)');
    expect(normaliseCause("order 3f2b8c1e-9d4a-4b7e-8f00-0123456789ab not found")).toBe("order <uuid> not found");
    expect(normaliseCause("fingerprint 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 differs")).toBe("fingerprint <hex> differs");
    expect(normaliseCause("timed out at 2026-11-30T06:46:57.120Z after 2.5 s")).toBe("timed out at <time> after <n> s");
    expect(normaliseCause("name 'alice' is taken; `bob` too")).toBe("name '…' is taken; `…` too");
    expect(normaliseCause("  many\n\tspaces   here ")).toBe("many spaces here");
  });

  it("leaves words alone: hex-looking words without a digit, short hex, plain text", () => {
    expect(normaliseCause("deadbeefcafe is a word here")).toBe("deadbeefcafe is a word here");
    expect(normaliseCause("handler refused the amount")).toBe("handler refused the amount");
    expect(normaliseCause("")).toBe("");
  });

  it("two events that failed alike give one cause; different failures do not", () => {
    const a = normaliseCause('account "acc-1" of tenant t1 was never opened (event e-17)');
    const b = normaliseCause('account "acc-99" of tenant t7 was never opened (event e-20931)');
    expect(a).toBe(b);
    expect(normaliseCause("amount 12 exceeds limit 10")).not.toBe(a);
  });

  it("reads only the first CAUSE_PREFIX_CHARS characters, counted as code points, and clips the result", () => {
    const head = "x".repeat(CAUSE_PREFIX_CHARS - 1);
    expect(normaliseCause(`${head}😀 tail one`)).toBe(normaliseCause(`${head}😀 tail two`));
    const long = normaliseCause("word ".repeat(400));
    expect(Array.from(long)).toHaveLength(300);
    expect(long.endsWith("…")).toBe(true);
  });
});

describe("group keys", () => {
  it("are short, stable and differ by handler, reason and cause", () => {
    const key = groupKeyOf("ledger", "account_missing", "account b of tenant t<n>");
    expect(key).toMatch(/^[0-9a-f]{16}$/);
    expect(groupKeyOf("ledger", "account_missing", "account b of tenant t<n>")).toBe(key);
    expect(groupKeyOf("billing", "account_missing", "account b of tenant t<n>")).not.toBe(key);
    expect(groupKeyOf("ledger", "invalid", "account b of tenant t<n>")).not.toBe(key);
    expect(groupKeyOf("ledger", "account_missing", "account c of tenant t<n>")).not.toBe(key);
    // No text can shift a separator: "a" + "b\0c" is not "a\0b" + "c".
    expect(groupKeyOf("a", "b\u0000c", "d")).not.toBe(groupKeyOf("a\u0000b", "c", "d"));
  });

  it("an entry's key is its handler, reason and normalised detail", () => {
    expect(groupKeyOfEntry({ handler: "h", reason: "r", detail: "failed on 12" })).toBe(groupKeyOf("h", "r", "failed on <n>"));
    expect(groupKeyOfEntry({ handler: "h", reason: "r", detail: "failed on 12" })).toBe(groupKeyOfEntry({ handler: "h", reason: "r", detail: "failed on 13" }));
  });
});
