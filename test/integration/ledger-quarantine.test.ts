import { describe, expect, it } from "vitest";
import { headerText } from "../../examples/ledger/driver/broker-client.js";
import { accountOpened, balanceAdjusted } from "../../examples/ledger/driver/ledger-messages.js";
import { useLedgerTest } from "../support/ledger-harness.js";
import { TEST_DATABASES } from "../support/test-databases.js";

/** Permanent failures are quarantined (database row + confirmed queue copy), never applied. */
describe.each(TEST_DATABASES)("ledger quarantine on %s", (kind) => {
  const t = useLedgerTest(kind);

  it("the same event_id with another payload is a conflict, kept with both fingerprints, not applied", async () => {
    const ledger = await t.start();
    await t.broker.publish(t.queue, [accountOpened("t1", "e-open", "a")]);
    await ledger.waitForSettled(1);
    await t.broker.publish(t.queue, [balanceAdjusted("t1", "e-2", "a", 100)]);
    await ledger.waitForSettled(2);
    const conflicting = balanceAdjusted("t1", "e-2", "a", 500);
    await t.broker.publish(t.queue, [conflicting]);
    await ledger.waitForSettled(3);
    expect(await t.stopWhenIdle([ledger])).toEqual([{ code: 0, signal: null }]);
    expect(ledger.stoppedCounts()).toEqual({ applied: 2, duplicate: 0, quarantined: 1, delayed: 0, requeue: 0 });

    const [{ balances, quarantine }, tables] = await Promise.all([t.cli(), t.tables()]);
    expect(balances).toEqual([{ tenant: "t1", account_id: "a", balance_cents: 100 }]);
    expect(quarantine).toEqual([{ id: expect.any(Number), tenant: "t1", event_id: "e-2", reason: "conflict" }]);

    // One dedup row, holding the first payload's fingerprint; the quarantine row has both.
    const inboxRow = tables.inbox.find((r) => r.event_id === "e-2");
    expect(tables.inbox.map((r) => r.event_id)).toEqual(["e-2", "e-open"]);
    expect(tables.quarantine).toHaveLength(1);
    const row = tables.quarantine[0]!;
    expect(row).toMatchObject({ handler: "ledger", tenant: "t1", event_id: "e-2", reason: "conflict", occurrences: 1, queue: t.queue });
    expect(row.stored_fingerprint).toBe(inboxRow!.fingerprint);
    expect(row.fingerprint).toMatch(/^[0-9a-f]{64}$/);
    expect(row.stored_fingerprint).toMatch(/^[0-9a-f]{64}$/);
    expect(row.fingerprint).not.toBe(row.stored_fingerprint);
    expect(JSON.parse(row.body.toString("utf8"))).toEqual(conflicting);

    // Loud: an error-level log line names the event and both fingerprints.
    expect(ledger.logsAt("error")).toContainEqual(expect.objectContaining({
      msg: expect.stringContaining("conflict"), tenant: "t1", eventId: "e-2",
      fingerprint: row.fingerprint, storedFingerprint: row.stored_fingerprint,
    }));

    // The message itself went to <queue>.quarantine with its reason, before the original's ack.
    const held = await t.broker.takeAll(t.quarantineQueue);
    expect(held).toHaveLength(1);
    expect(JSON.parse(held[0]!.content.toString("utf8"))).toEqual(conflicting);
    expect(headerText(held[0]!, "x-rabbit-inbox-reason")).toBe("conflict");
    expect(headerText(held[0]!, "x-rabbit-inbox-event-id")).toBe("e-2");
    expect(headerText(held[0]!, "x-rabbit-inbox-fingerprint")).toBe(row.fingerprint);
    expect(headerText(held[0]!, "x-rabbit-inbox-stored-fingerprint")).toBe(row.stored_fingerprint);
    expect(await t.depth()).toBe(0);
  });

  it("a malformed message is quarantined as invalid at once, and an adjustment of a never-opened account as account_missing after the last delayed retry", async () => {
    const ledger = await t.start({ retryDelaysMs: [100, 200] });
    await t.broker.publish(t.queue, [accountOpened("t1", "e-open", "a")]);
    await ledger.waitForSettled(1);
    const brokenJson = '{"type":"balance.adjusted","tenant":"t1","event_id":"e-broken","account_id":"a","delta_cents":';
    const floatCents = balanceAdjusted("t1", "e-float", "a", 12.5);
    const missing = balanceAdjusted("t1", "e-missing", "nobody", 100);
    await t.broker.publish(t.queue, [brokenJson, floatCents, missing]);
    // The adjustment's account may still be on its way: it waits through both delays first.
    await ledger.waitForSettled(1 + 3 + 2);
    expect(await t.stopWhenIdle([ledger])).toEqual([{ code: 0, signal: null }]);
    expect(ledger.stoppedCounts()).toEqual({ applied: 1, duplicate: 0, quarantined: 3, delayed: 2, requeue: 0 });
    expect(ledger.logs.filter((r) => r.msg === "delayed retry scheduled").map((r) => [r.eventId, r.attempt])).toEqual([["e-missing", 1], ["e-missing", 2]]);

    const [{ balances, quarantine }, tables] = await Promise.all([t.cli(), t.tables()]);
    expect(balances).toEqual([{ tenant: "t1", account_id: "a", balance_cents: 0 }]);
    // The pipeline records an identity only for events that parse: the invalid ones carry none.
    expect(quarantine.map((q) => q.reason).sort()).toEqual(["account_missing", "invalid", "invalid"]);
    expect(quarantine).toContainEqual({ id: expect.any(Number), tenant: "t1", event_id: "e-missing", reason: "account_missing" });
    // Nothing applied: only the opening has a dedup row and no account "nobody" exists.
    expect(tables.inbox.map((r) => r.event_id)).toEqual(["e-open"]);
    expect(tables.accounts.map((r) => r.account_id)).toEqual(["a"]);
    expect(tables.quarantine.map((r) => [r.reason, r.body.toString("utf8")]).sort()).toEqual([
      ["account_missing", JSON.stringify(missing)],
      ["invalid", JSON.stringify(floatCents)],
      ["invalid", brokenJson],
    ].sort());
    expect(tables.quarantine.find((r) => r.reason === "account_missing")!.detail).toBe(
      "account nobody of tenant t1 was never opened (still refused with no delayed retry left)",
    );

    const held = await t.broker.takeAll(t.quarantineQueue);
    expect(held.map((m) => [m.content.toString("utf8"), headerText(m, "x-rabbit-inbox-reason")]).sort()).toEqual([
      [brokenJson, "invalid"],
      [JSON.stringify(floatCents), "invalid"],
      [JSON.stringify(missing), "account_missing"],
    ].sort());
    expect(held.filter((m) => headerText(m, "x-rabbit-inbox-reason") === "account_missing").map((m) => headerText(m, "x-rabbit-inbox-retry"))).toEqual(["2"]);
    expect(await t.depth()).toBe(0);
  });
});
