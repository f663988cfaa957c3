import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { RabbitNodeSet } from "./cluster.js";

/**
 * The database topologies of test/ha, each started by the project's own script (so tests, CI and
 * people at a shell drive them the same way), on loopback ports of their own:
 * - a PostgreSQL 15 primary with a synchronous standby (scripts/postgres-pair.sh, 5441-5442);
 * - Patroni with etcd managing three PostgreSQL nodes, synchronous_mode (scripts/patroni-cluster.sh,
 *   5443-5445, REST 8008-8010, etcd 23790);
 * - a 3-node MariaDB Galera cluster (scripts/galera-cluster.sh, 3311-3313, group communication 4601-4603);
 * - a RabbitMQ node with the consistent-hash plugin for partitioned ledgers (h1@localhost, 5731),
 *   never the system broker.
 */

const run = promisify(execFile);

/** One of the scripts: runs a command, its stdout; throws with its stderr when it fails. */
export class ScriptedTopology {
  private readonly path: string;

  constructor(readonly name: string, script: string) {
    this.path = fileURLToPath(new URL(`../../scripts/${script}`, import.meta.url));
  }

  async script(...args: string[]): Promise<string> {
    try {
      const { stdout } = await run(this.path, args, { maxBuffer: 16 * 1024 * 1024, timeout: 600_000 });
      return stdout.trim();
    } catch (error) {
      const failed = error as { stderr?: string; stdout?: string; code?: number };
      throw new Error(`${this.name}: ${args.join(" ")} failed (exit ${failed.code}): ${failed.stderr?.trim() || failed.stdout?.trim()}`, { cause: error });
    }
  }

  /** Whether every node runs now (`status` exits 0). */
  async running(): Promise<boolean> {
    return this.script("status").then(() => true, () => false);
  }

  start(): Promise<string> { return this.script("start"); }
  stop(): Promise<string> { return this.script("stop"); }
}

class PostgresPair extends ScriptedTopology {
  /** Node 1 is the primary after a start, node 2 its synchronous standby. */
  url(node: 1 | 2, database = "postgres"): string {
    return `postgres://postgres@127.0.0.1:${5440 + node}/${database}`;
  }
}

class PatroniCluster extends ScriptedTopology {
  url(node: number, database = "postgres"): string {
    return `postgres://postgres@127.0.0.1:${5442 + node}/${database}`;
  }

  /** The libpq multi-host URL of the three nodes, read-write. */
  urls(database = "postgres"): string {
    return `postgres://postgres@127.0.0.1:5443,127.0.0.1:5444,127.0.0.1:5445/${database}?target_session_attrs=read-write`;
  }

  async leader(): Promise<number> {
    return Number(await this.script("leader"));
  }
}

class GaleraCluster extends ScriptedTopology {
  readonly nodes = [1, 2, 3] as const;

  url(node: number, database = "ri"): string {
    return `mysql://ri@127.0.0.1:${3310 + node}/${database}`;
  }

  /** The three nodes, `first` listed first: each replica of a test writes through its own node. */
  urls(first: number, database = "ri"): string {
    const order = [0, 1, 2].map((i) => ((first - 1 + i) % 3) + 1);
    return `mysql://ri@${order.map((n) => `127.0.0.1:${3310 + n}`).join(",")}/${database}`;
  }

  /** Starts a node again unless it runs, and waits until it is Synced. */
  restart(node: number): Promise<string> {
    return this.script("restart", String(node));
  }

  /** SQL as root on one node (through its socket). */
  sql(node: number, statement: string): Promise<string> {
    return this.script("sql", String(node), statement);
  }

  /**
   * How often transactions of different nodes met on the same rows, summed over the running
   * nodes: `certFailures`, local transactions whose certification failed at COMMIT against a write
   * set committed on another node; `bfAborts`, local transactions aborted while running by such a
   * write set. Either reaches the client as 1213 (a deadlock), and is retried.
   */
  async conflicts(): Promise<{ certFailures: number; bfAborts: number }> {
    const [certFailures, bfAborts] = await Promise.all([this.script("cert-failures"), this.script("bf-aborts")]);
    return { certFailures: Number(certFailures), bfAborts: Number(bfAborts) };
  }
}

export const postgresPair = new PostgresPair("postgres-pair", "postgres-pair.sh");
export const patroni = new PatroniCluster("patroni-cluster", "patroni-cluster.sh");
export const galera = new GaleraCluster("galera-cluster", "galera-cluster.sh");

/** The RabbitMQ node of the ha tests: standalone, with the consistent-hash plugin. */
export const haBroker = new RabbitNodeSet({ name: "h", nodes: 1, basePort: 5731 });

/** Every topology, for the project's globalSetup and for CI's cleanup. */
export const haTopologies: readonly ScriptedTopology[] = [postgresPair, patroni, galera];
