import { Column, Entity, PrimaryColumn } from "typeorm";

/**
 * The ledger's `ledger_accounts` table, the one `npm start` creates and the ledger's commands
 * read. Column types are spelled out: the app runs through tsx, which emits no decorator
 * metadata for TypeORM to read them from.
 */
@Entity({ name: "ledger_accounts" })
export class LedgerAccount {
  @PrimaryColumn({ type: "varchar", name: "tenant" })
  tenant!: string;

  @PrimaryColumn({ type: "varchar", name: "account_id" })
  accountId!: string;

  /** bigint: TypeORM reads it as a string, so no cent is lost beyond 2^53. */
  @Column({ type: "bigint", name: "balance_cents" })
  balanceCents!: string;
}
