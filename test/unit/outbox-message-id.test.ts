import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { outboxMessageId } from "../../src/index.js";

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");
const source = { tenant: "t1", handler: "ledger", eventId: "e-1" };

describe("outboxMessageId", () => {
  it("hashes (tenant, handler, event id, position): the ids already written keep their value", () => {
    expect(outboxMessageId(source, 0)).toBe(sha256('["rabbit-inbox/outbox/v1","t1","ledger","e-1",0]'));
    expect(outboxMessageId(source, 1)).not.toBe(outboxMessageId(source, 0));
  });

  it("a version that replaced an applied one (accept-new) gets ids of its own, stable for that version", () => {
    const v2 = outboxMessageId({ ...source, version: "f".repeat(64) }, 0);
    expect(v2).toBe(sha256(`["rabbit-inbox/outbox/v1","t1","ledger","e-1",0,"${"f".repeat(64)}"]`));
    expect(v2).not.toBe(outboxMessageId(source, 0));
    expect(outboxMessageId({ ...source, version: "e".repeat(64) }, 0)).not.toBe(v2);
  });

  it("refuses a position that is not a non-negative integer", () => {
    expect(() => outboxMessageId(source, -1)).toThrow(RangeError);
    expect(() => outboxMessageId(source, 1.5)).toThrow(RangeError);
  });
});
