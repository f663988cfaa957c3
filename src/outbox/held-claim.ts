import { InboxConfigError } from "../core/errors.js";
import type { OutboxClaim, OutboxRow, OutboxSettlement } from "../core/store-contract/outbox-relay-store.js";

/**
 * A relay claim that lives as long as the database transaction holding its rows
 * (`FOR UPDATE SKIP LOCKED`): nothing to send ends the transaction at once; otherwise settling
 * marks the rows and commits, exactly once. `end` runs the settlement statements and COMMIT.
 */
export async function heldClaim(
  rows: OutboxRow[],
  end: (statement: "COMMIT", settlement?: OutboxSettlement) => Promise<void>,
): Promise<OutboxClaim | null> {
  if (rows.length === 0) {
    await end("COMMIT");
    return null;
  }
  let settled = false;
  return {
    rows,
    expiresAt: Infinity,
    settle: async (settlement) => {
      if (settled) throw new InboxConfigError("an outbox claim was settled twice");
      settled = true;
      await end("COMMIT", settlement);
    },
  };
}
