import { describeError } from "../../core/errors.js";
import type { Logger } from "../../core/logger.js";
import type { SqlQuery } from "../sql/sql-query.js";
import { isMysqlConnectionLoss } from "./errors.js";
import { textOf } from "./values.js";

/**
 * What the store reads from its server once per store, at migrate or at the first transaction,
 * whichever comes first:
 * - whether commits are flushed to disk: with innodb_flush_log_at_trx_commit 0 or 2 a crash of
 *   the server (2: of the machine) can lose the last second of commits, and events whose commit
 *   was lost but whose delivery was acked are lost for good. It warns when they are not;
 * - whether the server is MariaDB 10.5 or later, which has `INSERT ... RETURNING` (MySQL has
 *   not): the outbox's leased writes then learn the new rows' ids in the INSERT itself.
 * A lost connection fails the caller and leaves the check for the next transaction.
 */
export class ServerCheck {
  private checked = false;
  private returning = false;

  constructor(private readonly logger: Logger) {}

  get done(): boolean {
    return this.checked;
  }

  /** True once the check saw a server with `INSERT ... RETURNING`; false before, or on MySQL. */
  get insertReturning(): boolean {
    return this.returning;
  }

  /** Reads the settings on the caller's connection; only a lost connection fails the caller. */
  async run(query: SqlQuery): Promise<void> {
    this.checked = true;
    try {
      const { rows } = await query({ text: "SELECT @@GLOBAL.innodb_flush_log_at_trx_commit AS flush, VERSION() AS version", values: [] });
      this.returning = hasInsertReturning(textOf(rows[0]?.version ?? ""));
      const flush = Number(rows[0]?.flush);
      if (flush !== 1) {
        this.logger.warn("innodb_flush_log_at_trx_commit is not 1: a server or machine crash can lose acknowledged commits", {
          dialect: "mysql", innodb_flush_log_at_trx_commit: rows[0]?.flush,
        });
      }
    } catch (error) {
      if (isMysqlConnectionLoss(error)) {
        this.checked = false;
        throw error;
      }
      this.logger.debug("could not read innodb_flush_log_at_trx_commit and the server version", { error: describeError(error) });
    }
  }
}

/**
 * MariaDB 10.5 or later, from `VERSION()` (`10.11.19-MariaDB-0+deb12u1`; behind a proxy also
 * `5.5.5-10.11.2-MariaDB-log`). MySQL's versions never name MariaDB.
 */
export function hasInsertReturning(version: string): boolean {
  const mariadb = /(\d+)\.(\d+)\.\d+-MariaDB/i.exec(version);
  if (!mariadb) return false;
  const major = Number(mariadb[1]);
  return major > 10 || (major === 10 && Number(mariadb[2]) >= 5);
}
