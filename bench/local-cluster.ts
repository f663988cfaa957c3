/**
 * The benchmark's RabbitMQ nodes, driven through `scripts/rabbitmq-cluster.sh` (a set of local
 * nodes with the consistent-hash exchange plugin, beside the machine's own broker, which the
 * benchmark never touches). The script runs the nodes as the `rabbitmq` user, so the benchmark
 * must run as root or as that user.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";

export const CLUSTER_SCRIPT = "scripts/rabbitmq-cluster.sh";

export interface LocalClusterOptions {
  /** The set's node name prefix (--name). */
  name: string;
  /** AMQP port of node 1 (--port); node i listens on port + i - 1. */
  port: number;
  nodes: number;
  /** The repository root, where the script is. */
  root: string;
}

export class LocalCluster {
  private constructor(private readonly options: LocalClusterOptions, readonly urls: string[]) {}

  /**
   * Connects to the set, starting it when not every node runs (a fresh set takes about a
   * minute). `startedHere` says whether the benchmark should stop it at the end.
   */
  static async open(options: LocalClusterOptions): Promise<{ cluster: LocalCluster; startedHere: boolean }> {
    const script = join(options.root, CLUSTER_SCRIPT);
    if (!existsSync(script)) throw new Error(`${CLUSTER_SCRIPT} is not in ${options.root}: run the benchmark from the repository root (npm run bench:scale-out)`);
    const probe = new LocalCluster(options, []);
    // `status` exits non-zero unless every node runs; its lines say which do.
    const status = await probe.run(["status"]).catch((error: Error & { stdout?: string }) => error.stdout ?? "");
    const running = status.split("\n").filter((line) => line.split("\t")[1] === "running").length;
    if (running < options.nodes) await probe.run(["start"], 300_000);
    const urls = (await probe.run(["urls"])).trim().split(",");
    if (urls.length !== options.nodes) throw new Error(`${CLUSTER_SCRIPT} urls listed ${urls.length} nodes, expected ${options.nodes}`);
    // A set that was partly running (a node left down by an interrupted run) is someone's: kept.
    return { cluster: new LocalCluster(options, urls), startedHere: running === 0 };
  }

  /** kill -9 of node n's Erlang VM (1-based); returns once the process is gone. */
  async kill(node: number): Promise<void> {
    await this.run(["kill", String(node)]);
  }

  /** Starts node n again and waits until it runs (it rejoins the cluster by itself). */
  async restart(node: number): Promise<void> {
    await this.run(["restart", String(node)], 300_000);
  }

  /** Stops every node and deletes the set's data. */
  async stop(): Promise<void> {
    await this.run(["stop"], 300_000);
  }

  /** The 1-based number of the node a log names as `host:port`, or undefined. */
  nodeOf(label: string | undefined): number | undefined {
    if (!label) return undefined;
    const port = Number(label.split(":").pop());
    const n = port - this.options.port + 1;
    return Number.isInteger(n) && n >= 1 && n <= this.options.nodes ? n : undefined;
  }

  describe(): string {
    return `${this.options.nodes} local nodes ${this.options.name}1..${this.options.name}${this.options.nodes}@localhost, AMQP ports ${this.options.port}-${this.options.port + this.options.nodes - 1} (${CLUSTER_SCRIPT} --name ${this.options.name} --port ${this.options.port})`;
  }

  private run(args: string[], timeoutMs = 120_000): Promise<string> {
    const { name, port, nodes, root } = this.options;
    const all = ["--name", name, "--port", String(port), "--nodes", String(nodes), ...args];
    return new Promise((resolve, reject) => {
      execFile(join(root, CLUSTER_SCRIPT), all, { cwd: root, timeout: timeoutMs }, (error, stdout, stderr) => {
        if (error) reject(Object.assign(new Error(`${CLUSTER_SCRIPT} ${all.join(" ")} failed: ${error.message}\n${stderr}`), { stdout }));
        else resolve(stdout);
      });
    });
  }
}
