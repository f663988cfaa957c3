import { InvalidEventError, type ParsedEvent, readId } from "../../src/index.js";

/** The ledger's events. Money is integer cents. */
export type LedgerEvent =
  | { type: "account.opened"; tenant: string; eventId: string; accountId: string }
  | { type: "balance.adjusted"; tenant: string; eventId: string; accountId: string; deltaCents: number };

/** The ledger's dedup scope: the key is (tenant, "ledger", event_id). */
export const LEDGER_HANDLER = "ledger";

/** Validates a decoded body; throws InvalidEventError with a readable detail. */
export function parseLedgerEvent(body: Record<string, unknown>): ParsedEvent<LedgerEvent> {
  const tenant = readId(body, "tenant");
  const eventId = readId(body, "event_id");
  const type = body.type;
  if (type !== "account.opened" && type !== "balance.adjusted") {
    throw new InvalidEventError(`type must be "account.opened" or "balance.adjusted", got ${JSON.stringify(type)?.slice(0, 80) ?? "nothing"}`);
  }
  const accountId = readId(body, "account_id");
  const key = { tenant, eventId };
  if (type === "account.opened") return { key, event: { type, tenant, eventId, accountId } };
  const delta = body.delta_cents;
  if (typeof delta !== "number") throw new InvalidEventError(`delta_cents must be a number of cents, got ${delta === null ? "null" : typeof delta}`);
  if (!Number.isInteger(delta)) throw new InvalidEventError(`delta_cents must be an integer number of cents, got ${delta}`);
  if (!Number.isSafeInteger(delta)) throw new InvalidEventError(`delta_cents ${delta} is outside the safe integer range`);
  return { key, event: { type, tenant, eventId, accountId, deltaCents: delta } };
}

/** Largest balance magnitude the ledger keeps, so balances print exactly as JSON numbers. */
export const MAX_BALANCE_CENTS = BigInt(Number.MAX_SAFE_INTEGER);

export function balanceInRange(cents: bigint): boolean {
  return cents <= MAX_BALANCE_CENTS && cents >= -MAX_BALANCE_CENTS;
}
