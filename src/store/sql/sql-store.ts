import type { EventKey } from "../../core/event.js";
import type {
  ClaimResult, DatabaseHealth, InboxClaim, OutboxRecord, QuarantineEntry, QuarantineRecord, Store, StoreTransaction,
} from "../../core/store-contract/store.js";
import { Outbox } from "../../outbox/outbox.js";
import { type HandedOffRow, type OutboxHandoff, OutboxSignal } from "../../core/store-contract/outbox-signal.js";
import type { SqlDriver, SqlSession } from "./sql-driver.js";
import type { SqlQuery, SqlStatement } from "./sql-query.js";

/** The inbox's own SQL on one database: claim, quarantine, redelivery count and the two reads. */
export interface InboxStatements {
  /**
   * Inserts one dedup row per claim and says what each claim found (see StoreTransaction.claim).
   * It receives the whole session, so a dialect can use what its own sessions offer more.
   */
  claim(session: SqlSession<unknown>, handler: string, claims: readonly InboxClaim[]): Promise<ClaimResult[]>;
  quarantine(query: SqlQuery, records: readonly QuarantineRecord[]): Promise<void>;
  countRedelivery(query: SqlQuery, handler: string, key: EventKey): Promise<number>;
  listQuarantine(query: SqlQuery, options: { handler?: string; limit?: number }): Promise<QuarantineEntry[]>;
  countInbox(query: SqlQuery, handler: string, key?: EventKey): Promise<number>;
}

/** The outbox's writes on one database: in the handler's transaction, and the duplicates' resend. */
export interface OutboxWriteStatements {
  /** Writes the rows (a message id already there is skipped); returns how many were new. */
  write(query: SqlQuery, records: readonly OutboxRecord[]): Promise<number>;
  /**
   * Writes the rows leased for `leaseMs` (not due before the lease ends: no claim takes them)
   * and returns them with their ids, for a relay of this process to publish from memory after
   * the commit. Optional: a dialect without it always writes due rows that relays claim. It
   * receives the whole session, so a dialect can use what its own sessions offer more. With
   * `pack` (the relay keeps no sent rows), a dialect may write the records as one packed row
   * (see `HandedOffRow.packedIn`); one that cannot ignores it.
   */
  writeLeased?(session: SqlSession<unknown>, records: readonly OutboxRecord[], leaseMs: number, pack?: boolean): Promise<HandedOffRow[]>;
  /** Makes the unsent rows of these events due now; returns how many. Runs in its own transaction. */
  resend(driver: SqlDriver<unknown>, handler: string, keys: readonly EventKey[]): Promise<number>;
}

/** What a database supplies to become a store: its driver, its SQL, its migrations. */
export interface SqlDialect<Handle> {
  /** `postgres`, `mysql`, `sqlite`: for logs and for what differs in the outbox writer. */
  readonly name: string;
  readonly driver: SqlDriver<Handle>;
  readonly inbox: InboxStatements;
  readonly outbox?: OutboxWriteStatements;
  /** Creates or upgrades the tables; idempotent, safe from several processes at once. */
  migrate(): Promise<void>;
  /** A write that changes nothing (it matches no row) but that a database refusing writes refuses. */
  readonly writeProbe: SqlStatement;
}

/** What one store transaction wrote, and for whom its outbox rows are. */
interface OutboxWrites {
  /** A write of the inbox's own (claim, quarantine, count, outbox) ran: a commit proves the database takes writes. */
  inbox: boolean;
  /** Due rows were written: relays are woken after the commit. */
  written: boolean;
  /** Leased rows written for `handoff`, handed to it after the commit. */
  handedOff: HandedOffRow[];
  /** Epoch ms before the first leased write. */
  leasedAt: number;
  handoff: OutboxHandoff | undefined;
}

/**
 * The one store behind every database: it owns the Store contract (transactions, the handler's
 * view of them, the outbox wake-up, the reads) and leaves to the dialect only how to reach the
 * database and what SQL to send. PostgresStore, MysqlStore, SqliteStore and the stores over a
 * data layer (Kysely, Knex, Drizzle, Prisma) are this class with their dialect.
 */
export class SqlStore<Handle> implements Store<Handle> {
  readonly dialect: string;
  readonly maxConcurrentTransactions: number;
  /** Fired after a commit that wrote outbox rows: in-process relays publish at once. */
  readonly outboxSignal = new OutboxSignal();
  protected readonly sql: SqlDialect<Handle>;

  constructor(sql: SqlDialect<Handle>, maxConcurrentTransactions: number) {
    this.sql = sql;
    this.dialect = sql.name;
    this.maxConcurrentTransactions = maxConcurrentTransactions;
  }

  migrate(): Promise<void> {
    return this.sql.migrate();
  }

  async transaction<T>(work: (tx: StoreTransaction<Handle>) => Promise<T>, beforeCommit?: () => Promise<void> | void): Promise<T> {
    // Taken once: the rows of this transaction go to the relay that was attached when it began.
    const handoff = this.sql.outbox?.writeLeased ? this.outboxSignal.handoff : undefined;
    const outbox: OutboxWrites = { inbox: false, written: false, handedOff: [], leasedAt: 0, handoff };
    const result = await this.sql.driver.transaction((session) => {
      outbox.inbox = false;
      outbox.written = false;
      outbox.handedOff = [];
      return work(this.transactionOf(session, outbox));
    }, beforeCommit);
    // A write of the inbox's own committed: the database takes writes (a read-only one would have refused it).
    if (outbox.inbox) this.sql.driver.health.committed();
    // Committed: only now may the rows leave this process.
    if (outbox.handedOff.length > 0) {
      try {
        handoff!.take(outbox.handedOff, outbox.leasedAt);
      } catch {
        // Committed all the same: the rows stay leased, and a claim sends them once the lease ends.
      }
    }
    if (outbox.written) this.outboxSignal.notify();
    return result;
  }

  private transactionOf(session: SqlSession<Handle>, outbox: OutboxWrites): StoreTransaction<Handle> {
    const { inbox, outbox: outboxSql } = this.sql;
    const tx: StoreTransaction<Handle> = {
      // A getter: some sessions start the transaction only when the handler first uses it.
      get handle() { return session.handle; },
      claim: (handler, claims) => { outbox.inbox = true; return inbox.claim(session, handler, claims); },
      quarantine: (records) => { outbox.inbox = true; return inbox.quarantine(session.query, records); },
      countRedelivery: (handler, key) => { outbox.inbox = true; return inbox.countRedelivery(session.query, handler, key); },
    };
    if (outboxSql) {
      tx.writeOutbox = async (records) => {
        outbox.inbox = true;
        if (outbox.handoff && outboxSql.writeLeased) {
          if (outbox.handedOff.length === 0) outbox.leasedAt = Date.now();
          outbox.handedOff.push(...(await outboxSql.writeLeased(session, records, outbox.handoff.leaseMs, outbox.handoff.packs === true)));
        } else if ((await outboxSql.write(session.query, records)) > 0) {
          outbox.written = true;
        }
      };
    }
    return tx;
  }

  listQuarantine(options: { handler?: string; limit?: number } = {}): Promise<QuarantineEntry[]> {
    return this.sql.driver.read((query) => this.sql.inbox.listQuarantine(query, options));
  }

  countInbox(handler: string, key?: EventKey): Promise<number> {
    return this.sql.driver.read((query) => this.sql.inbox.countInbox(query, handler, key));
  }

  async resendOutbox(handler: string, keys: readonly EventKey[]): Promise<number> {
    const handoff = this.outboxSignal.handoff;
    // Rows the relay of this process holds in memory are being published already.
    const waiting = handoff?.holdsRowsOf ? keys.filter((key) => !handoff.holdsRowsOf!(handler, key)) : keys;
    if (!this.sql.outbox || waiting.length === 0) return 0;
    const due = await this.sql.outbox.resend(this.sql.driver, handler, waiting);
    if (due > 0) this.outboxSignal.notify();
    return due;
  }

  /**
   * The database as the store's last transaction found it: on which node, and while an outage
   * lasts (a refusal, a lost connection), since when, what and why. Costs nothing: nothing is sent.
   */
  databaseHealth(): DatabaseHealth {
    return this.sql.driver.health.snapshot();
  }

  /**
   * Runs one write the database refuses when it refuses all writes (a DELETE that matches no
   * row, on an inbox table), and says what it found: the readiness probe of a service, and what
   * `rabbit-inbox doctor` asks. An empty transaction would not do: a read-only node commits it.
   * Never throws for an outage; the health says it.
   */
  async checkWrites(): Promise<DatabaseHealth> {
    try {
      await this.sql.driver.transaction(({ query }) => query(this.sql.writeProbe));
      this.sql.driver.health.committed();
    } catch (error) {
      // Recorded by the driver when it is an outage; anything else is the caller's to see.
      if (!this.sql.driver.health.snapshot().problem) throw error;
    }
    return this.sql.driver.health.snapshot();
  }

  /**
   * The outbox without an incoming message: `store.outbox.transaction(async (tx, publish) => ...)`
   * writes business rows and outgoing messages in one transaction.
   */
  get outbox(): Outbox<Handle> {
    return new Outbox(this);
  }

  close(): Promise<void> {
    return this.sql.driver.close();
  }
}
