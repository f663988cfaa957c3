/** Bring your own transaction with MikroORM 6 on MySQL / MariaDB (`@mikro-orm/mysql`, mysql2). */
import type { SqlEntityManager } from "@mikro-orm/knex";
import { MikroORM } from "@mikro-orm/mysql";
import { fromMikroOrm, mikroOrmStore } from "../../src/adapters/mikro-orm.js";
import { describeByoTransactionMysql } from "../support/byo-transaction-mysql.js";
import { mikroAccounts, mikroCredit } from "../support/orm-accounts.js";

// Credits flush at once here: the suite's swallowed-deadlock case needs the credited row's lock
// held when its rival asks for it. The PostgreSQL suite leaves them to the store's flush.
const credit = (em: SqlEntityManager, account: string, delta: number) => mikroCredit(em, account, delta, { flush: true });

describeByoTransactionMysql<SqlEntityManager>("mikro-orm", async (url) => {
  const orm = await MikroORM.init({ clientUrl: url, entities: [mikroAccounts], pool: { min: 0, max: 5 }, discovery: { warnWhenNoEntities: false } });
  return { store: mikroOrmStore(orm.em), executor: fromMikroOrm(orm.em), credit, close: () => orm.close(true) };
});
