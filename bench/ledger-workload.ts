/**
 * The events the scale-out benchmark publishes to a partitioned ledger, and what the balances
 * must be afterwards: each account is opened, then adjusted; every adjustment of an account
 * goes after its opening, so an event applied out of its account's order shows up (as an
 * `account_missing` quarantine and a wrong balance).
 */
import type { LedgerMessage } from "../examples/ledger/driver/ledger-messages.js";

export class LedgerWorkload {
  /** Every published event's account balance so far, by account id. */
  readonly expected = new Map<string, number>();
  /** Events handed out so far (openings + adjustments). */
  events = 0;
  adjustments = 0;
  private cursor = 0;

  /**
   * `accounts` accounts of `tenant`, opened first (one after the other), then adjusted in turn;
   * event ids start with `runTag` so that two runs never share a dedup key.
   */
  constructor(readonly tenant: string, readonly accounts: number, private readonly runTag: string) {}

  /** The next event: the openings first, then adjustments round-robin over the accounts, forever. */
  next(): LedgerMessage {
    const i = this.cursor++;
    this.events++;
    const account = `acc-${i % this.accounts}`;
    if (i < this.accounts) {
      this.expected.set(account, 0);
      return { type: "account.opened", tenant: this.tenant, event_id: `${this.runTag}-open-${i}`, account_id: account };
    }
    // 1..7 cents, varying with the position, so a lost or doubled adjustment changes the sum.
    const delta = (i % 7) + 1;
    this.adjustments++;
    this.expected.set(account, (this.expected.get(account) ?? 0) + delta);
    return { type: "balance.adjusted", tenant: this.tenant, event_id: `${this.runTag}-adj-${i}`, account_id: account, delta_cents: delta };
  }

  /** Accounts whose balance differs from the expected one (missing accounts included), first 10. */
  wrongBalances(actual: ReadonlyMap<string, number>): string[] {
    const wrong: string[] = [];
    for (const [account, balance] of this.expected) {
      const got = actual.get(account);
      if (got !== balance) wrong.push(`${account}: expected ${balance}, got ${got ?? "no account"}`);
    }
    for (const account of actual.keys()) if (!this.expected.has(account)) wrong.push(`${account}: not published, but in the ledger`);
    return wrong.slice(0, 10);
  }
}
