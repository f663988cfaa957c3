import { TransientStoreError } from "../../core/errors.js";
import type { Logger } from "../../core/logger.js";
import type { PooledSession } from "../sql/pooled-driver.js";
import type { SqlQuery, SqlResult, SqlStatement } from "../sql/sql-query.js";
import type { SavepointSession } from "./claim.js";
import { DeferredBegin } from "./deferred-begin.js";
import { type PgCheckout, type PgClient, sqlResult } from "./pg-client.js";
import type { PreparedStatements } from "./prepared-statements.js";

/**
 * One transaction on a pooled pg client, BEGIN travelling with its first statement (see
 * DeferredBegin). A session terminated between statements (the client's 'error', heard by its
 * checkout) marks the client broken, and is logged.
 */
export class PostgresSession<C extends PgClient> implements PooledSession<C>, SavepointSession {
  private readonly deferred: DeferredBegin<C>;
  readonly query: SqlQuery;

  constructor(private readonly checkout: PgCheckout<C>, statements: PreparedStatements, logger: Logger) {
    this.deferred = new DeferredBegin(checkout.client, statements);
    this.query = async (statement) => sqlResult(await this.deferred.query(statement));
    checkout.onLost = (error) => logger.warn("PostgreSQL session lost during a transaction", { error: error.message });
  }

  /** The client for the handler: BEGIN is queued before anything it sends. */
  get handle(): C {
    return this.deferred.handle;
  }

  get broken(): boolean {
    return this.checkout.lost;
  }

  async queryInSavepoint(savepoint: string, statement: SqlStatement): Promise<SqlResult> {
    return sqlResult(await this.deferred.queryInSavepoint(savepoint, statement));
  }

  /** Nothing: BEGIN goes with the first statement, if there is one. */
  begin(): Promise<void> {
    return Promise.resolve();
  }

  async commit(): Promise<void> {
    // Nothing was sent: there is nothing to commit.
    if (!this.deferred.started) return;
    await this.deferred.settled();
    const committed = await this.checkout.client.query("COMMIT");
    // PostgreSQL answers COMMIT of an aborted transaction (a handler caught an SQL error and
    // carried on) with ROLLBACK, not an error: nothing was written, so this must not ack.
    if ((committed as { command?: string }).command === "ROLLBACK") {
      throw new TransientStoreError("the transaction was aborted by an earlier failed statement (did the handler catch an SQL error?); nothing was committed");
    }
  }

  /** After a failed COMMIT the transaction is over either way; before, only a started one needs it. */
  async rollback(afterCommit: boolean): Promise<boolean> {
    if (afterCommit || !this.deferred.started) return true;
    try {
      await this.checkout.client.query("ROLLBACK");
      return true;
    } catch {
      return false;
    }
  }

  end(): void {
    this.checkout.onLost = undefined;
  }
}
