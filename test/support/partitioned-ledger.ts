import { expect } from "vitest";
import type { BrokerClient } from "../../examples/ledger/driver/broker-client.js";
import { type LedgerMessage, accountOpened, balanceAdjusted } from "../../examples/ledger/driver/ledger-messages.js";
import type { LedgerProcess } from "../../examples/ledger/driver/ledger-process.js";
import { waitUntil } from "../../examples/ledger/driver/wait-until.js";
import type { LedgerTestContext } from "./ledger-harness.js";
import { outboxTableAt } from "./outbox.js";

/**
 * An account story whose end state proves per-account order: each account is opened, then
 * adjusted by 1, 2, 4, 8 and 16 cents (31 in all). An adjustment applied before the opening is
 * refused, and the order in which the adjustments were applied is visible in the outbox (one
 * `balance.changed` per adjustment, in the order they were applied).
 */
export const STORY_DELTAS = [1, 2, 4, 8, 16] as const;
export const STORY_BALANCE = 31;

export function accountIds(count: number, prefix = "acc"): string[] {
  return Array.from({ length: count }, (_, i) => `${prefix}-${i}`);
}

/** The events of these accounts, each account's in its order; `block` accounts are interleaved. */
export function accountStories(tenant: string, accounts: readonly string[], block = 1): LedgerMessage[] {
  const messages: LedgerMessage[] = [];
  for (let i = 0; i < accounts.length; i += block) {
    const group = accounts.slice(i, i + block);
    for (const a of group) messages.push(accountOpened(tenant, `${a}-open`, a));
    STORY_DELTAS.forEach((delta, n) => {
      for (const a of group) messages.push(balanceAdjusted(tenant, `${a}-adj-${n + 1}`, a, delta));
    });
  }
  return messages;
}

/** The partitions a ledger process says it holds now (from its `consuming` and `partitions rebalanced` lines). */
export function heldPartitions(ledger: LedgerProcess): number[] | undefined {
  for (let i = ledger.logs.length - 1; i >= 0; i--) {
    const r = ledger.logs[i]!;
    if ((r.msg === "partitions rebalanced" || r.msg === "consuming") && Array.isArray(r.held)) return r.held as number[];
  }
  return undefined;
}

/** Waits until the processes hold every partition once between them, `shares` each (sorted). */
export async function waitForBalance(ledgers: readonly LedgerProcess[], partitions: number, timeoutMs = 20_000): Promise<number[][]> {
  const sizes = (held: number[][]) => held.map((h) => h.length).sort((a, b) => a - b);
  const fair = Array.from({ length: ledgers.length }, (_, i) => Math.floor(partitions / ledgers.length) + (i >= ledgers.length - (partitions % ledgers.length) ? 1 : 0));
  return waitUntil(() => {
    const held = ledgers.map((l) => heldPartitions(l) ?? []);
    const all = held.flat().sort((a, b) => a - b);
    const complete = all.length === partitions && all.every((p, i) => p === i);
    return complete && JSON.stringify(sizes(held)) === JSON.stringify(fair) ? held : undefined;
  }, `${ledgers.length} replicas to share ${partitions} partitions evenly (now: ${JSON.stringify(ledgers.map((l) => heldPartitions(l)))})`, { timeoutMs, watch: ledgers });
}

/**
 * Every account ends at exactly 31 cents, nothing is quarantined, and each account's
 * adjustments were applied in the order they were published.
 */
export async function expectStoriesAppliedInOrder(t: LedgerTestContext, tenant: string, accounts: readonly string[]): Promise<void> {
  const { balances, quarantine } = await t.cli();
  expect(quarantine).toEqual([]);
  const mine = balances.filter((b) => b.tenant === tenant);
  expect(mine).toHaveLength(accounts.length);
  const wrong = mine.filter((b) => b.balance_cents !== STORY_BALANCE);
  expect(wrong).toEqual([]);
  const rows = await outboxTableAt(t.databaseUrl).rows();
  const applied = new Map<string, string[]>();
  for (const row of rows) {
    const key = row.ordering_key;
    if (!key || !row.source_event_id) continue;
    const list = applied.get(key) ?? [];
    list.push(row.source_event_id);
    applied.set(key, list);
  }
  expect(applied.size).toBe(accounts.length);
  const outOfOrder = accounts.filter((a) => {
    const list = applied.get(JSON.stringify([tenant, a]));
    return JSON.stringify(list) !== JSON.stringify(STORY_DELTAS.map((_, n) => `${a}-adj-${n + 1}`));
  });
  expect(outOfOrder).toEqual([]);
}

/** Waits until `events` events have a dedup record (each applied once, or refused). */
export async function waitForApplied(t: LedgerTestContext, events: number, watch: readonly LedgerProcess[], timeoutMs = 90_000): Promise<void> {
  let seen = 0;
  await waitUntil(async () => {
    seen = (await t.tables()).inbox.length;
    return seen >= events ? true : undefined;
  }, `${events} events to be applied (${seen} so far)`, { timeoutMs, intervalMs: 500, watch });
}

/**
 * Publishes `messages` to the partitioned ledger's exchange in 30 chunks, 100 ms apart, so that
 * a test can kill, stop or add processes while events flow.
 */
export function publishStream(publisher: BrokerClient, exchange: string, messages: readonly LedgerMessage[]): {
  publishing: Promise<void>;
  whenPublished: (fraction: number, timeoutMs?: number) => Promise<true>;
} {
  const chunk = Math.ceil(messages.length / 30);
  let published = 0;
  const publishing = (async () => {
    for (let i = 0; i < messages.length; i += chunk) {
      await publisher.publishRouted(exchange, messages.slice(i, i + chunk));
      published += Math.min(chunk, messages.length - i);
      await new Promise((done) => setTimeout(done, 100));
    }
  })();
  return {
    publishing,
    whenPublished: (fraction, timeoutMs = 60_000) =>
      waitUntil(() => (published >= messages.length * fraction ? true : undefined), `${Math.round(fraction * 100)}% of the events published`, { timeoutMs }),
  };
}
