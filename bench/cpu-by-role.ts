/**
 * Where the machine's CPU went during a timed part of the scale-out benchmark, from /proc
 * (Linux): the ledger replicas, this benchmark's nodes of the local RabbitMQ cluster, every
 * PostgreSQL process, this process, and everything else on the machine (other brokers, other
 * work), in cores (CPU seconds per second of wall time) and idle.
 */
import { readFileSync } from "node:fs";
import { cpus } from "node:os";
import { processTicks, readIdleTicks as idleTicks } from "./harness.js";

export type CpuRole = "replicas" | "cluster" | "postgres" | "bench" | "other";
export type CpuCores = Record<CpuRole | "idle", number>;

const USER_HZ = 100;

/** Whether an Erlang VM is one of the cluster's nodes `<prefix><n>@...` (from its environment). */
function isClusterNode(pid: number, nodePrefix: string): boolean {
  try {
    const environment = readFileSync(`/proc/${pid}/environ`, "utf8").split("\0");
    return environment.some((v) => new RegExp(`^RABBITMQ_NODENAME=${nodePrefix}\\d+@`).test(v));
  } catch {
    return false;
  }
}

export class CpuByRole {
  private readonly before = processTicks();
  private readonly idleBefore = idleTicks();
  private readonly startedAt = performance.now();

  constructor(private readonly replicaPids: () => ReadonlySet<number>, private readonly clusterPrefix: string) {}

  /** Processes that started and ended within the window (short-lived ones) are not counted. */
  stop(): CpuCores {
    const seconds = (performance.now() - this.startedAt) / 1000;
    const after = processTicks();
    const replicas = this.replicaPids();
    const cores: CpuCores = { replicas: 0, cluster: 0, postgres: 0, bench: 0, other: 0, idle: 0 };
    for (const [pid, now] of after) {
      const ticks = now.ticks - (this.before.get(pid)?.ticks ?? 0);
      if (ticks <= 0) continue;
      const role: CpuRole = pid === process.pid ? "bench"
        : replicas.has(pid) ? "replicas"
        : now.comm === "postgres" ? "postgres"
        : now.comm === "beam.smp" && isClusterNode(pid, this.clusterPrefix) ? "cluster"
        : "other";
      cores[role] += ticks;
    }
    // /proc/stat counts the idle time of every CPU together: in cores, like the rest.
    cores.idle = (idleTicks() - this.idleBefore);
    for (const key of Object.keys(cores) as Array<keyof CpuCores>) cores[key] = Math.round((cores[key] / USER_HZ / seconds) * 100) / 100;
    return cores;
  }
}

export const CPU_COUNT = cpus().length;
