import { describe, expect, it } from "vitest";
import { readLedgerSettings } from "../../examples/ledger/settings.js";

describe("LEDGER_OUTBOX_SENT_RETENTION_MS", () => {
  it("defaults to 0 (each sent row deleted once confirmed) and takes a whole number of milliseconds", () => {
    expect(readLedgerSettings({}).outboxSentRetentionMs).toBe(0);
    expect(readLedgerSettings({ LEDGER_OUTBOX_SENT_RETENTION_MS: "" }).outboxSentRetentionMs).toBe(0);
    expect(readLedgerSettings({ LEDGER_OUTBOX_SENT_RETENTION_MS: "86400000" }).outboxSentRetentionMs).toBe(86_400_000);
  });

  it.each(["-1", "1.5", "a day", "1e400"])("refuses %j, naming the variable", (text) => {
    expect(() => readLedgerSettings({ LEDGER_OUTBOX_SENT_RETENTION_MS: text }))
      .toThrow(`LEDGER_OUTBOX_SENT_RETENTION_MS must be a whole number of milliseconds (0 or more), got ${JSON.stringify(text)}`);
  });
});
