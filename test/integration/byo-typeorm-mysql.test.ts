/** Bring your own transaction with TypeORM 0.3 on MySQL / MariaDB (a `mariadb` DataSource on mysql2). */
import { DataSource, type EntityManager } from "typeorm";
import { fromTypeormMysql, typeormStore } from "../../src/adapters/typeorm.js";
import { describeByoTransactionMysql } from "../support/byo-transaction-mysql.js";
import { typeormAccounts, typeormCredit } from "../support/orm-accounts.js";

describeByoTransactionMysql<EntityManager>("typeorm", async (url) => {
  const dataSource = await new DataSource({ type: "mariadb", url, entities: [typeormAccounts], poolSize: 5 }).initialize();
  return { store: typeormStore(dataSource), executor: fromTypeormMysql(dataSource), credit: typeormCredit, close: () => dataSource.destroy() };
});
