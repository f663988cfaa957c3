import { InboxConfigError, TransientStoreError } from "../../core/errors.js";
import type { EventKey } from "../../core/event.js";
import type { Logger } from "../../core/logger.js";
import { silentLogger } from "../../core/logger.js";
import type { QuarantineEntry, Store, StoreTransaction } from "../../core/store.js";
import { Outbox } from "../../outbox/outbox.js";
import { OutboxSignal } from "../../outbox/outbox-signal.js";
import type { OutboxClaim, OutboxRelayStore, OutboxSubscription } from "../../outbox/outbox-store.js";
import { loadDriver } from "../load-driver.js";
import { classifyPostgresError, isPostgresConnectionLoss } from "./errors.js";
import { DeferredBegin } from "./deferred-begin.js";
import { type PgQuery, queryOnPool } from "./pg-client.js";
import { PostgresInboxSql, statementTag } from "./inbox.js";
import { applyPostgresMigrations } from "./postgres-migrator.js";
import { PostgresOutbox } from "./outbox-relay.js";
import { PostgresInboxOperations } from "./operations.js";
import { PreparedStatements } from "./prepared-statements.js";

/** The slice of node-postgres the store uses; `pg.Pool` and `pg.PoolClient` fit it. */
export interface PgQueryResult {
  rows: Array<Record<string, unknown>>;
  rowCount: number | null;
}
export interface PgClient {
  query(config: { text: string; values?: unknown[]; name?: string }): Promise<PgQueryResult>;
  query(text: string, values?: unknown[]): Promise<PgQueryResult>;
  release(destroy?: boolean | Error): void;
  on(event: "error", listener: (error: Error) => void): unknown;
  removeListener(event: "error", listener: (error: Error) => void): unknown;
}
export interface PgPool<C extends PgClient = PgClient> {
  connect(): Promise<C>;
  end(): Promise<void>;
  on(event: "error", listener: (error: Error) => void): unknown;
}

export interface PostgresStoreOptions<C extends PgClient> {
  /** A pg Pool. The store never ends a pool it did not create. */
  pool: PgPool<C>;
  /** Schema of the inbox tables. Default: unqualified names (the connection's search_path). */
  schema?: string;
  logger?: Logger;
  /** Most transactions a consumer may run at once (its `concurrency` is capped by it). Default 10, the pool size. */
  maxConcurrentTransactions?: number;
}

function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/**
 * PostgreSQL store: one pooled client per transaction under READ COMMITTED. A concurrent insert
 * of the same key waits for the other transaction, then sees its row (duplicate/conflict) or
 * inserts (it rolled back): the primary key is the backstop, never a prior SELECT.
 */
export class PostgresStore<C extends PgClient = PgClient> implements Store<C>, OutboxRelayStore {
  readonly dialect = "postgres";
  readonly maxConcurrentTransactions: number;
  private readonly pool: PgPool<C>;
  private readonly ownsPool: boolean;
  private readonly prefix: string;
  private readonly logger: Logger;
  /** Claim, quarantine and the Store reads: the same SQL as PostgresExecutorStore's. */
  private readonly inboxSql: PostgresInboxSql;
  /** Fired after a commit that wrote outbox rows: in-process relays publish at once. */
  readonly outboxSignal = new OutboxSignal();
  private readonly outboxSql: PostgresOutbox<C>;
  /** Lets a transaction's first statement go as `BEGIN; EXECUTE` once its client prepared it. */
  private readonly preparedStatements = new PreparedStatements();

  constructor(options: PostgresStoreOptions<C> & { ownsPool?: boolean }) {
    if (!options.pool) throw new InboxConfigError("PostgresStore needs a pool");
    this.pool = options.pool;
    this.ownsPool = options.ownsPool ?? false;
    this.prefix = options.schema ? `${quoteIdent(options.schema)}.` : "";
    this.logger = options.logger ?? silentLogger;
    this.maxConcurrentTransactions = options.maxConcurrentTransactions ?? 10;
    this.inboxSql = new PostgresInboxSql(this.prefix, options.schema ?? "");
    this.outboxSql = new PostgresOutbox(this.pool, this.prefix, statementTag(options.schema ?? ""), options.schema ?? null);
  }

  /** Creates a pool from a connection string (loads `pg` on demand) and a store that owns it. */
  static async connect(
    connectionString: string,
    options: Omit<PostgresStoreOptions<PgClient>, "pool"> & { poolSize?: number } = {},
  ): Promise<PostgresStore> {
    const pg = await loadDriver<{ Pool: new (config: object) => PgPool }>("pg", "the PostgreSQL store");
    const pool = new pg.Pool({ connectionString, max: options.poolSize ?? 10 });
    const logger = options.logger ?? silentLogger;
    // An idle client whose session is terminated emits 'error' on the pool; unhandled, it
    // would crash the process. The pool discards that client by itself.
    pool.on("error", (error) => logger.warn("idle PostgreSQL client lost", { error: error.message }));
    return new PostgresStore({ ...options, pool, ownsPool: true });
  }

  async migrate(): Promise<void> {
    const client = await this.pool.connect();
    let broken = false;
    try {
      await client.query("BEGIN");
      await applyPostgresMigrations((statement) => client.query(statement.text, statement.values), {
        prefix: this.prefix, logger: this.logger, statementByStatement: false,
      });
      await client.query("COMMIT");
    } catch (error) {
      broken = isPostgresConnectionLoss(error);
      if (!broken) await client.query("ROLLBACK").catch(() => { broken = true; });
      throw classifyPostgresError(error);
    } finally {
      client.release(broken);
    }
  }

  async transaction<T>(work: (tx: StoreTransaction<C>) => Promise<T>, beforeCommit?: () => Promise<void> | void): Promise<T> {
    let client: C;
    try {
      client = await this.pool.connect();
    } catch (error) {
      throw classifyPostgresError(error);
    }
    let broken = false;
    let committing = false;
    // pg-pool removes its error listener from a checked-out client: a session terminated while
    // no query runs (between statements, in a hook) would be an uncaught 'error' event.
    const onError = (error: Error) => {
      broken = true;
      this.logger.warn("PostgreSQL session lost during a transaction", { error: error.message });
    };
    client.on("error", onError);
    const outbox = { written: false };
    const session = new DeferredBegin(client, this.preparedStatements);
    try {
      const result = await work(this.transactionFor(session, outbox));
      if (beforeCommit) await beforeCommit();
      // Nothing was sent: there is nothing to commit.
      if (!session.started) return result;
      await session.settled();
      committing = true;
      const committed = await client.query("COMMIT");
      // PostgreSQL answers COMMIT of an aborted transaction (a handler caught an SQL error and
      // carried on) with ROLLBACK, not an error: nothing was written, so this must not ack.
      if ((committed as { command?: string }).command === "ROLLBACK") {
        committing = false;
        throw new TransientStoreError("the transaction was aborted by an earlier failed statement (did the handler catch an SQL error?); nothing was committed");
      }
      if (outbox.written) this.outboxSignal.notify();
      return result;
    } catch (error) {
      broken ||= isPostgresConnectionLoss(error);
      if (!broken && !committing && session.started) {
        await client.query("ROLLBACK").catch(() => { broken = true; });
      }
      throw classifyPostgresError(error, committing);
    } finally {
      client.removeListener("error", onError);
      // A client whose session broke is destroyed, never returned to the pool.
      client.release(broken);
    }
  }

  private transactionFor(session: DeferredBegin<C>, outbox: { written: boolean }): StoreTransaction<C> {
    const query: PgQuery = (statement) => session.query(statement);
    return {
      get handle() { return session.handle; },
      claim: (handler, claims) => this.inboxSql.claim(query, handler, claims, (savepoint, statement) => session.queryInSavepoint(savepoint, statement)),
      quarantine: (records) => this.inboxSql.quarantine(query, records),
      countRedelivery: (handler, key) => this.inboxSql.countRedelivery(query, handler, key),
      writeOutbox: async (records) => {
        if ((await this.outboxSql.write(query, records)) > 0) outbox.written = true;
      },
    };
  }

  listQuarantine(options: { handler?: string; limit?: number } = {}): Promise<QuarantineEntry[]> {
    return this.inboxSql.listQuarantine((statement) => this.query(statement.text, statement.values), options);
  }

  /** Retention, quarantine decisions and schema status, on this store's pool (the `rabbit-inbox` command uses it). */
  operations(): PostgresInboxOperations {
    return new PostgresInboxOperations(this.pool, this.prefix, this.logger);
  }

  countInbox(handler: string, key?: EventKey): Promise<number> {
    return this.inboxSql.countInbox((statement) => this.query(statement.text, statement.values), handler, key);
  }

  /**
   * The outbox without an incoming message: `store.outbox.transaction(async (client, publish) => ...)`
   * writes business rows and outgoing messages in one transaction.
   */
  get outbox(): Outbox<C> {
    return new Outbox(this);
  }

  async resendOutbox(handler: string, keys: readonly EventKey[]): Promise<number> {
    const due = await this.outboxSql.resend(handler, keys);
    if (due > 0) this.outboxSignal.notify();
    return due;
  }

  claimOutbox(options: { limit: number }): Promise<OutboxClaim | null> {
    return this.outboxSql.claim(options.limit);
  }

  cleanupOutbox(sentBefore: Date, limit: number): Promise<number> {
    return this.outboxSql.cleanup(sentBefore, limit);
  }

  /** LISTEN on a dedicated pool client (it stays checked out until the subscription closes). */
  listenOutbox(onWake: () => void, onLost: (error: Error) => void): Promise<OutboxSubscription> {
    return this.outboxSql.listen(onWake, onLost);
  }

  private query(text: string, values: unknown[]): Promise<PgQueryResult> {
    return queryOnPool(this.pool, text, values);
  }

  async close(): Promise<void> {
    if (this.ownsPool) await this.pool.end();
  }
}
