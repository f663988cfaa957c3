import { Brackets, type EntityManager } from "typeorm";
import type { AccountRow, LedgerSql } from "../ledger/ledger-handler.js";
import { LedgerAccount } from "./ledger-account.entity.js";

/**
 * The ledger's reads and writes through TypeORM's EntityManager, in the inbox's transaction:
 * the same contract as the SQL of `npm start` (lock the batch's accounts in key order, then
 * write each touched account once), with TypeORM's query builder and every value a parameter.
 */
export const typeormLedgerSql: LedgerSql<EntityManager> = {
  async lockAccounts(tx, keys) {
    // One order for every batch (SELECT ... ORDER BY ... FOR UPDATE locks in it), so two
    // batches never wait for each other in a cycle.
    const rows = await tx.getRepository(LedgerAccount).createQueryBuilder("a")
      .where(new Brackets((any) => {
        keys.forEach(([tenant, accountId], i) => any.orWhere(`(a.tenant = :t${i} AND a.accountId = :a${i})`, { [`t${i}`]: tenant, [`a${i}`]: accountId }));
      }))
      .orderBy("a.tenant", "ASC").addOrderBy("a.accountId", "ASC")
      .setLock("pessimistic_write")
      .getMany();
    return rows.map((r) => ({ tenant: r.tenant, accountId: r.accountId, balanceCents: BigInt(r.balanceCents) }));
  },

  async writeAccounts(tx, created, updated) {
    if (created.length > 0) {
      // A concurrent batch may have opened the same account since our lock read: open it at 0
      // unless it exists, then add what this batch did to it. (On MySQL this is INSERT IGNORE:
      // ids are at most 256 characters, the column's size, so nothing it ignores is ours.)
      await tx.createQueryBuilder().insert().into(LedgerAccount)
        .values(created.map((r) => ({ tenant: r.tenant, accountId: r.accountId, balanceCents: "0" })))
        .orIgnore().execute();
      for (const r of created) if (r.balanceCents !== 0n) await addTo(tx, r);
    }
    for (const r of updated) {
      await tx.createQueryBuilder().update(LedgerAccount).set({ balanceCents: r.balanceCents.toString() })
        .where("tenant = :tenant AND account_id = :accountId", { tenant: r.tenant, accountId: r.accountId }).execute();
    }
  },
};

async function addTo(tx: EntityManager, row: AccountRow): Promise<void> {
  await tx.createQueryBuilder().update(LedgerAccount).set({ balanceCents: () => "balance_cents + :delta" })
    .where("tenant = :tenant AND account_id = :accountId", { tenant: row.tenant, accountId: row.accountId, delta: row.balanceCents.toString() })
    .execute();
}
