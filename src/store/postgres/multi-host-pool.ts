import type { Logger } from "../../core/logger.js";
import type { ServerList } from "../host-list.js";
import { NodePoolSet, NodeSelector } from "../sql/node-selector.js";
import { classifyPostgresError } from "./errors.js";
import type { PgClient, PgPool } from "./pg-client.js";

/** A connection is opened within this long, or the node counts as unreachable and the next is tried. */
export const NODE_CONNECT_TIMEOUT_MS = 10_000;

/**
 * A pg pool over the nodes of a multi-host URL: one node pool per node, clients handed out from
 * the node the NodeSelector chose (the first that fits `target_session_attrs`, read-write by
 * default), its role read with one query on each new client. A client destroyed by the store
 * (its session broke, or the node refused work) makes the next one checked first, so a demoted
 * or lost node is left for the new writable one.
 */
export class MultiHostPgPool implements PgPool {
  private readonly errorListeners: Array<(error: Error) => void> = [];
  private readonly pools: NodePoolSet<PgPool>;
  private readonly selector: NodeSelector<PgClient>;

  constructor(list: ServerList, createPool: (url: string) => PgPool, logger: Logger) {
    this.pools = new NodePoolSet((node) => {
      const pool = createPool(node.url);
      for (const listener of this.errorListeners) pool.on("error", listener);
      return pool;
    });
    this.selector = new NodeSelector(list.nodes, list.targetSessionAttrs ?? "read-write", {
      database: "PostgreSQL",
      borrow: (node) => this.pools.of(node).connect(),
      role: async (client) => {
        const { rows } = await client.query("SELECT pg_is_in_recovery() AS standby, current_setting('transaction_read_only') AS read_only");
        return { standby: rows[0]?.standby === true, readOnly: rows[0]?.read_only === "on" };
      },
      giveBack: (client, destroy) => client.release(destroy),
      closeNode: (node) => this.pools.close(node),
      classify: (error, node) => classifyPostgresError(error, false, node.label),
    }, logger);
  }

  /** The node clients come from now (`host:port`), once one was chosen. */
  get node(): string | undefined {
    return this.selector.node;
  }

  async connect(): Promise<PgClient> {
    const client = await this.selector.borrow();
    const release = client.release.bind(client);
    // pg-pool gives each checkout its own release; this one also hears a destroyed session.
    client.release = (destroy?: boolean | Error) => {
      if (destroy) this.selector.suspect();
      release(destroy);
    };
    return client;
  }

  end(): Promise<void> {
    return this.pools.endAll();
  }

  on(event: "error", listener: (error: Error) => void): this {
    this.errorListeners.push(listener);
    for (const pool of this.pools.all()) pool.on(event, listener);
    return this;
  }
}
