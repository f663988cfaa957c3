import type { HandedOffSettlement } from "../../core/store-contract/outbox-relay-store.js";
import { SqlStore } from "./sql-store.js";

/** The statements of a dialect's relay side that its store passes on as they are. */
export interface SqlOutboxRelay {
  settleHandedOff(settlement: HandedOffSettlement): Promise<void>;
  /** Deletes up to `limit` rows sent before `sentBefore`; returns how many. */
  cleanup(sentBefore: Date, limit: number): Promise<number>;
  /** Unsent rows, counted up to `atMost`. */
  countPending(atMost: number): Promise<number>;
}

/**
 * A store on its own pool that also serves the outbox relay (PostgresStore, MysqlStore,
 * SqliteStore): the relay methods every dialect answers the same way, through its `relay`.
 * Each store keeps its own `claimOutbox`, whose locking differs (row locks or leases).
 */
export abstract class SqlRelayStore<Handle> extends SqlStore<Handle> {
  protected abstract readonly relay: SqlOutboxRelay;

  settleHandedOff(settlement: HandedOffSettlement): Promise<void> {
    return this.relay.settleHandedOff(settlement);
  }

  cleanupOutbox(sentBefore: Date, limit: number): Promise<number> {
    return this.relay.cleanup(sentBefore, limit);
  }

  countPendingOutbox(atMost: number): Promise<number> {
    return this.relay.countPending(atMost);
  }
}
