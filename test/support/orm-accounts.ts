/**
 * The `byo_accounts` table of the bring-your-own-transaction suites as the ORMs see it: an
 * EntitySchema each (no decorators), and the credit each suite makes through the ORM's own API.
 */
import { EntitySchema as MikroEntitySchema, LockMode } from "@mikro-orm/core";
import type { SqlEntityManager } from "@mikro-orm/knex";
import { EntitySchema as TypeormEntitySchema, type EntityManager } from "typeorm";

export interface ByoAccount {
  id: string;
  balance_cents: string;
}

export const typeormAccounts = new TypeormEntitySchema<ByoAccount>({
  name: "byo_accounts",
  columns: { id: { type: String, primary: true }, balance_cents: { type: "bigint" } },
});

/** `balance_cents += delta` through TypeORM's repository API; the row is created at `delta`. */
export async function typeormCredit(manager: EntityManager, account: string, delta: number): Promise<void> {
  const accounts = manager.getRepository(typeormAccounts);
  const { affected } = await accounts.increment({ id: account }, "balance_cents", delta);
  if (affected === 0) await accounts.insert({ id: account, balance_cents: String(delta) });
}

export class MikroAccount {
  id!: string;
  balance_cents!: string;
}

export const mikroAccounts = new MikroEntitySchema<MikroAccount>({
  class: MikroAccount,
  tableName: "byo_accounts",
  properties: { id: { type: "string", primary: true }, balance_cents: { type: "bigint" } },
});

/**
 * `balance_cents += delta` through MikroORM's unit of work: the row is read under a lock and
 * changed (or persisted when new) in memory; nothing reaches the database before the flush,
 * which the store runs before COMMIT, unless `flush` asks for it now (a caller that needs the
 * new row's lock held at once).
 */
export async function mikroCredit(em: SqlEntityManager, account: string, delta: number, options: { flush?: boolean } = {}): Promise<void> {
  const row = await em.findOne(MikroAccount, { id: account }, { lockMode: LockMode.PESSIMISTIC_WRITE });
  if (row) row.balance_cents = (BigInt(row.balance_cents) + BigInt(delta)).toString();
  else em.persist(em.create(MikroAccount, { id: account, balance_cents: String(delta) }));
  if (options.flush) await em.flush();
}
