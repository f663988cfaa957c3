/**
 * The copy the pipeline scenarios publish per event: a `balance.changed` of the ledger's shape
 * and publish options (JSON, persistent, mandatory, a message id stable per event, a timestamp),
 * so the broker carries and stores messages of the size the ledger's relay sends. These
 * scenarios keep no balances in a database they read back, so `balance_cents` is the account's
 * running sum as this process saw the events: the naive UPDATE returns nothing, and MariaDB has
 * no UPDATE .. RETURNING.
 */
import type { Options } from "amqplib";
import type { Adjustment } from "../databases/bench-database.js";

export class BalanceChangedCopies {
  private readonly balances = new Map<string, number>();

  /** The body and publish options of the copy of `event`; counts its delta into the account's sum. */
  copyOf(event: Adjustment): { body: Buffer; options: Options.Publish } {
    const balance = (this.balances.get(event.accountId) ?? 0) + event.delta;
    this.balances.set(event.accountId, balance);
    const body = Buffer.from(JSON.stringify({
      type: "balance.changed", tenant: event.tenant, account_id: event.accountId, balance_cents: balance, caused_by: event.eventId,
    }));
    return {
      body,
      options: {
        persistent: true, mandatory: true, contentType: "application/json",
        messageId: `${event.eventId}/balance.changed`, timestamp: Math.floor(Date.now() / 1000),
      },
    };
  }
}
