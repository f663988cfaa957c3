/**
 * Several ledger processes consuming the same (unpartitioned) queue. The broker hands an
 * account's opening to one replica and its adjustments to the others, so an adjustment often
 * reaches the database before its account's opening has committed. Such an adjustment cannot
 * apply yet: it waits in the delayed-retry queues and applies once the opening committed. Every
 * balance ends exact and nothing is quarantined as `account_missing`.
 */
import { describe, expect, it } from "vitest";
import { type LedgerMessage, accountOpened, balanceAdjusted } from "../../examples/ledger/driver/ledger-messages.js";
import type { LedgerProcess, SettledCounts } from "../../examples/ledger/driver/ledger-process.js";
import { waitUntil } from "../../examples/ledger/driver/wait-until.js";
import { useLedgerTest } from "../support/ledger-harness.js";

const ACCOUNTS = 300;
const ADJUSTMENTS_PER_ACCOUNT = 5;
const REPLICAS = 3;
/**
 * Short delays keep the test fast (an adjustment waits only as long as its opening needs); the
 * last one leaves an opening time to commit even on a loaded machine, where a replica may hold
 * it in its prefetched deliveries for seconds behind earlier batches.
 */
const RETRY_DELAYS_MS = [200, 1000, 5000, 20_000];
/** Alone on 2 cores the two tests take 5-7 s each; the margins are for a machine shared with other work. */
const TEST_TIMEOUT_MS = 150_000;

const accountId = (a: number) => `acc-${a}`;
const deltaOf = (a: number, j: number) => 100 * (j + 1) + (a % 37);

/** Account `a`'s opening, then its adjustments. */
function accountEvents(a: number): { opening: LedgerMessage; adjustments: LedgerMessage[] } {
  return {
    opening: accountOpened("t1", `open-${a}`, accountId(a)),
    adjustments: Array.from({ length: ADJUSTMENTS_PER_ACCOUNT }, (_, j) => balanceAdjusted("t1", `adj-${a}-${j}`, accountId(a), deltaOf(a, j))),
  };
}

/** Each opening published just before its own adjustments. */
function openingThenAdjustments(): LedgerMessage[] {
  return Array.from({ length: ACCOUNTS }, (_, a) => accountEvents(a)).flatMap(({ opening, adjustments }) => [opening, ...adjustments]);
}

/** The openings of a block of accounts, then all their adjustments, block after block. */
function inBlocks(blockSize: number): LedgerMessage[] {
  const messages: LedgerMessage[] = [];
  for (let start = 0; start < ACCOUNTS; start += blockSize) {
    const block = Array.from({ length: Math.min(blockSize, ACCOUNTS - start) }, (_, i) => accountEvents(start + i));
    messages.push(...block.map((b) => b.opening), ...block.flatMap((b) => b.adjustments));
  }
  return messages;
}

const sumCounts = (processes: readonly LedgerProcess[], pick: (c: SettledCounts) => number) => processes.reduce((sum, p) => sum + pick(p.settledCounts()), 0);

describe("three ledger replicas on one PostgreSQL database and one queue", () => {
  const t = useLedgerTest("postgres");

  async function runReplicas(messages: readonly LedgerMessage[]): Promise<void> {
    const replicas = await Promise.all(Array.from({ length: REPLICAS }, (_, i) => t.start({ label: `replica ${i + 1}`, retryDelaysMs: RETRY_DELAYS_MS })));
    await t.broker.publish(t.queue, messages);

    // Done when every message has reached a final outcome (a delayed one counts when it comes back).
    const final = () => sumCounts(replicas, (c) => c.applied + c.duplicate + c.quarantined);
    await waitUntil(() => (final() >= messages.length ? true : undefined), `${messages.length} final outcomes`, { watch: replicas, timeoutMs: 100_000 });
    expect(await t.stopWhenIdle(replicas, 100_000)).toEqual(replicas.map(() => ({ code: 0, signal: null })));

    const counts = replicas.map((p) => p.stoppedCounts()!);
    const total = (k: keyof SettledCounts) => counts.reduce((sum, c) => sum + c[k], 0);
    const delayed = total("delayed");
    // Visible in the test output: how many adjustments raced ahead of their account's opening.
    console.log(`replicas: ${messages.length} messages, ${delayed} delayed retries, ${total("applied")} applied, ${total("quarantined")} quarantined`);
    expect(counts.every((c) => c.applied > 0)).toBe(true); // all three replicas really took part
    expect(delayed).toBeGreaterThan(0); // adjustments really raced ahead of their openings
    expect({ applied: total("applied"), duplicate: total("duplicate"), quarantined: total("quarantined"), requeue: total("requeue") })
      .toEqual({ applied: messages.length, duplicate: 0, quarantined: 0, requeue: 0 });

    const [cli, tables] = await Promise.all([t.cli(), t.tables()]);
    const { quarantine } = cli;
    const balances = [...cli.balances].sort((x, y) => (x.account_id < y.account_id ? -1 : x.account_id > y.account_id ? 1 : 0));
    const expected = Array.from({ length: ACCOUNTS }, (_, a) => ({
      tenant: "t1", account_id: accountId(a),
      balance_cents: Array.from({ length: ADJUSTMENTS_PER_ACCOUNT }, (_, j) => deltaOf(a, j)).reduce((x, y) => x + y, 0),
    })).sort((x, y) => (x.account_id < y.account_id ? -1 : x.account_id > y.account_id ? 1 : 0));
    const sum = (rows: ReadonlyArray<{ balance_cents: number }>) => rows.reduce((s, r) => s + r.balance_cents, 0);
    expect(sum(balances)).toBe(sum(expected));
    expect(balances).toEqual(expected);
    expect(tables.accounts).toEqual(expected);
    expect(quarantine.filter((q) => q.reason === "account_missing")).toEqual([]);
    expect(quarantine).toEqual([]);
    expect(tables.quarantine).toEqual([]);
    expect(tables.inbox).toHaveLength(messages.length);

    expect(await t.depth()).toBe(0);
    expect(await t.depth(t.quarantineQueue)).toBe(0);
    for (let n = 1; n <= RETRY_DELAYS_MS.length; n++) expect(await t.depth(`${t.queue}.retry.${n}`)).toBe(0);
  }

  it(`${ACCOUNTS} accounts, each opening published just before its ${ADJUSTMENTS_PER_ACCOUNT} adjustments: exact balances, no account_missing`, async () => {
    await runReplicas(openingThenAdjustments());
  }, TEST_TIMEOUT_MS);

  it(`${ACCOUNTS} accounts published in blocks of 50 (the openings, then their adjustments): exact balances, no account_missing`, async () => {
    await runReplicas(inBlocks(50));
  }, TEST_TIMEOUT_MS);
});
