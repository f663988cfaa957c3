/**
 * Order through a delayed retry, with the ledger on PostgreSQL: an `account.opened` whose
 * transaction keeps failing (the database refusing it) goes to the delayed-retry queue; the
 * account's next `balance.adjusted` arrives before it comes back. Queue order is not kept for an
 * event that went through a delayed retry, so the ledger must heal: the adjustment waits in the
 * delayed retries too, and applies after the opening. The balance ends right, nothing quarantined.
 */
import { describe, expect, it } from "vitest";
import { accountOpened, balanceAdjusted } from "../../examples/ledger/driver/ledger-messages.js";
import { openLedgerDatabase } from "../../examples/ledger/ledger-database.js";
import type { EventKey } from "../../src/core/event.js";
import { InboxConsumer } from "../../src/index.js";
import { silentLogger } from "../../src/core/logger.js";
import { amqpUrl, waitFor } from "../support/broker.js";
import { useLedgerTest } from "../support/ledger-harness.js";

describe("ledger on PostgreSQL: an opening delayed by a transient failure, overtaken by its adjustment", () => {
  const t = useLedgerTest("postgres");

  it("the adjustment waits for the opening and applies after it: balance 100, no account_missing", async () => {
    const db = await openLedgerDatabase(t.databaseUrl, silentLogger);
    let databaseRefuses = true;
    const outcomes: string[] = [];
    const consumer = new InboxConsumer({
      url: amqpUrl, queue: t.queue, store: db.store, handler: db.handler, logger: silentLogger,
      retry: { maxAttempts: 2, baseDelayMs: 5 }, retryDelaysMs: [300, 1000, 3000],
      // While the database "refuses", every transaction holding the opening fails before COMMIT:
      // an unclassified error, retried in process, then sent to the delayed-retry queue.
      hook: (point, keys: ReadonlyArray<EventKey | null>) => {
        if (point === "before-commit" && databaseRefuses && keys.some((k) => k?.eventId === "e-open")) {
          throw new Error("connect ECONNREFUSED 127.0.0.1:5432 (simulated)");
        }
      },
      onOutcome: (o) => outcomes.push(`${o.kind} ${o.key?.eventId ?? "?"}`),
    });
    try {
      await consumer.start();
      await t.broker.publish(t.queue, [accountOpened("t1", "e-open", "a")]);
      await waitFor(() => outcomes.includes("delayed e-open"), 10_000, "the opening in the delayed-retry queue");
      // The database is back; the adjustment is published after the opening, and arrives first.
      databaseRefuses = false;
      await t.broker.publish(t.queue, [balanceAdjusted("t1", "e-credit", "a", 100)]);
      await waitFor(() => consumer.outcomeCounts.applied === 2, 15_000, "both events applied");
    } finally {
      await consumer.stop();
      await db.close();
    }

    // The adjustment overtook the opening, waited in a delayed retry, and applied after it.
    expect(outcomes.slice(0, 2)).toEqual(["delayed e-open", "delayed e-credit"]);
    expect(outcomes.filter((o) => o.startsWith("applied"))).toEqual(["applied e-open", "applied e-credit"]);
    expect(consumer.outcomeCounts).toMatchObject({ applied: 2, duplicate: 0, quarantined: 0, requeue: 0 });

    const [{ balances, quarantine }, tables] = await Promise.all([t.cli(), t.tables()]);
    expect(balances).toEqual([{ tenant: "t1", account_id: "a", balance_cents: 100 }]);
    expect(quarantine).toEqual([]);
    expect(tables.quarantine).toEqual([]);
    expect(tables.inbox.map((r) => r.event_id)).toEqual(["e-credit", "e-open"]);
    expect(await t.depth()).toBe(0);
    expect(await t.depth(t.quarantineQueue)).toBe(0);
  });
});
