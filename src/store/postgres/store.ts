import { InboxConfigError } from "../../core/errors.js";
import type { Logger } from "../../core/logger.js";
import { silentLogger } from "../../core/logger.js";
import type { ClaimOptions, OutboxClaim, OutboxRelayStore, OutboxSubscription } from "../../core/store-contract/outbox-relay-store.js";
import { hasHostList, serverListOf } from "../host-list.js";
import { loadDriver } from "../load-driver.js";
import { SqlRelayStore } from "../sql/sql-relay-store.js";
import { type PgClient, type PgPool, PostgresDriver } from "./driver.js";
import { migratePostgres } from "./migrations.js";
import { PostgresInboxOperations } from "./operations.js";
import { MultiHostPgPool, NODE_CONNECT_TIMEOUT_MS } from "./multi-host-pool.js";
import { PostgresOutboxRelay } from "./outbox-relay.js";
import { postgresTransactionStatements } from "./transaction-statements.js";
import { binaryArrays } from "./array-parameters.js";

export interface PostgresStoreOptions<C extends PgClient> {
  /**
   * A node-postgres (`pg`) Pool, of its JavaScript clients: the store sends batch arrays as binary
   * parameters, which pg-native's clients cannot send. The store never ends a pool it did not create.
   */
  pool: PgPool<C>;
  /** Schema of the inbox tables. Default: unqualified names (the connection's search_path). */
  schema?: string;
  logger?: Logger;
  /** Most transactions a consumer may run at once (its `concurrency` is capped by it). Default 10, the pool size. */
  maxConcurrentTransactions?: number;
}

/** Options of PostgresStore.connect, on top of the store's. */
export interface PostgresConnectOptions extends Omit<PostgresStoreOptions<PgClient>, "pool"> {
  /** Clients in the pool (on each node, with several). Default 10. */
  poolSize?: number;
}

/** `"schema".`, the prefix of every table name, or empty for the connection's search_path. */
export function schemaPrefix(schema: string | undefined): string {
  return schema ? `"${schema.replace(/"/g, '""')}".` : "";
}

/**
 * PostgreSQL store: one pooled client per transaction under READ COMMITTED (see PostgresDriver),
 * the inbox's SQL (inbox.ts, claim.ts), the outbox's writes and its relay side (outbox.ts,
 * outbox-relay.ts) and the operator's operations() on the same pool.
 */
export class PostgresStore<C extends PgClient = PgClient> extends SqlRelayStore<C> implements OutboxRelayStore {
  /** Narrowed from SqlStore's `string`, so `store.dialect === "postgres"` tells a PostgresStore from the others. */
  declare readonly dialect: "postgres";
  private readonly prefix: string;
  protected readonly relay: PostgresOutboxRelay<C>;

  constructor(options: PostgresStoreOptions<C> & { ownsPool?: boolean }) {
    if (!options.pool) throw new InboxConfigError("PostgresStore needs a pool");
    const prefix = schemaPrefix(options.schema);
    const logger = options.logger ?? silentLogger;
    const driver = new PostgresDriver(options.pool, options.ownsPool ?? false, logger);
    super({
      // The store's own clients are node-postgres's: arrays travel binary on every statement.
      ...postgresTransactionStatements(prefix, options.schema, binaryArrays),
      driver,
      migrate: () => driver.transaction(({ query }) => migratePostgres(query, { prefix, logger, statementByStatement: false })),
    }, options.maxConcurrentTransactions ?? 10);
    this.prefix = prefix;
    this.relay = new PostgresOutboxRelay(options.pool, driver, prefix, options.schema, binaryArrays);
  }

  /**
   * Creates a pool from a connection string (loads `pg` on demand) and a store that owns it. The
   * URL may list several nodes in libpq's form, `postgres://u:pw@h1:5441,h2:5442/db`, with
   * `target_session_attrs` (`read-write` by default): the store then works on the first node that
   * fits, and finds the new one after a failover (MultiHostPgPool).
   */
  static async connect(connectionString: string, options: PostgresConnectOptions = {}): Promise<PostgresStore> {
    const pg = await loadDriver<{ Pool: new (config: object) => PgPool }>("pg", "the PostgreSQL store");
    const max = options.poolSize ?? 10;
    const logger = options.logger ?? silentLogger;
    const pool = hasHostList(connectionString)
      // A node that does not answer must not hold the search for the next one.
      ? new MultiHostPgPool(serverListOf(connectionString, 5432), (url) => new pg.Pool({ connectionString: url, max, connectionTimeoutMillis: NODE_CONNECT_TIMEOUT_MS }), logger)
      : new pg.Pool({ connectionString, max });
    // An idle client whose session is terminated emits 'error' on the pool; unhandled, it
    // would crash the process. The pool discards that client by itself.
    pool.on("error", (error) => logger.warn("idle PostgreSQL client lost", { error: error.message }));
    return new PostgresStore({ ...options, pool, ownsPool: true });
  }

  /** Retention, quarantine decisions and schema status, on this store's pool (the `rabbit-inbox` command uses it). */
  operations(): PostgresInboxOperations {
    return new PostgresInboxOperations(this.sql.driver, this.prefix);
  }

  /** Row locks live in the rows themselves: a claim skips the rows of the previous one and waits for nothing it holds. */
  readonly overlappingClaims = true;

  claimOutbox(options: Pick<ClaimOptions, "limit" | "holding">): Promise<OutboxClaim | null> {
    return this.relay.claim(options.limit, options.holding);
  }

  /** LISTEN on a dedicated pool client (it stays checked out until the subscription closes). */
  listenOutbox(onWake: () => void, onLost: (error: Error) => void): Promise<OutboxSubscription> {
    return this.relay.listen(onWake, onLost);
  }
}
