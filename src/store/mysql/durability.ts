import { describeError } from "../../core/errors.js";
import type { Logger } from "../../core/logger.js";
import type { SqlQuery } from "../sql/sql-query.js";
import { isMysqlConnectionLoss } from "./errors.js";

/**
 * Warns when commits are not flushed to disk: with innodb_flush_log_at_trx_commit 0 or 2 a
 * crash of the server (2: of the machine) can lose the last second of commits, and events
 * whose commit was lost but whose delivery was acked are lost for good. Checked once per store,
 * at migrate or at the first transaction, whichever comes first.
 */
export class DurabilityCheck {
  private checked = false;

  constructor(private readonly logger: Logger) {}

  get done(): boolean {
    return this.checked;
  }

  /** Reads the setting on the caller's connection; only a lost connection fails the caller. */
  async run(query: SqlQuery): Promise<void> {
    this.checked = true;
    try {
      const { rows } = await query({ text: "SELECT @@GLOBAL.innodb_flush_log_at_trx_commit AS flush", values: [] });
      const flush = Number(rows[0]?.flush);
      if (flush !== 1) {
        this.logger.warn("innodb_flush_log_at_trx_commit is not 1: a server or machine crash can lose acknowledged commits", {
          dialect: "mysql", innodb_flush_log_at_trx_commit: rows[0]?.flush,
        });
      }
    } catch (error) {
      if (isMysqlConnectionLoss(error)) throw error;
      this.logger.debug("could not read innodb_flush_log_at_trx_commit", { error: describeError(error) });
    }
  }
}
