import { describe, expect, it } from "vitest";
import { accountOpened, balanceAdjusted } from "../../examples/ledger/driver/ledger-messages.js";
import { useLedgerTest } from "../support/ledger-harness.js";
import { TEST_DATABASES } from "../support/test-databases.js";

/**
 * The failure windows with a real broker and real process deaths: the ledger commits an adjustment, then dies
 * at a fault point; a fresh process gets the redelivery and the dedup record decides.
 * The account is opened (and settled) first, so the fault, armed on the 2nd delivery reaching
 * its point (`:2`), always hits the +100 adjustment. Publishing both at once would let a
 * PostgreSQL consumer (two transactions in flight) run the adjustment before the opening.
 */
describe.each(TEST_DATABASES)("ledger failure windows on %s", (kind) => {
  const t = useLedgerTest(kind);
  const open = accountOpened("t1", "e-open", "a");
  const credit = balanceAdjusted("t1", "e-credit", "a", 100);

  /** Starts the faulty process and feeds it the opening, then the adjustment. */
  async function startFaulty(fault: string) {
    const p = await t.start({ fault });
    await t.broker.publish(t.queue, [open]);
    await p.waitForSettled(1);
    await t.broker.publish(t.queue, [credit]);
    return p;
  }

  /** What every scenario must end with: applied once, nothing quarantined, nothing left. */
  async function expectAppliedOnce(): Promise<void> {
    const [{ balances, quarantine }, tables] = await Promise.all([t.cli(), t.tables()]);
    expect(balances).toEqual([{ tenant: "t1", account_id: "a", balance_cents: 100 }]);
    expect(quarantine).toEqual([]);
    expect(tables.inbox.map((r) => [r.tenant, r.handler, r.event_id])).toEqual([["t1", "ledger", "e-credit"], ["t1", "ledger", "e-open"]]);
    expect(tables.quarantine).toEqual([]);
    expect(await t.depth()).toBe(0);
    expect(await t.depth(t.quarantineQueue)).toBe(0);
  }

  for (const action of ["pause", "crash"] as const) {
    it(`after-commit:${action}: committed, killed before the ack, redelivered, not applied again`, async () => {
      const first = await startFaulty(`after-commit:${action}:2`);
      if (action === "pause") {
        expect(await first.waitForPause()).toEqual({ point: "after-commit", eventId: "e-credit" });
        expect(await first.kill("SIGKILL")).toEqual({ code: null, signal: "SIGKILL" });
      } else {
        expect(await first.waitForExit()).toEqual({ code: 70, signal: null });
      }

      // The commit is durable and the ack never happened: the broker holds the delivery again.
      const between = await t.tables();
      expect(between.accounts).toEqual([{ tenant: "t1", account_id: "a", balance_cents: 100 }]);
      expect(between.inbox.filter((r) => r.event_id === "e-credit")).toHaveLength(1);
      expect(await t.depth()).toBe(1);

      const second = await t.start();
      await second.waitForSettled(1);
      expect(await t.stopWhenIdle([second])).toEqual([{ code: 0, signal: null }]);

      expect(second.redeliveries()).toEqual([{ tenant: "t1", eventId: "e-credit", outcome: "duplicate" }]);
      expect(second.stoppedCounts()).toEqual({ applied: 0, duplicate: 1, quarantined: 0, delayed: 0, requeue: 0 });
      await expectAppliedOnce();
    });
  }

  it("before-commit:crash: nothing of the batch commits; the restart applies it once", async () => {
    const first = await startFaulty("before-commit:crash:2");
    expect(await first.waitForExit()).toEqual({ code: 70, signal: null });

    // A failure before commit: the dedup record and the business update rolled back together.
    const between = await t.tables();
    expect(between.inbox.filter((r) => r.event_id === "e-credit")).toEqual([]);
    expect(between.accounts).toEqual([{ tenant: "t1", account_id: "a", balance_cents: 0 }]);
    expect(await t.depth()).toBe(1);

    const second = await t.start();
    await second.waitForSettled(1);
    expect(await t.stopWhenIdle([second])).toEqual([{ code: 0, signal: null }]);
    expect(second.redeliveries()).toEqual([{ tenant: "t1", eventId: "e-credit", outcome: "applied" }]);
    expect(second.stoppedCounts()).toEqual({ applied: 1, duplicate: 0, quarantined: 0, delayed: 0, requeue: 0 });
    await expectAppliedOnce();
  });

  it("after-ack:crash: acked work stays done; a restart applies nothing twice", async () => {
    const first = await startFaulty("after-ack:crash:2");
    expect(await first.waitForExit()).toEqual({ code: 70, signal: null });
    expect((await t.tables()).accounts).toEqual([{ tenant: "t1", account_id: "a", balance_cents: 100 }]);

    // The ack may or may not have left the socket before the exit; either way nothing applies again.
    const second = await t.start();
    expect(await t.stopWhenIdle([second])).toEqual([{ code: 0, signal: null }]);
    expect(second.redeliveries().filter((r) => r.outcome !== "duplicate")).toEqual([]);
    expect(second.stoppedCounts()).toMatchObject({ applied: 0, quarantined: 0, delayed: 0, requeue: 0 });
    await expectAppliedOnce();
  });
});
