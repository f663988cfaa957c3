import type { BatchRejection, InboxHandler } from "../../src/index.js";
import { LEDGER_HANDLER, type LedgerEvent, balanceInRange, parseLedgerEvent } from "./events.js";

/** One account's row, as the ledger's business logic sees it. */
export interface AccountRow {
  tenant: string;
  accountId: string;
  balanceCents: bigint;
}

/**
 * The SQL a database needs to run the ledger, in the handler's transaction `Tx`.
 * `lockAccounts` must lock existing rows in (tenant, account_id) order so that concurrent
 * batches cannot deadlock; `writeAccounts` inserts or updates absolute balances.
 */
export interface LedgerSql<Tx> {
  lockAccounts(tx: Tx, keys: ReadonlyArray<readonly [string, string]>): Promise<AccountRow[]>;
  writeAccounts(tx: Tx, created: readonly AccountRow[], updated: readonly AccountRow[]): Promise<void>;
  /**
   * Optional, for batches of adjustments only: in ONE statement, lock the existing accounts in
   * (tenant, account_id) order and add each account's summed delta, returning every found
   * account's balance from BEFORE the update. The handler then replays the events from those
   * balances; if any is refused (missing account, out of range), it returns the rejections and
   * the pipeline rolls this transaction back and runs it again without them.
   */
  adjustAccounts?(tx: Tx, sums: ReadonlyArray<readonly [string, string, bigint]>): Promise<AccountRow[]>;
}

/** An account as a Map key: unambiguous (the tenant's length comes first) and cheaper than JSON. */
const accountKey = (tenant: string, accountId: string) => `${tenant.length}:${tenant}/${accountId}`;

/** The outbox ordering key of an account's balance.changed messages (stored with each row: keep it stable). */
export const accountOrderingKey = (tenant: string, accountId: string) => JSON.stringify([tenant, accountId]);

export interface LedgerHandlerOptions {
  /**
   * Publish a `balance.changed` message through the transactional outbox for every applied
   * `balance.adjusted`, to this (fanout) exchange. The ledger service sets it to
   * `<LEDGER_QUEUE>.balance-changed`. Default: none published.
   */
  balanceChangedExchange?: string;
}

/** The `balance.changed` message: the balance right after the event was applied. */
export interface BalanceChanged {
  type: "balance.changed";
  tenant: string;
  account_id: string;
  balance_cents: number;
  caused_by: string;
}

/**
 * The ledger handler. Batched (default): lock the accounts a batch touches, replay its events in
 * delivery order in memory, then write each touched account once. A lone event takes the same
 * path. `account.opened` for an existing account is a no-op; a balance beyond ±2^53-1 cents is
 * `invalid`. An adjustment of an account that does not exist (yet) is refused with `retryLater`:
 * its opening may still be on its way (applied by another replica whose transaction has not
 * committed, or waiting in a delayed retry itself), so the adjustment waits in the delayed-retry
 * queues and applies once the account exists; only after the last delay is it quarantined as
 * `account_missing`.
 */
export function ledgerHandler<Tx>(sql: LedgerSql<Tx>, options: LedgerHandlerOptions = {}): InboxHandler<LedgerEvent, Tx> {
  const exchange = options.balanceChangedExchange;
  return {
    name: LEDGER_HANDLER,
    // Its own reason, next to the library's: a value of the quarantine metric's `reason` label.
    quarantineReasons: ["account_missing"],
    parse: (body) => parseLedgerEvent(body),
    async handleBatch(items, tx) {
      if (sql.adjustAccounts && items.every(({ event }) => event.type === "balance.adjusted")) {
        return adjustOnly((t, sums) => sql.adjustAccounts!(t, sums), items, tx, exchange);
      }
      const keys = new Map<string, readonly [string, string]>();
      for (const { event } of items) keys.set(accountKey(event.tenant, event.accountId), [event.tenant, event.accountId]);
      const sorted = [...keys.values()].sort((a, b) => (a[0] === b[0] ? cmp(a[1], b[1]) : cmp(a[0], b[0])));
      const existing = new Map((await sql.lockAccounts(tx, sorted)).map((row) => [accountKey(row.tenant, row.accountId), row]));
      const created = new Map<string, AccountRow>();
      const touched = new Set<string>();
      const replay = new AdjustmentReplay(exchange);
      items.forEach(({ event, ctx }, index) => {
        const k = accountKey(event.tenant, event.accountId);
        const row = existing.get(k) ?? created.get(k);
        if (event.type === "account.opened") {
          if (!row) created.set(k, { tenant: event.tenant, accountId: event.accountId, balanceCents: 0n });
          return;
        }
        const next = replay.apply(event, ctx.publish, index, row?.balanceCents);
        if (next === undefined) return;
        row!.balanceCents = next;
        if (existing.has(k)) touched.add(k);
      });
      if (replay.rejections.length > 0) return replay.rejections;
      await sql.writeAccounts(tx, [...created.values()], [...touched].map((k) => existing.get(k)!));
      await replay.publish();
    },
  };
}

type LedgerItems<Tx> = Parameters<NonNullable<InboxHandler<LedgerEvent, Tx>["handleBatch"]>>[0];

/**
 * A batch of adjustments in one statement (`LedgerSql.adjustAccounts`): the summed deltas are
 * written first, then the events are replayed in delivery order from the balances before the
 * update, exactly as the general path would apply them. A refused event makes the batch return
 * its rejections, and the pipeline runs the transaction again without them.
 */
async function adjustOnly<Tx>(
  adjust: NonNullable<LedgerSql<Tx>["adjustAccounts"]>, items: LedgerItems<Tx>, tx: Tx, exchange: string | undefined,
): Promise<BatchRejection[] | undefined> {
  const sums = new Map<string, [string, string, bigint]>();
  for (const { event } of items) {
    if (event.type !== "balance.adjusted") continue;
    const k = accountKey(event.tenant, event.accountId);
    const sum = sums.get(k);
    if (sum) sum[2] += BigInt(event.deltaCents);
    else sums.set(k, [event.tenant, event.accountId, BigInt(event.deltaCents)]);
  }
  const balances = new Map((await adjust(tx, [...sums.values()])).map((row) => [accountKey(row.tenant, row.accountId), row.balanceCents]));
  const replay = new AdjustmentReplay(exchange);
  items.forEach(({ event, ctx }, index) => {
    if (event.type !== "balance.adjusted") return;
    const k = accountKey(event.tenant, event.accountId);
    const next = replay.apply(event, ctx.publish, index, balances.get(k));
    if (next !== undefined) balances.set(k, next);
  });
  if (replay.rejections.length > 0) return replay.rejections;
  await replay.publish();
  return undefined;
}

type Adjustment = Extract<LedgerEvent, { type: "balance.adjusted" }>;
type Publish = LedgerItems<unknown>[number]["ctx"]["publish"];

/**
 * Both paths replay a batch's adjustments in delivery order through this: it refuses an
 * adjustment of an account that was never opened or one that would leave the safe range, and
 * keeps the `balance.changed` message of each applied one (the balance right after it).
 */
class AdjustmentReplay {
  readonly rejections: BatchRejection[] = [];
  private readonly changes: Array<{ publish: Publish; message: BalanceChanged }> = [];

  constructor(private readonly exchange: string | undefined) {}

  /** The account's balance after the event, or undefined when the event is refused. */
  apply(event: Adjustment, publish: Publish, index: number, before: bigint | undefined): bigint | undefined {
    if (before === undefined) {
      // Not yet rather than never: the opening may still be on its way (see ledgerHandler).
      this.rejections.push({
        index, reason: "account_missing", retryLater: true,
        detail: `account ${event.accountId} of tenant ${event.tenant} was never opened`,
      });
      return undefined;
    }
    const next = before + BigInt(event.deltaCents);
    if (!balanceInRange(next)) {
      this.rejections.push({ index, reason: "invalid", detail: `balance of account ${event.accountId} would leave the safe integer range` });
      return undefined;
    }
    if (this.exchange !== undefined) this.changes.push({
      publish,
      message: { type: "balance.changed", tenant: event.tenant, account_id: event.accountId, balance_cents: Number(next), caused_by: event.eventId },
    });
    return next;
  }

  /** Writes the kept messages to the outbox; one ordering key per account keeps them in balance order. */
  async publish(): Promise<void> {
    if (this.exchange === undefined) return;
    for (const c of this.changes) await c.publish(this.exchange, "", c.message, { orderingKey: accountOrderingKey(c.message.tenant, c.message.account_id) });
  }
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

