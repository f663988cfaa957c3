import { InboxConfigError, TransientStoreError } from "../../core/errors.js";
import type { EventKey } from "../../core/event.js";
import type { Logger } from "../../core/logger.js";
import { silentLogger } from "../../core/logger.js";
import type { QuarantineEntry, Store, StoreTransaction } from "../../core/store.js";
import { classifyPostgresError } from "./errors.js";
import type { PgQuery } from "./pg-client.js";
import type { PostgresExecutor } from "./postgres-executor.js";
import { PostgresInboxSql, statementTag } from "./inbox.js";
import { applyPostgresMigrations } from "./postgres-migrator.js";
import { PostgresOutboxWrites } from "./outbox-relay.js";

export interface PostgresExecutorStoreOptions<Tx> {
  /** The data layer's transactions and statements, e.g. `fromKysely(db)`. */
  executor: PostgresExecutor<Tx>;
  /** Schema of the inbox tables. Default: unqualified names (the connection's search_path). */
  schema?: string;
  logger?: Logger;
  /** Most transactions a consumer may run at once; keep it at or below the data layer's pool size. Default 10. */
  maxConcurrentTransactions?: number;
}

const ABORTED = "25P02"; // in_failed_sql_transaction

function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/**
 * A PostgreSQL store that runs inside the user's own data layer: each inbox transaction is one
 * transaction of that data layer (Kysely, Knex, Drizzle, Prisma), the handler receives its
 * transaction object as `ctx.tx`, and the inbox record, quarantine rows and outbox rows are
 * written through that same transaction with the same SQL as PostgresStore. The data layer
 * commits; a throw rolls back the inbox record and the business writes together.
 *
 * Not here, by design: the outbox relay's claim (it holds row locks while it publishes) and the
 * operator's `operations()`. Run `OutboxRelay` and the `rabbit-inbox` command on a PostgresStore
 * over the same tables (docs/byo-transaction.md).
 */
export class PostgresExecutorStore<Tx> implements Store<Tx> {
  readonly dialect = "postgres";
  readonly maxConcurrentTransactions: number;
  private readonly executor: PostgresExecutor<Tx>;
  private readonly prefix: string;
  private readonly logger: Logger;
  private readonly inboxSql: PostgresInboxSql;
  private readonly outboxWrites: PostgresOutboxWrites;

  constructor(options: PostgresExecutorStoreOptions<Tx>) {
    if (!options.executor) throw new InboxConfigError("PostgresExecutorStore needs an executor, e.g. fromKysely(db)");
    this.executor = options.executor;
    this.prefix = options.schema ? `${quoteIdent(options.schema)}.` : "";
    this.logger = options.logger ?? silentLogger;
    this.maxConcurrentTransactions = options.maxConcurrentTransactions ?? 10;
    this.inboxSql = new PostgresInboxSql(this.prefix, options.schema ?? "");
    this.outboxWrites = new PostgresOutboxWrites(this.prefix, statementTag(options.schema ?? ""), options.schema ?? null);
  }

  /**
   * Runs the PostgreSQL migrations through the data layer, in one of its transactions, statement
   * by statement (some data layers prepare every statement, and a prepared statement holds one
   * command). Same advisory lock and version table as PostgresStore.migrate: either may run it.
   */
  async migrate(): Promise<void> {
    try {
      await this.executor.transaction((tx) => applyPostgresMigrations(this.queryIn(tx), {
        prefix: this.prefix, logger: this.logger, statementByStatement: true,
      }));
    } catch (error) {
      throw this.classify(error, false);
    }
  }

  async transaction<T>(work: (tx: StoreTransaction<Tx>) => Promise<T>, beforeCommit?: () => Promise<void> | void): Promise<T> {
    // Set once `work` and the hook succeeded: whatever fails after that failed in the data
    // layer's COMMIT (or its ROLLBACK after a failed COMMIT), and a lost session there leaves
    // the outcome unknown.
    const state = { committing: false };
    try {
      return await this.executor.transaction(async (tx) => {
        const query = this.queryIn(tx);
        const result = await work({
          handle: tx,
          claim: (handler, claims) => this.inboxSql.claim(query, handler, claims),
          quarantine: (records) => this.inboxSql.quarantine(query, records),
          countRedelivery: (handler, key) => this.inboxSql.countRedelivery(query, handler, key),
          writeOutbox: async (records) => { await this.outboxWrites.write(query, records); },
        });
        if (beforeCommit) await beforeCommit();
        await this.refuseAborted(query);
        state.committing = true;
        return result;
      });
    } catch (error) {
      throw this.classify(error, state.committing);
    }
  }

  /**
   * A handler that caught an SQL error and carried on leaves the transaction aborted, and
   * PostgreSQL answers its COMMIT with ROLLBACK, not an error: most data layers then report
   * success. One trivial statement before COMMIT tells an aborted transaction (it fails with
   * 25P02) from a healthy one, so nothing is reported applied that was not written.
   */
  private async refuseAborted(query: PgQuery): Promise<void> {
    try {
      await query({ text: "SELECT 1", values: [] });
    } catch (error) {
      if (sqlstateOf(this.executor.driverError?.(error) ?? error) === ABORTED) {
        throw new TransientStoreError("the transaction was aborted by an earlier failed statement (did the handler catch an SQL error?); nothing was committed", { cause: error });
      }
      throw error;
    }
  }

  async listQuarantine(options: { handler?: string; limit?: number } = {}): Promise<QuarantineEntry[]> {
    try {
      return await this.inboxSql.listQuarantine(this.queryIn(undefined), options);
    } catch (error) {
      throw this.classify(error, false);
    }
  }

  async countInbox(handler: string, key?: EventKey): Promise<number> {
    try {
      return await this.inboxSql.countInbox(this.queryIn(undefined), handler, key);
    } catch (error) {
      throw this.classify(error, false);
    }
  }

  /** Duplicates make their unsent outbox rows due now; the NOTIFY in the statement wakes the relays. */
  async resendOutbox(handler: string, keys: readonly EventKey[]): Promise<number> {
    try {
      return await this.outboxWrites.resend(this.queryIn(undefined), handler, keys);
    } catch (error) {
      throw this.classify(error, false);
    }
  }

  /** The data layer and its pool belong to the caller: nothing to close here. */
  close(): Promise<void> {
    return Promise.resolve();
  }

  private queryIn(tx: Tx | undefined): PgQuery {
    return (statement) => this.executor.query(statement.text, statement.values, tx);
  }

  /** classifyPostgresError on the driver error under the data layer's wrapper; an unclassified error is rethrown as the data layer threw it. */
  private classify(error: unknown, duringCommit: boolean): unknown {
    const driverError = this.executor.driverError?.(error) ?? error;
    const classified = classifyPostgresError(driverError, duringCommit);
    return classified === driverError ? error : classified;
  }
}

function sqlstateOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}
