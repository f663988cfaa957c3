import { StoreUnavailableError, TransientStoreError, describeError } from "../../core/errors.js";
import type { Logger } from "../../core/logger.js";
import type { ServerNode, TargetSessionAttrs } from "../host-list.js";

/** What a node says it is, read on one of its connections. */
export interface NodeRole {
  /** Its sessions cannot write (a standby, `default_transaction_read_only`, `@@read_only`). */
  readOnly: boolean;
  /** It replays another node's changes (PostgreSQL in recovery). */
  standby: boolean;
  /** How logs and errors name this role when the node does not fit, e.g. `read-only (@@read_only = 1)`. */
  label?: string;
}

/** A database's side of node selection: one pool per node, and how to read a node's role. */
export interface NodePools<C> {
  /** "PostgreSQL", "MySQL": for errors. */
  readonly database: string;
  /** A connection from this node's pool (the pool is made on first use). */
  borrow(node: ServerNode): Promise<C>;
  /** The role of the node `connection` is on; throws when the node refuses to answer. */
  role(connection: C): Promise<NodeRole>;
  /** Gives the connection back to its pool, or destroys it. */
  giveBack(connection: C, destroy: boolean): void;
  /** Ends this node's pool: idle connections now, borrowed ones when they are given back. */
  closeNode(node: ServerNode): void;
  /** The dialect's classification of a failure to connect or to read the role. */
  classify(error: unknown, node: ServerNode): unknown;
}

/**
 * One pool per node, made from the node's URL on first use. Closing a node ends its pool: its
 * idle connections go at once, the borrowed ones when they are given back.
 */
export class NodePoolSet<P extends { end(): Promise<void> }> {
  private readonly pools = new Map<ServerNode, P>();

  constructor(private readonly create: (node: ServerNode) => P) {}

  of(node: ServerNode): P {
    let pool = this.pools.get(node);
    if (!pool) {
      pool = this.create(node);
      this.pools.set(node, pool);
    }
    return pool;
  }

  close(node: ServerNode): void {
    const pool = this.pools.get(node);
    this.pools.delete(node);
    pool?.end().catch(() => undefined);
  }

  /** The pools made so far. */
  all(): P[] {
    return [...this.pools.values()];
  }

  async endAll(): Promise<void> {
    const pools = this.all();
    this.pools.clear();
    await Promise.all(pools.map((pool) => pool.end()));
  }
}

/** Searches after which a borrow gives up and lets the caller's retries take over. */
const SEARCHES_PER_BORROW = 2;

/**
 * Finds, among a URL's nodes, the one `target` asks for, and keeps using it while it fits: the
 * multi-host failover of libpq, for drivers that have none (node-postgres, mysql2). Nodes are
 * tried in the URL's order and the first that fits is kept; its connections are checked once,
 * when new. After the node fails (a connection to it cannot be opened, or one of its sessions
 * was destroyed because it broke or refused work), the next connection is checked again, and a
 * node that no longer fits is left: its pool is ended and the search starts over, so a failover
 * leads to the new writable node without a restart. One search runs at a time; concurrent
 * borrowers wait for it.
 */
export class NodeSelector<C extends object> {
  private current: ServerNode | undefined;
  /** A session of the current node was destroyed: check the next connection handed out. */
  private recheck = false;
  private readonly checked = new WeakSet<C>();
  private searching: Promise<void> | undefined;

  constructor(
    private readonly nodes: readonly ServerNode[],
    private readonly target: TargetSessionAttrs,
    private readonly pools: NodePools<C>,
    private readonly logger: Logger,
  ) {}

  /** The node in use now (`host:port`), if one was chosen. */
  get node(): string | undefined {
    return this.current?.label;
  }

  /** Marks the current node as doubtful: the next connection is checked before it is used. */
  suspect(): void {
    this.recheck = true;
  }

  async borrow(): Promise<C> {
    for (let search = 1; ; search++) {
      if (!this.current) await (this.searching ??= this.search().finally(() => { this.searching = undefined; }));
      const node = this.current!;
      let connection: C;
      try {
        connection = await this.pools.borrow(node);
      } catch (error) {
        const classified = this.pools.classify(error, node);
        this.leave(node, `cannot connect: ${describeError(classified)}`);
        if (search >= SEARCHES_PER_BORROW) throw classified;
        continue;
      }
      if (!this.recheck && this.checked.has(connection)) return connection;
      this.recheck = false;
      const unfit = await this.unfit(connection, node);
      if (unfit === undefined) return connection;
      this.pools.giveBack(connection, true);
      this.leave(node, unfit.why);
      // eslint-disable-next-line @typescript-eslint/only-throw-error -- the dialect's classification, thrown as the driver would
      if (search >= SEARCHES_PER_BORROW) throw unfit.error ?? this.refusal([{ node, why: unfit.why }]);
    }
  }

  /** Why this connection's node does not fit, or undefined when it does (the connection is then known good). */
  private async unfit(connection: C, node: ServerNode, accept = (role: NodeRole) => fits(this.target, role)): Promise<{ why: string; error?: unknown; role?: NodeRole } | undefined> {
    let role: NodeRole;
    try {
      role = await this.pools.role(connection);
    } catch (error) {
      const classified = this.pools.classify(error, node);
      return { why: describeError(classified), error: classified };
    }
    if (!accept(role)) return { why: `is ${roleName(role)}`, role };
    this.checked.add(connection);
    return undefined;
  }

  private leave(node: ServerNode, why: string): void {
    if (this.current !== node) return;
    this.current = undefined;
    this.pools.closeNode(node);
    this.logger.warn("database node left", { database: this.pools.database, node: node.label, reason: why, targetSessionAttrs: this.target });
  }

  /** Tries the nodes in order and keeps the first that fits (for prefer-standby: the first standby, else the first that answered). */
  private async search(): Promise<void> {
    const skipped: Array<{ node: ServerNode; why: string; error?: unknown }> = [];
    let fallback: ServerNode | undefined;
    const accept = this.target === "prefer-standby" ? (role: NodeRole) => role.standby : (role: NodeRole) => fits(this.target, role);
    for (const node of this.nodes) {
      let connection: C;
      try {
        connection = await this.pools.borrow(node);
      } catch (error) {
        const classified = this.pools.classify(error, node);
        skipped.push({ node, why: `cannot connect: ${describeError(classified)}`, error: classified });
        this.pools.closeNode(node);
        continue;
      }
      const unfit = await this.unfit(connection, node, accept);
      if (unfit === undefined) {
        this.pools.giveBack(connection, false);
        if (fallback) this.pools.closeNode(fallback);
        return this.choose(node, skipped);
      }
      this.pools.giveBack(connection, unfit.role === undefined);
      if (unfit.role && !fallback && this.target === "prefer-standby") {
        fallback = node;
        this.checked.add(connection);
      } else {
        this.pools.closeNode(node);
      }
      skipped.push({ node, why: unfit.why, error: unfit.error });
    }
    if (fallback) return this.choose(fallback, skipped.filter((s) => s.node !== fallback));
    throw this.refusal(skipped);
  }

  private choose(node: ServerNode, skipped: ReadonlyArray<{ node: ServerNode; why: string }>): void {
    this.current = node;
    this.recheck = false;
    this.logger.info("database node chosen", {
      database: this.pools.database, node: node.label, targetSessionAttrs: this.target,
      ...(skipped.length > 0 ? { skipped: skipped.map((s) => `${s.node.label} ${s.why}`) } : {}),
    });
  }

  /**
   * No node fits: an outage either way. A node that answered and refused (not ready, or
   * read-only when writes are wanted) makes it a refusal, named after that node; otherwise
   * nothing could be reached, or nothing of the wanted kind.
   */
  private refusal(skipped: ReadonlyArray<{ node: ServerNode; why: string; error?: unknown }>): Error {
    const list = skipped.map((s) => `${s.node.label} ${s.why}`).join("; ");
    const message = `no ${this.pools.database} node fits target_session_attrs=${this.target}: ${list}`;
    const wantsWrites = this.target === "read-write" || this.target === "primary";
    const refused = skipped.find((s) => (s.error === undefined && wantsWrites) || s.error instanceof StoreUnavailableError);
    if (refused) {
      const reason = refused.error instanceof StoreUnavailableError ? refused.error.reason : "read-only";
      return new StoreUnavailableError(reason, message, { node: refused.node.label, ...(refused.error ? { cause: refused.error } : {}) });
    }
    return new TransientStoreError(message, { kind: "connection", cause: skipped[0]?.error });
  }
}

/** Whether a node in `role` fits `target` (prefer-standby takes any node in the end). */
export function fits(target: TargetSessionAttrs, role: NodeRole): boolean {
  switch (target) {
    case "any": case "prefer-standby": return true;
    case "read-write": return !role.readOnly;
    case "read-only": return role.readOnly;
    case "primary": return !role.standby;
    case "standby": return role.standby;
  }
}

function roleName(role: NodeRole): string {
  if (role.label) return role.label;
  if (role.standby) return "a standby (in recovery)";
  return role.readOnly ? "read-only" : "read-write";
}
