import type { Logger } from "../../core/logger.js";
import type { ServerList } from "../host-list.js";
import { NodePoolSet, type NodeRole, NodeSelector } from "../sql/node-selector.js";
import type { MysqlConnection, MysqlPool } from "./driver.js";
import { classifyMysqlError } from "./errors.js";

/**
 * The role queries: `@@read_only` says whether this node takes writes (a replica has it on; a
 * Galera node has it off). A Galera node (`wsrep_on`) outside the primary component is not ready
 * (`wsrep_ready` OFF) and refuses every statement. SHOW rather than information_schema: MySQL 8
 * has no information_schema.GLOBAL_STATUS, and shows no wsrep variable at all.
 */
async function mysqlRole(connection: MysqlConnection): Promise<NodeRole> {
  const [rows] = await connection.query("SELECT @@GLOBAL.read_only AS read_only");
  if (Number((rows as Array<{ read_only?: unknown }>)[0]?.read_only) === 1) return { readOnly: true, standby: true, label: "read-only (@@read_only = 1)" };
  const [wsrep] = await connection.query("SHOW GLOBAL VARIABLES LIKE 'wsrep_on'");
  if (showValue(wsrep) === "ON") {
    const [ready] = await connection.query("SHOW GLOBAL STATUS LIKE 'wsrep_ready'");
    if (showValue(ready) !== "ON") return { readOnly: true, standby: true, label: "not ready (Galera wsrep_ready = OFF: outside the primary component)" };
  }
  return { readOnly: false, standby: false };
}

function showValue(rows: unknown): string | undefined {
  const value = (rows as Array<{ Value?: unknown }>)[0]?.Value;
  return typeof value === "string" ? value.toUpperCase() : undefined;
}

/** A mysql2 promise pool as far as this class needs it: node pools are made by the caller. */
export interface MysqlNodePool extends MysqlPool {
  on(event: "connection", listener: (connection: { on(event: "error", listener: (error: Error) => void): unknown }) => void): unknown;
}

/**
 * A mysql2 pool over the nodes of a multi-host URL: one node pool per node, connections handed
 * out from the node the NodeSelector chose (by default the first whose `@@read_only` is off:
 * the primary of a primary/replica pair, any synced node of a Galera cluster, in the URL's
 * order), each new connection checked once. A connection destroyed by the store (lost, or
 * refused by its node) makes the next one checked first, so a node that turned read-only or
 * left the Galera primary component is left for the next one that fits.
 */
export class MultiHostMysqlPool implements MysqlPool {
  private readonly pools: NodePoolSet<MysqlNodePool>;
  private readonly selector: NodeSelector<MysqlConnection>;

  constructor(list: ServerList, createPool: (url: string) => MysqlNodePool, logger: Logger) {
    this.pools = new NodePoolSet((node) => createPool(node.url));
    this.selector = new NodeSelector<MysqlConnection>(list.nodes, list.targetSessionAttrs ?? "read-write", {
      database: "MySQL",
      borrow: (node) => this.pools.of(node).getConnection(),
      role: mysqlRole,
      giveBack: (connection, destroy) => (destroy ? connection.destroy() : connection.release()),
      closeNode: (node) => this.pools.close(node),
      classify: (error, node) => classifyMysqlError(error, false, node.label),
    }, logger);
  }

  /** The node connections come from now (`host:port`), once one was chosen. */
  get node(): string | undefined {
    return this.selector.node;
  }

  async getConnection(): Promise<MysqlConnection> {
    const connection = await this.selector.borrow();
    return new Proxy(connection, {
      get: (target, property, receiver) => {
        // A destroyed connection (lost, or refused by its node) makes the next one checked first.
        if (property === "destroy") return () => { this.selector.suspect(); target.destroy(); };
        const value: unknown = Reflect.get(target, property, receiver);
        return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
  }

  end(): Promise<void> {
    return this.pools.endAll();
  }
}
