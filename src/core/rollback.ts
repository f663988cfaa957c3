import type { Store, StoreTransaction } from "./store-contract/store.js";

/**
 * What one transaction's work asks for: COMMIT, with its result, or ROLLBACK, with what it
 * learned (events the handler refused, to leave out of the next run; or nothing).
 */
export type WorkResult<C, R> = { commit: C } | { rollBack: R };

/**
 * Runs `work` in one transaction of `store`, and commits or rolls back as the work's result
 * says. The Store contract rolls a transaction back only when its work throws, so a rollback is
 * asked for with a throw of this call's own signal; the signal never leaves this function: the
 * caller gets a value either way, and any other error is rethrown as is.
 */
export async function transactionOrRollBack<Tx, C, R>(
  store: Store<Tx>, work: (tx: StoreTransaction<Tx>) => Promise<WorkResult<C, R>>, beforeCommit?: () => Promise<void> | void,
): Promise<WorkResult<C, R>> {
  // Made only when a rollback is asked for: an Error captures a stack trace when it is built,
  // and almost every transaction commits.
  let signal: RollbackSignal<R> | undefined;
  try {
    return await store.transaction(async (tx) => {
      const result = await work(tx);
      if ("rollBack" in result) {
        signal = new RollbackSignal(result.rollBack);
        throw signal;
      }
      return result;
    }, beforeCommit);
  } catch (error) {
    if (signal !== undefined && error === signal) return { rollBack: signal.value };
    throw error;
  }
}

/** Thrown through a store's transaction to make it roll back; named so that a store's log of it says what it is. */
class RollbackSignal<R> extends Error {
  constructor(readonly value: R) {
    super("rolled back on purpose: the transaction's work asked for it (events set aside, or redeliveries counted before)");
    this.name = "RollbackSignal";
  }
}
