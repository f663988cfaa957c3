import { afterEach, beforeEach } from "vitest";
import { BrokerClient } from "../../examples/ledger/driver/broker-client.js";
import { type CliBalance, type CliQuarantine, cliBalances, cliQuarantine } from "../../examples/ledger/driver/ledger-cli.js";
import { LedgerProcess, type LedgerProcessOptions, killAllLedgerProcesses } from "../../examples/ledger/driver/ledger-process.js";
import { type LedgerTables, readLedgerTables } from "../../examples/ledger/driver/ledger-tables.js";
import { ledgerExchangeNames, ledgerQueueNames, partitionExchangeNames, randomQueueName } from "../../examples/ledger/driver/ledger-topology.js";
import type { ExitStatus } from "../../examples/ledger/driver/wait-until.js";
import { createEmptyDatabase } from "./databases.js";
import type { TestDatabaseKind } from "./test-databases.js";

/**
 * Per-test context for the ledger integration tests: a random work queue (and its
 * `.quarantine`, `.retry.<n>` and `.balance-changed` exchange), a fresh PostgreSQL schema, MySQL/MariaDB database or SQLite
 * file, a broker client, and teardown that kills every ledger process the test started and deletes its queues and database.
 */

export interface LedgerTestContext {
  readonly kind: TestDatabaseKind;
  readonly queue: string;
  readonly quarantineQueue: string;
  readonly databaseUrl: string;
  readonly broker: BrokerClient;
  /** Starts a ledger process on this test's queue and database. */
  start(options?: Partial<LedgerProcessOptions>): Promise<LedgerProcess>;
  /** Raw inbox, quarantine and account rows. */
  tables(): Promise<LedgerTables>;
  /** `npm run --silent ledger -- balances --json` and `... quarantine --json`, run concurrently. */
  cli(): Promise<{ balances: CliBalance[]; quarantine: CliQuarantine[] }>;
  /**
   * Waits until no message is ready, then SIGTERMs each process (it drains in-flight work) and
   * returns their exits.
   */
  stopWhenIdle(processes: readonly LedgerProcess[], timeoutMs?: number): Promise<ExitStatus[]>;
  /** Work-queue depth (ready + unacked) once no process consumes it. */
  depth(queue?: string): Promise<number>;
}

interface State {
  queue: string;
  databaseUrl: string;
  broker: BrokerClient;
  remove: () => Promise<void>;
}

/** Where a test's ledgers run: another broker (a cluster's node list) and partitioned consumption. */
export interface LedgerTestOptions {
  /** AMQP_URL of the ledger processes (may list several nodes); the test's own client uses the last. */
  amqpUrl?: string;
  /** LEDGER_PARTITIONS of the ledger processes; their partition queues are deleted after each test. */
  partitions?: number;
  /** Which service the processes run: `ledger` (default) or `nest`. */
  app?: LedgerProcessOptions["app"];
}

/** Registers beforeEach/afterEach in the calling describe block and returns the live context. */
export function useLedgerTest(kind: TestDatabaseKind, options: LedgerTestOptions = {}): LedgerTestContext {
  let state: State | undefined;
  const current = (): State => {
    if (!state) throw new Error("ledger test context used outside a test");
    return state;
  };

  beforeEach(async () => {
    const broker = await BrokerClient.connect(options.amqpUrl?.split(",").at(-1));
    const queue = randomQueueName();
    const database = await createEmptyDatabase(kind);
    state = { queue, broker, databaseUrl: database.url, remove: database.remove };
    await broker.declare(queue);
  });

  afterEach(async () => {
    const s = state;
    state = undefined;
    await killAllLedgerProcesses();
    if (!s) return;
    await s.broker.deleteQueues(...ledgerQueueNames(s.queue, options.partitions));
    await s.broker.deleteExchanges(...ledgerExchangeNames(s.queue), ...(options.partitions ? partitionExchangeNames(s.queue) : []));
    await s.broker.close();
    await s.remove();
  });

  return {
    kind,
    get queue() { return current().queue; },
    get quarantineQueue() { return `${current().queue}.quarantine`; },
    get databaseUrl() { return current().databaseUrl; },
    get broker() { return current().broker; },
    start: (processOptions = {}) => LedgerProcess.start({
      queue: current().queue, databaseUrl: current().databaseUrl,
      ...(options.amqpUrl ? { amqpUrl: options.amqpUrl } : {}), ...(options.partitions ? { partitions: options.partitions } : {}),
      ...(options.app ? { app: options.app } : {}),
      ...processOptions,
    }),
    tables: () => readLedgerTables(current().databaseUrl),
    async cli() {
      const [balances, quarantine] = await Promise.all([cliBalances(current().databaseUrl), cliQuarantine(current().databaseUrl)]);
      return { balances, quarantine };
    },
    async stopWhenIdle(processes, timeoutMs = 60_000) {
      await current().broker.waitForNoReady(current().queue, { watch: processes, timeoutMs });
      return Promise.all(processes.map((p) => p.stop()));
    },
    depth: (queue) => current().broker.depthWithoutConsumers(queue ?? current().queue),
  };
}

/** A deterministic pseudo-random sequence (mulberry32), so a failing run can be replayed. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
