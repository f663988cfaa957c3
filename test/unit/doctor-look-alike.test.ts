/**
 * doctor's look-alike check: held entries whose ids or error text hold characters that make them
 * look like others (a decomposed café, a bidi override, a zero-width space) are a warning that
 * shows them escaped; clean ones, text in other scripts included, are fine.
 */
import { describe, expect, it } from "vitest";
import { lookAlikeCheck } from "../../src/cli/commands/doctor.js";
import type { QuarantineCauseCount, QuarantineDetail } from "../../src/core/store-contract/quarantine-admin.js";

const entry = (id: number, tenant: string | null, eventId: string | null) => ({ id, tenant, eventId }) as QuarantineDetail;
const cause = (detail: string, entries = 1) => ({ handler: "ledger", reason: "account_missing", status: "held", detail, entries, firstSeen: new Date(), lastSeen: new Date() }) as QuarantineCauseCount;

describe("doctor: look-alike ids", () => {
  it("is fine with plain ids and text in any script, in NFC", () => {
    expect(lookAlikeCheck([entry(1, "t1", "e-1"), entry(2, "caf\u00e9", "नमस्ते"), entry(3, null, null)], [cause("account ü of tenant t1 was never opened")]))
      .toMatchObject({ status: "ok" });
  });

  it("warns about a decomposed id, naming the entry with the id escaped", () => {
    const check = lookAlikeCheck([entry(1, "t1", "e-1"), entry(7, "cafe\u0301", "e-2")], []);
    expect(check.status).toBe("warn");
    expect(check.detail).toContain("1 held entry has such ids, e.g. #7: tenant cafe\\u0301, event e-2");
    expect(check.fix).toMatch(/compared byte for byte/);
  });

  it("warns about error text naming a look-alike account, and counts its entries", () => {
    const check = lookAlikeCheck([], [cause("account a\u200bb of tenant t1 was never opened", 3), cause("plain", 2)]);
    expect(check.status).toBe("warn");
    expect(check.detail).toContain('3 held entries\' error text holds some, e.g. "account a\\u200bb of tenant t1 was never opened"');
  });

  it("warns about a bidi override in an event id", () => {
    expect(lookAlikeCheck([entry(3, "t1", "evt-\u202egnp.exe")], []).detail).toContain("event evt-\\u202egnp.exe");
  });
});
