import type { Logger } from "../../core/logger.js";
import { PooledDriver } from "../sql/pooled-driver.js";
import type { SqlQuery } from "../sql/sql-query.js";
import { classifyPostgresError, isPostgresConnectionLoss } from "./errors.js";
import { type PgCheckout, type PgClient, type PgPool, checkOut, nodeOfPgClient, pgStatement, sqlResult } from "./pg-client.js";
import { PostgresSession } from "./session.js";

/** The slice of node-postgres the store uses (`pg.Pool` and `pg.PoolClient` fit it), as users import it. */
export type { PgClient, PgPool, PgQueryResult } from "./pg-client.js";

/**
 * The store's own pool: one client per transaction under READ COMMITTED, its session
 * (PostgresSession) sending every value as a parameter. A concurrent insert of the same key
 * waits for the other transaction, then sees its row or inserts (it rolled back): the primary
 * key is the backstop, never a prior SELECT.
 */
export class PostgresDriver<C extends PgClient> extends PooledDriver<PgCheckout<C>, C> {
  constructor(private readonly pool: PgPool<C>, private readonly ownsPool: boolean, private readonly logger: Logger) {
    super();
  }

  protected acquire(): Promise<PgCheckout<C>> {
    return checkOut(this.pool);
  }

  protected release(checkout: PgCheckout<C>, broken: boolean): void {
    checkout.release(broken);
  }

  protected startSession(checkout: PgCheckout<C>): PostgresSession<C> {
    return new PostgresSession(checkout, this.logger);
  }

  protected autocommit(checkout: PgCheckout<C>): SqlQuery {
    return async (statement) => sqlResult(await checkout.client.query(pgStatement(statement)));
  }

  protected isConnectionLoss(error: unknown): boolean {
    return isPostgresConnectionLoss(error);
  }

  protected classify(error: unknown, duringCommit: boolean, checkout?: PgCheckout<C>): unknown {
    return classifyPostgresError(error, duringCommit, checkout ? nodeOfPgClient(checkout.client) : null);
  }

  protected override nodeOf(checkout: PgCheckout<C>): string | null {
    return nodeOfPgClient(checkout.client);
  }

  /** Ends the pool only if the store created it. */
  async close(): Promise<void> {
    if (this.ownsPool) await this.pool.end();
  }
}
