/** Ledger messages as a producer publishes them (snake_case JSON), and the routing key of a partitioned ledger. */

export interface AccountOpened { type: "account.opened"; tenant: string; event_id: string; account_id: string }
export interface BalanceAdjusted { type: "balance.adjusted"; tenant: string; event_id: string; account_id: string; delta_cents: number }
export type LedgerMessage = AccountOpened | BalanceAdjusted;

export function accountOpened(tenant: string, eventId: string, accountId: string): AccountOpened {
  return { type: "account.opened", tenant, event_id: eventId, account_id: accountId };
}

export function balanceAdjusted(tenant: string, eventId: string, accountId: string, deltaCents: number): BalanceAdjusted {
  return { type: "balance.adjusted", tenant, event_id: eventId, account_id: accountId, delta_cents: deltaCents };
}

/** The routing key producers use on a partitioned ledger: one account's events, one partition. */
export function accountRoutingKey(message: LedgerMessage): string {
  return `${message.tenant}/${message.account_id}`;
}
