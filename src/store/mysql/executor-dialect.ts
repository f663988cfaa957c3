import { TransientStoreError } from "../../core/errors.js";
import type { ExecutorDialect } from "../sql/executor-driver.js";
import type { SqlQuery } from "../sql/sql-query.js";
import { classifyMysqlError } from "./errors.js";

/** ER_UNKNOWN_SYSTEM_VARIABLE: MySQL has no `@@in_transaction` (MariaDB 10.3+ has). */
const UNKNOWN_SYSTEM_VARIABLE = 1193;
/** ER_SP_DOES_NOT_EXIST: the savepoint vanished with the implicit transaction of an autocommit statement. */
const SAVEPOINT_DOES_NOT_EXIST = 1305;
const PROBE_SAVEPOINT = "rabbit_inbox_still_in_transaction";

function errnoOf(error: unknown): number | undefined {
  const errno = (error as { errno?: unknown } | null)?.errno;
  return typeof errno === "number" ? errno : undefined;
}

function ended(cause?: unknown): TransientStoreError {
  return new TransientStoreError(
    "the inbox transaction ended before the data layer's COMMIT (a deadlock or lock wait timeout the handler caught, " +
      "or a COMMIT, ROLLBACK or DDL statement in the handler): the inbox record is not committed with the handler's writes",
    cause === undefined ? {} : { cause },
  );
}

/**
 * What MySQL / MariaDB add to a data layer's transactions: errors classified as MysqlStore's,
 * and a check before COMMIT that the transaction the inbox record was written in is still open.
 *
 * A deadlock (1213), or a lock wait timeout under innodb_rollback_on_timeout, rolls the whole
 * transaction back on the server, and the session goes on in autocommit mode. A handler that
 * caught such an error and went on would have its later statements commit one by one, and the
 * data layer's COMMIT would succeed with nothing to commit: the event would be reported applied
 * without its dedup row. MysqlStore sees the end in each statement's OK packet and guards the
 * connection it lends; a data layer exposes neither, so the store asks the server itself:
 * - MariaDB: `SELECT @@in_transaction`, one round trip;
 * - MySQL (no such variable): `SAVEPOINT` then `RELEASE SAVEPOINT`. Outside a transaction the
 *   savepoint belongs to the statement's own implicit transaction and is gone when it ends, so
 *   the RELEASE fails with 1305; inside one it is released. Two round trips.
 * Neither can undo what the handler's later statements already autocommitted: refusing the
 * COMMIT only keeps the event from being acked as applied (the retry runs the handler again).
 */
export function mysqlExecutorDialect(): ExecutorDialect {
  // Learned from the first check: the server does not know @@in_transaction (MySQL).
  let useSavepoint = false;
  return {
    classify: (error, duringCommit) => classifyMysqlError(error, duringCommit),
    async checkBeforeCommit(query, unwrap) {
      if (!useSavepoint) {
        let inTransaction: unknown;
        try {
          inTransaction = (await query({ text: "SELECT @@in_transaction AS in_transaction", values: [] })).rows[0]?.in_transaction;
        } catch (error) {
          if (errnoOf(unwrap(error)) !== UNKNOWN_SYSTEM_VARIABLE) throw error;
          // A failed statement does not end a MySQL transaction: the savepoint probe can follow.
          useSavepoint = true;
        }
        if (!useSavepoint) {
          if (Number(inTransaction) !== 1) throw ended();
          return;
        }
      }
      await stillInTransactionBySavepoint(query, unwrap);
    },
  };
}

async function stillInTransactionBySavepoint(query: SqlQuery, unwrap: (error: unknown) => unknown): Promise<void> {
  await query({ text: `SAVEPOINT ${PROBE_SAVEPOINT}`, values: [] });
  try {
    await query({ text: `RELEASE SAVEPOINT ${PROBE_SAVEPOINT}`, values: [] });
  } catch (error) {
    if (errnoOf(unwrap(error)) === SAVEPOINT_DOES_NOT_EXIST) throw ended(error);
    throw error;
  }
}
