import { expect } from "vitest";
import { BrokerClient } from "../../examples/ledger/driver/broker-client.js";
import { cliBalances, cliQuarantine } from "../../examples/ledger/driver/ledger-cli.js";
import type { LedgerMessage } from "../../examples/ledger/driver/ledger-messages.js";
import { LedgerProcess, killAllLedgerProcesses } from "../../examples/ledger/driver/ledger-process.js";
import { readLedgerTables } from "../../examples/ledger/driver/ledger-tables.js";
import { ledgerExchangeNames, ledgerQueueNames, partitionExchangeNames, randomQueueName } from "../../examples/ledger/driver/ledger-topology.js";
import { waitUntil } from "../../examples/ledger/driver/wait-until.js";
import { ExchangeTap, type TappedMessage } from "./outbox.js";
import { STORY_BALANCE, STORY_DELTAS } from "./partitioned-ledger.js";

export const HA_PARTITIONS = 6;

/**
 * Three partitioned ledger replicas on a database that fails over, and what a failover test
 * checks afterwards. `databaseUrl(i)` is replica i's DATABASE_URL (a host list; Galera replicas
 * list their own node first); `readUrl()` a single node to read the tables from once it is over.
 */
export class HaLedgerRun {
  readonly queue = randomQueueName("ledger.ha");
  replicas: LedgerProcess[] = [];
  private publisher!: BrokerClient;
  tap!: ExchangeTap;

  /** `batchSize`: LEDGER_BATCH_SIZE of the replicas (default the ledger's). */
  constructor(private readonly databaseUrl: (replica: number) => string, private readonly options: { batchSize?: number } = {}) {}

  async start(): Promise<void> {
    this.publisher = await BrokerClient.connect();
    this.tap = await ExchangeTap.open(`${this.queue}.balance-changed`);
    for (let i = 1; i <= 3; i++) {
      this.replicas.push(await LedgerProcess.start({
        queue: this.queue, databaseUrl: this.databaseUrl(i), partitions: HA_PARTITIONS, label: `replica ${i}`, logLevel: "info",
        ...(this.options.batchSize ? { batchSize: this.options.batchSize } : {}),
      }));
    }
  }

  /** Publishes to the partition exchange in 30 chunks, 100 ms apart; `onFraction` runs once that share went out. */
  async publishStream(messages: readonly LedgerMessage[], at: number, onFraction: () => Promise<void>): Promise<void> {
    const chunk = Math.ceil(messages.length / 30);
    let fired = false;
    for (let i = 0; i < messages.length; i += chunk) {
      await this.publisher.publishRouted(this.queue, messages.slice(i, i + chunk));
      if (!fired && i + chunk >= messages.length * at) {
        fired = true;
        await onFraction();
      }
      await new Promise((done) => setTimeout(done, 100));
    }
  }

  /** Sends the same messages straight to partition queues (a producer that published twice, through another route). */
  async publishToPartition(partition: number, messages: readonly LedgerMessage[]): Promise<void> {
    await this.publisher.publish(`${this.queue}.p${partition}`, messages);
  }

  /** Waits until every adjustment's balance.changed arrived, then stops the replicas (each drains and exits 0). */
  async finish(adjustments: number, timeoutMs = 180_000): Promise<void> {
    await waitUntil(() => (new Set(this.tap.messages.map((m) => m.messageId)).size >= adjustments ? true : undefined),
      `${adjustments} distinct balance.changed (${new Set(this.tap.messages.map((m) => m.messageId)).size} so far)`, { timeoutMs, intervalMs: 500, watch: this.replicas });
    expect((await Promise.all(this.replicas.map((r) => r.stop()))).map((s) => s.code)).toEqual([0, 0, 0]);
  }

  /**
   * The longest time between two balance.changed in the stream from `since` on: how long the
   * database's failover stopped the ledger (the stream never pauses by itself for so long).
   */
  gapAfter(since: number): number {
    const times = this.tap.messages.map((m) => m.receivedAt).filter((t) => t >= since - 2000).sort((a, b) => a - b);
    let gap = 0;
    for (let i = 1; i < times.length; i++) gap = Math.max(gap, times[i]! - times[i - 1]!);
    return gap;
  }

  /**
   * Balances exact, nothing quarantined, one dedup row per event, every balance.changed at
   * least once with one stable message id, and each account's changes in the order published.
   */
  async expectExact(accounts: readonly string[], events: number, readUrl: string, cliUrl: string): Promise<void> {
    const [balances, quarantine, tables] = await Promise.all([cliBalances(cliUrl), cliQuarantine(cliUrl), readLedgerTables(readUrl)]);
    expect(quarantine).toEqual([]);
    expect(tables.quarantine).toEqual([]);
    expect(balances.filter((b) => b.balance_cents !== STORY_BALANCE)).toEqual([]);
    expect(balances).toHaveLength(accounts.length);
    expect(tables.inbox).toHaveLength(events);
    expect(new Set(tables.inbox.map((r) => `${r.tenant}/${r.event_id}`)).size).toBe(events);

    const firstById = new Map<string, TappedMessage>();
    const idsByCause = new Map<string, Set<string>>();
    for (const m of this.tap.messages) {
      const change = m.json as { caused_by: string };
      if (!firstById.has(m.messageId!)) firstById.set(m.messageId!, m);
      idsByCause.set(change.caused_by, (idsByCause.get(change.caused_by) ?? new Set()).add(m.messageId!));
    }
    expect(idsByCause.size).toBe(accounts.length * STORY_DELTAS.length);
    expect([...idsByCause.values()].filter((ids) => ids.size !== 1)).toEqual([]);
    // Each balance.changed carries the balance right after its event: per account, in the order
    // published, the running sums of the story's deltas.
    const running = STORY_DELTAS.map((_, n) => STORY_DELTAS.slice(0, n + 1).reduce((a, b) => a + b, 0));
    const byAccount = new Map<string, number[]>();
    for (const m of firstById.values()) {
      const change = m.json as { account_id: string; balance_cents: number };
      byAccount.set(change.account_id, [...(byAccount.get(change.account_id) ?? []), change.balance_cents]);
    }
    const outOfOrder = [...byAccount].filter(([, seen]) => JSON.stringify(seen) !== JSON.stringify(running));
    expect(outOfOrder, outOfOrder.length === 0 ? "" : this.orderDiagnosis(outOfOrder[0]![0])).toEqual([]);
  }

  /** What a reordering looked like: every copy of the account's changes as it arrived, and what the replicas warned about. */
  private orderDiagnosis(account: string): string {
    const arrivals = this.tap.messages.filter((m) => (m.json as { account_id: string }).account_id === account).map((m) => {
      const change = m.json as { balance_cents: number; caused_by: string };
      return `${m.receivedAt} ${m.messageId} ${change.caused_by} ${change.balance_cents}`;
    });
    // Everything but the repeated connection failures: the failover's story, replica by replica.
    const noise = /^(idle PostgreSQL client lost|cannot listen for outbox notifications|outbox relay cannot claim rows|outbox notifications lost)/;
    const story = this.replicas.flatMap((r, i) => r.logs.filter((l) => l.level !== "debug" && !noise.test(l.msg)).map((l) => `replica ${i + 1}: ${JSON.stringify(l)}`));
    return [`account ${account}, deltas ${JSON.stringify(STORY_DELTAS)} in that order:`, ...arrivals, ...story.slice(-200)].join("\n");
  }

  async close(): Promise<void> {
    await killAllLedgerProcesses();
    await this.tap?.close({ deleteExchange: true });
    await this.publisher?.deleteQueues(...ledgerQueueNames(this.queue, HA_PARTITIONS));
    await this.publisher?.deleteExchanges(...ledgerExchangeNames(this.queue), ...partitionExchangeNames(this.queue));
    await this.publisher?.close();
  }
}
