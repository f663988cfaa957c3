import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import amqp from "amqplib";

/**
 * RabbitMQ nodes the tests start themselves, beside the system broker: a 3-node cluster for
 * failover tests and a standalone node for broker-wide settings. Every operation goes through
 * scripts/rabbitmq-cluster.sh, so tests, CI and people at a shell drive the nodes the same way.
 */

const run = promisify(execFile);
const script = fileURLToPath(new URL("../../scripts/rabbitmq-cluster.sh", import.meta.url));

/** Node numbers start at 1, like the node names (`c1@localhost`). */
export type NodeNumber = number;

export interface NodeSetOptions {
  /** Node name prefix: node i is `<name>i@localhost`. */
  name: string;
  nodes: number;
  /** AMQP port of node 1; node i listens on basePort + i - 1. */
  basePort: number;
}

export interface QuorumQueueState {
  leader: NodeNumber | undefined;
  /** Nodes holding a replica, online or not. */
  members: NodeNumber[];
  /** Members whose replica is running. */
  online: NodeNumber[];
  messages: number;
}

interface ListedQueue {
  name: string;
  type: string;
  leader?: string;
  members?: string[] | string;
  online?: string[] | string;
  messages?: number;
}

export class RabbitNodeSet {
  readonly name: string;
  readonly nodeCount: number;
  readonly basePort: number;

  constructor(options: NodeSetOptions) {
    this.name = options.name;
    this.nodeCount = options.nodes;
    this.basePort = options.basePort;
  }

  /** The node numbers 1..N. */
  get nodes(): NodeNumber[] {
    return Array.from({ length: this.nodeCount }, (_, i) => i + 1);
  }

  url(node: NodeNumber): string {
    this.check(node);
    return `amqp://guest:guest@127.0.0.1:${this.basePort + node - 1}`;
  }

  get urls(): string[] {
    return this.nodes.map((n) => this.url(n));
  }

  nodeName(node: NodeNumber): string {
    this.check(node);
    return `${this.name}${node}@localhost`;
  }

  /** `c2@localhost` -> 2; undefined for a name outside this set. */
  nodeNumber(nodeName: string): NodeNumber | undefined {
    const match = new RegExp(`^${this.name}(\\d+)@localhost$`).exec(nodeName);
    const n = match ? Number(match[1]) : NaN;
    return n >= 1 && n <= this.nodeCount ? n : undefined;
  }

  /** Runs the script's command for this set; its stdout. Throws with the script's stderr when it fails. */
  async script(...args: string[]): Promise<string> {
    const flags = ["--name", this.name, "--nodes", String(this.nodeCount), "--port", String(this.basePort)];
    try {
      const { stdout } = await run(script, [...flags, ...args], { maxBuffer: 16 * 1024 * 1024 });
      return stdout;
    } catch (error) {
      const failed = error as { stderr?: string; stdout?: string; code?: number };
      throw new Error(`rabbitmq-cluster.sh ${args.join(" ")} failed (exit ${failed.code}): ${failed.stderr?.trim() || failed.stdout?.trim()}`, { cause: error });
    }
  }

  /** Starts the nodes that are not running (a running set is reused); resolves when all run. */
  async start(): Promise<void> {
    await this.script("start");
  }

  /** Stops every node and deletes the set's data. */
  async stop(): Promise<void> {
    await this.script("stop");
  }

  /** Node numbers whose Erlang VM is alive (booting, running or with its app stopped). */
  async runningNodes(): Promise<NodeNumber[]> {
    const out = await this.script("running");
    return this.numbersOf(out.split("\n").filter((line) => line !== ""));
  }

  /** kill -9 of the node's Erlang VM: a crash, not a shutdown. Resolves once the process is gone. */
  killNode(node: NodeNumber): Promise<void> {
    return this.onNode("kill", node);
  }

  /** A clean shutdown of one node (its data stays). */
  stopNode(node: NodeNumber): Promise<void> {
    return this.onNode("stop-node", node);
  }

  /**
   * Freezes the node's Erlang VM (SIGSTOP): its connections stay open and nothing it holds
   * moves, and the other nodes do not count it out, until resumeNode. A start resumes it too.
   */
  pauseNode(node: NodeNumber): Promise<void> {
    return this.onNode("pause", node);
  }

  /** Lets a paused node go on (SIGCONT). */
  resumeNode(node: NodeNumber): Promise<void> {
    return this.onNode("resume", node);
  }

  /** Starts a killed or stopped node again; resolves when it accepts AMQP connections. */
  async restartNode(node: NodeNumber): Promise<void> {
    await this.onNode("restart", node);
    await this.waitForAmqp(node);
  }

  /** `rabbitmqctl -n <node> ...args`; its stdout. */
  async ctl(node: NodeNumber, ...args: string[]): Promise<string> {
    this.check(node);
    return this.script("ctl", String(node), ...args);
  }

  /** Cluster members the node's cluster currently sees running (asked through `via`). */
  async clusterRunningNodes(via: NodeNumber): Promise<NodeNumber[]> {
    const printed = await this.ctl(via, "-q", "eval", 'io:format("~s~n", [lists:join(",", [atom_to_list(N) || N <- rabbit_nodes:all_running()])]).');
    return this.numbersOf(printed.split("\n")[0]!.split(","));
  }

  /** Every disc member of the cluster, running or not (asked through `via`). */
  async clusterMembers(via: NodeNumber): Promise<NodeNumber[]> {
    const printed = await this.ctl(via, "-q", "eval", 'io:format("~s~n", [lists:join(",", [atom_to_list(N) || N <- rabbit_mnesia:cluster_nodes(all)])]).');
    return this.numbersOf(printed.split("\n")[0]!.split(","));
  }

  /** A quorum queue's leader, members and online replicas, asked through the first running node that answers. */
  async quorumQueue(queue: string): Promise<QuorumQueueState | undefined> {
    const listed = await this.listQueues();
    const found = listed.find((q) => q.name === queue);
    if (!found) return undefined;
    if (found.type !== "quorum") throw new Error(`queue ${queue} is a ${found.type} queue, not a quorum queue`);
    const names = (value: string[] | string | undefined) => (Array.isArray(value) ? value : value ? [value] : []);
    return {
      leader: found.leader ? this.nodeNumber(found.leader) : undefined,
      members: this.numbersOf(names(found.members)),
      online: this.numbersOf(names(found.online)),
      messages: found.messages ?? 0,
    };
  }

  /** The node number of a quorum queue's leader, waiting until it has one. */
  async leaderOf(queue: string, timeoutMs = 60_000): Promise<NodeNumber> {
    const state = await this.waitForQuorumQueue(queue, (s) => s.leader !== undefined, timeoutMs, "a leader");
    return state.leader!;
  }

  /**
   * Waits until a quorum queue's state satisfies `ready` (e.g. every node online and a leader
   * elected) and returns that state; throws with the last state seen after `timeoutMs`.
   */
  async waitForQuorumQueue(queue: string, ready: (state: QuorumQueueState) => boolean, timeoutMs = 60_000, what = "the expected state"): Promise<QuorumQueueState> {
    const deadline = Date.now() + timeoutMs;
    let last: QuorumQueueState | undefined;
    let lastError: unknown;
    for (;;) {
      try {
        last = await this.quorumQueue(queue);
        if (last && ready(last)) return last;
      } catch (error) {
        lastError = error;
      }
      if (Date.now() > deadline) {
        throw new Error(`quorum queue ${queue} did not reach ${what} within ${timeoutMs} ms; last seen: ${JSON.stringify(last) ?? String(lastError)}`);
      }
      await sleep(500);
    }
  }

  /** Waits until a quorum queue has a leader and a running replica on each of `nodes` (default: all). */
  async waitForQuorumMembers(queue: string, nodes: NodeNumber[] = this.nodes, timeoutMs = 60_000): Promise<QuorumQueueState> {
    return this.waitForQuorumQueue(queue, (s) => s.leader !== undefined && nodes.every((n) => s.members.includes(n) && s.online.includes(n)),
      timeoutMs, `a leader and online replicas on nodes ${nodes.join(", ")}`);
  }

  /** Resolves once an AMQP connection to the node opens (and closes it). */
  async waitForAmqp(node: NodeNumber, timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      try {
        const connection = await this.connect(node);
        await connection.close();
        return;
      } catch (error) {
        if (Date.now() > deadline) throw new Error(`${this.nodeName(node)} does not accept AMQP connections after ${timeoutMs} ms: ${String(error)}`, { cause: error });
        await sleep(250);
      }
    }
  }

  /**
   * A connection to one node. A node that is starting, being reset or killed may close it with
   * 541 at any time: an 'error' event without a listener would be an uncaught exception, so it
   * has one; what the caller does next on the connection fails instead.
   */
  async connect(node: NodeNumber): Promise<amqp.ChannelModel> {
    const connection = await amqp.connect(this.url(node));
    connection.on("error", () => undefined);
    return connection;
  }

  /** Runs `work` with a channel on a fresh connection to one node; closes it afterwards. */
  async withChannel<T>(node: NodeNumber, work: (channel: amqp.Channel) => Promise<T>): Promise<T> {
    const connection = await this.connect(node);
    try {
      const channel = await connection.createChannel();
      channel.on("error", () => undefined);
      return await work(channel);
    } finally {
      await connection.close().catch(() => undefined);
    }
  }

  /** Declares a durable quorum queue through one node (extra arguments merged in). */
  async declareQuorumQueue(node: NodeNumber, queue: string, args: Record<string, unknown> = {}): Promise<void> {
    await this.withChannel(node, (ch) => ch.assertQueue(queue, { durable: true, arguments: { "x-queue-type": "quorum", ...args } }));
  }

  /** Publishes bodies (objects as JSON) persistently with confirms through one node. */
  async publish(node: NodeNumber, queue: string, bodies: ReadonlyArray<object | string | Buffer>, options: amqp.Options.Publish = {}): Promise<void> {
    const connection = await this.connect(node);
    try {
      const channel = await connection.createConfirmChannel();
      for (const body of bodies) {
        const bytes = Buffer.isBuffer(body) ? body : Buffer.from(typeof body === "string" ? body : JSON.stringify(body));
        channel.sendToQueue(queue, bytes, { persistent: true, contentType: "application/json", ...options });
      }
      await channel.waitForConfirms();
    } finally {
      await connection.close().catch(() => undefined);
    }
  }

  /** Takes every ready message off a queue through one node (acked), in order. */
  async drain(node: NodeNumber, queue: string): Promise<amqp.GetMessage[]> {
    return this.withChannel(node, async (ch) => {
      const out: amqp.GetMessage[] = [];
      for (;;) {
        const m = await ch.get(queue, { noAck: true });
        if (!m) return out;
        out.push(m);
      }
    });
  }

  /** Deletes queues through the first running node that accepts the connection; missing queues are fine. */
  async deleteQueues(...queues: string[]): Promise<void> {
    for (const node of await this.runningNodes()) {
      try {
        await this.withChannel(node, async (ch) => {
          for (const queue of queues) await ch.deleteQueue(queue);
        });
        return;
      } catch {
        // that node may be booting or gone: try the next
      }
    }
  }

  private async listQueues(): Promise<ListedQueue[]> {
    let lastError: unknown = new Error(`no node of ${this.name} is running`);
    for (const node of await this.runningNodes()) {
      try {
        const out = await this.ctl(node, "-q", "list_queues", "name", "type", "leader", "members", "online", "messages", "--formatter", "json");
        return JSON.parse(out) as ListedQueue[];
      } catch (error) {
        lastError = error;
      }
    }
    throw lastError;
  }

  private numbersOf(names: string[]): NodeNumber[] {
    return names
      .map((n) => this.nodeNumber(n.trim()))
      .filter((n): n is NodeNumber => n !== undefined)
      .sort((a, b) => a - b);
  }

  /** The script's command for one node of the set. */
  private async onNode(command: "kill" | "stop-node" | "pause" | "resume" | "restart", node: NodeNumber): Promise<void> {
    this.check(node);
    await this.script(command, String(node));
  }

  private check(node: NodeNumber): void {
    if (!Number.isInteger(node) || node < 1 || node > this.nodeCount) {
      throw new RangeError(`node number must be 1..${this.nodeCount} for ${this.name}, got ${node}`);
    }
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * The 3-node cluster of test/cluster (c1..c3@localhost, AMQP 5701-5703). TEST_CLUSTER_NAME and
 * TEST_CLUSTER_PORT pick another set, e.g. to run the cluster tests beside a cluster in use.
 */
export const cluster = new RabbitNodeSet({
  name: process.env.TEST_CLUSTER_NAME || "c", nodes: 3, basePort: Number(process.env.TEST_CLUSTER_PORT || 5701),
});

/** One node of its own for tests that change broker-wide settings (s1@localhost, AMQP 5711). */
export const standalone = new RabbitNodeSet({ name: "s", nodes: 1, basePort: 5711 });

export const clusterUrls: string[] = cluster.urls;
export const killNode = (node: NodeNumber): Promise<void> => cluster.killNode(node);
export const restartNode = (node: NodeNumber): Promise<void> => cluster.restartNode(node);
export const stopNode = (node: NodeNumber): Promise<void> => cluster.stopNode(node);

/**
 * vitest globalSetup body for a set: starts it unless some node of it already runs, and returns
 * the teardown that stops it only if this run started it (a cluster someone started by hand is
 * left as it was).
 */
export async function startForTestRun(set: RabbitNodeSet): Promise<() => Promise<void>> {
  const runningBefore = await set.runningNodes();
  await set.start();
  return async () => {
    if (runningBefore.length === 0) await set.stop();
  };
}
