import { TransientStoreError } from "../../core/errors.js";
import type { Logger } from "../../core/logger.js";
import type { PooledSession } from "../sql/pooled-driver.js";
import type { SqlQuery, SqlResult, SqlStatement } from "../sql/sql-query.js";
import { CLAIM_SAVEPOINT, type SavepointSession } from "./claim.js";
import { type PgCheckout, type PgClient, pgStatement, sqlResult } from "./pg-client.js";

/**
 * One transaction on a pooled pg client. Every value travels as a parameter of the extended
 * protocol, never in the SQL text; the inbox's named statements are parsed once per pooled client
 * (node-postgres keeps track) and only bound and executed after that.
 *
 * BEGIN is answered before anything else is sent. node-postgres sends a queued query once the
 * previous one is answered, failed or not, and its pipelining mode ends every query with its own
 * Sync: either way a statement sent behind a BEGIN that failed would run, and commit, on its own.
 *
 * BEGIN opens the batch claim's savepoint in the same round trip (a simple-protocol text with no
 * value in it): the claim is the first statement of an inbox transaction, and its savepoint
 * would otherwise cost a round trip of its own on every batch, while the deliveries wait.
 *
 * A session terminated between statements (the client's 'error', heard by its checkout) marks
 * the client broken, and is logged.
 */
export class PostgresSession<C extends PgClient> implements PooledSession<C>, SavepointSession {
  private started = false;
  /** The savepoint BEGIN opened, while nothing ran after it (so rolling back to it undoes nothing else). */
  private freshSavepoint: string | null = null;
  readonly query: SqlQuery;

  constructor(private readonly checkout: PgCheckout<C>, logger: Logger) {
    this.query = async (statement) => {
      this.freshSavepoint = null;
      return sqlResult(await checkout.client.query(pgStatement(statement)));
    };
    checkout.onLost = (error) => logger.warn("PostgreSQL session lost during a transaction", { error: error.message });
  }

  /** The client for the handler, inside the transaction BEGIN opened. */
  get handle(): C {
    this.freshSavepoint = null;
    return this.checkout.client;
  }

  get broken(): boolean {
    return this.checkout.lost;
  }

  async begin(): Promise<void> {
    // Set before it is sent: a BEGIN whose answer never came may still have opened the transaction.
    this.started = true;
    await this.checkout.client.query(`BEGIN; SAVEPOINT ${CLAIM_SAVEPOINT}`);
    this.freshSavepoint = CLAIM_SAVEPOINT;
  }

  /** `savepoint` is the library's own name, never a message's. */
  async queryInSavepoint(savepoint: string, statement: SqlStatement): Promise<SqlResult> {
    if (this.freshSavepoint !== savepoint) await this.checkout.client.query(`SAVEPOINT ${savepoint}`);
    return this.query(statement);
  }

  async commit(): Promise<void> {
    const committed = await this.checkout.client.query("COMMIT");
    // PostgreSQL answers COMMIT of an aborted transaction (a handler caught an SQL error and
    // carried on) with ROLLBACK, not an error: nothing was written, so this must not ack.
    if ((committed as { command?: string }).command === "ROLLBACK") {
      throw new TransientStoreError("the transaction was aborted by an earlier failed statement (did the handler catch an SQL error?); nothing was committed");
    }
  }

  /** After a failed COMMIT the transaction is over either way; before, only a started one needs it. */
  async rollback(afterCommit: boolean): Promise<boolean> {
    if (afterCommit || !this.started) return true;
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
