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
 * destroyed when its session broke. A dialect supplies the steps.
 */
export abstract class PooledDriver<Connection, Handle> implements SqlDriver<Handle> {
  /** Borrows a connection; a failure is classified (the database is unreachable, not the event bad). */
  protected abstract acquire(): Promise<Connection>;
  /** Returns the connection, or destroys it when `broken`. */
  protected abstract release(connection: Connection, broken: boolean): void;
  protected abstract startSession(connection: Connection): PooledSession<Handle>;
  /** One statement outside any transaction. */
  protected abstract autocommit(connection: Connection): SqlQuery;
  protected abstract isConnectionLoss(error: unknown): boolean;
  /** The dialect's classification; `duringCommit` marks a failure of COMMIT itself. */
  protected abstract classify(error: unknown, duringCommit: boolean): unknown;
  abstract close(): Promise<void>;

  async transaction<T>(work: (session: SqlSession<Handle>) => Promise<T>, beforeCommit?: () => Promise<void> | void): Promise<T> {
    const connection = await this.acquire();
    const session = this.startSession(connection);
    let broken = false;
    let committing = false;
    try {
      await session.begin();
      const result = await work(session);
      if (beforeCommit) await beforeCommit();
      committing = true;
      await session.commit();
      return result;
    } catch (error) {
      broken = session.broken || this.isConnectionLoss(error);
      if (!broken) broken = !(await session.rollback(committing));
      throw this.classify(error, committing);
    } finally {
      session.end();
      this.release(connection, broken || session.broken);
    }
  }

  async read<T>(work: (query: SqlQuery) => Promise<T>): Promise<T> {
    const connection = await this.acquire();
    let broken = false;
    try {
      return await work(this.autocommit(connection));
    } catch (error) {
      broken = this.isConnectionLoss(error);
      throw this.classify(error, false);
    } finally {
      this.release(connection, broken);
    }
  }
}
