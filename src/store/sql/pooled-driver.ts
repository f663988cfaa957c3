import { StoreUnavailableError } from "../../core/errors.js";
import { DatabaseHealthTracker } from "./database-health.js";
import type { SqlDriver, SqlSession } from "./sql-driver.js";
import type { SqlQuery } from "./sql-query.js";

/** A transaction on one borrowed connection, driven by PooledDriver. */
export interface PooledSession<Handle> extends SqlSession<Handle> {
  /** Starts the transaction (or arranges for it to start with the first statement). */
  begin(): Promise<void>;
  /** Commits. Throws when the database did not commit (the error says why). */
  commit(): Promise<void>;
  /**
   * Rolls back after a failure, if the transaction needs it; `afterCommit` is true when the
   * failure came from COMMIT itself. Resolves false when the rollback failed, so the connection
   * cannot be trusted any more.
   */
  rollback(afterCommit: boolean): Promise<boolean>;
  /** True once the session learned that its connection broke (an 'error' event, a lost socket). */
  readonly broken: boolean;
  /** Called once the transaction is over, before the connection goes back (remove listeners...). */
  end(): void;
}

/**
 * The transaction lifecycle every pooled database shares, written once: borrow a connection,
 * BEGIN, run the work and the hook, COMMIT; on any failure roll back unless the connection is
 * gone, classify the error (knowing whether it came from COMMIT), and give the connection back,
 * destroyed when its session broke or its database refused the work (a new session may reach
 * another node, or the database once it accepts writes again). A dialect supplies the steps.
 * What the transactions meet is kept for health checks (`health`).
 */
export abstract class PooledDriver<Connection, Handle> implements SqlDriver<Handle> {
  /** What the transactions met; shared with the drivers made from this one (other session settings, same pool). */
  health = new DatabaseHealthTracker();
  /** Borrows a connection; a failure is classified (the database is unreachable, not the event bad). */
  protected abstract acquire(): Promise<Connection>;
  /** Returns the connection, or destroys it when `broken`. */
  protected abstract release(connection: Connection, broken: boolean): void;
  protected abstract startSession(connection: Connection): PooledSession<Handle>;
  /** One statement outside any transaction. */
  protected abstract autocommit(connection: Connection): SqlQuery;
  protected abstract isConnectionLoss(error: unknown): boolean;
  /**
   * The dialect's classification; `duringCommit` marks a failure of COMMIT itself, `connection`
   * the connection it happened on (when there was one), so that a refusal can name its node.
   */
  protected abstract classify(error: unknown, duringCommit: boolean, connection?: Connection): unknown;
  abstract close(): Promise<void>;

  /** `host:port` of the server a connection is on; null when the dialect cannot tell (a file). */
  protected nodeOf(_connection: Connection): string | null {
    return null;
  }

  async transaction<T>(work: (session: SqlSession<Handle>) => Promise<T>, beforeCommit?: () => Promise<void> | void): Promise<T> {
    const connection = await this.borrow();
    const session = this.startSession(connection);
    let broken = false;
    let committing = false;
    try {
      await session.begin();
      const result = await work(session);
      if (beforeCommit) await beforeCommit();
      committing = true;
      await session.commit();
      this.health.reached(this.nodeOf(connection));
      return result;
    } catch (error) {
      broken = session.broken || this.isConnectionLoss(error);
      if (!broken) broken = !(await session.rollback(committing));
      const classified = this.classify(error, committing, connection);
      broken ||= classified instanceof StoreUnavailableError;
      this.health.failed(classified, this.nodeOf(connection));
      throw classified;
    } finally {
      session.end();
      this.release(connection, broken || session.broken);
    }
  }

  async read<T>(work: (query: SqlQuery) => Promise<T>): Promise<T> {
    const connection = await this.borrow();
    let broken = false;
    try {
      const result = await work(this.autocommit(connection));
      this.health.reached(this.nodeOf(connection));
      return result;
    } catch (error) {
      const classified = this.classify(error, false, connection);
      broken = this.isConnectionLoss(error) || classified instanceof StoreUnavailableError;
      this.health.failed(classified, this.nodeOf(connection));
      throw classified;
    } finally {
      this.release(connection, broken);
    }
  }

  /** A connection; a failure to get one (classified by acquire) is an outage the health check reports. */
  private async borrow(): Promise<Connection> {
    try {
      return await this.acquire();
    } catch (error) {
      this.health.failed(error, null);
      throw error;
    }
  }
}
