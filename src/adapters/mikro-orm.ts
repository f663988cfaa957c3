import type { Knex } from "knex";
import type { SqlEntityManager } from "@mikro-orm/knex";
import { MysqlExecutorStore } from "../store/mysql/executor-store.js";
import { PostgresExecutorStore, type PostgresExecutorStoreOptions } from "../store/postgres/executor-store.js";
import type { SqlExecutor } from "../store/sql/executor-driver.js";
import { type DataLayerDialect, type DataLayerStoreOptions, dataLayerStore } from "./data-layer-store.js";
import { fromKnex } from "./knex.js";
import { fromKnexMysql, knexDialectOf } from "./knex-mysql.js";

/**
 * MikroORM (6, a SQL driver: `@mikro-orm/postgresql`, `@mikro-orm/mysql`) as a SqlExecutor: each
 * inbox transaction is `em.transactional()` on a fork with an empty identity map (an entity read
 * in an earlier transaction is read again, never trusted stale, and nothing piles up in `em`),
 * and the handler gets the transaction's EntityManager. The unit of work is flushed inside the
 * transaction before the inbox checks it and MikroORM commits, so the entities the handler
 * persisted commit with the inbox record or not at all. The inbox's own SQL runs as Knex raw
 * statements on the transaction MikroORM opened (its `?`-style formatting of values into the
 * text is bypassed: the values travel as the driver's parameters).
 */
export function fromMikroOrm(em: SqlEntityManager, dialect: DataLayerDialect = mikroOrmDialectOf(em)): SqlExecutor<SqlEntityManager> {
  const knex = em.getKnex() as unknown as Knex;
  const raw = dialect === "mysql" ? fromKnexMysql(knex) : fromKnex(knex);
  return {
    name: "mikro-orm",
    transaction: (work) => em.fork({ clear: true }).transactional((tx) => work(tx)),
    query: (text, values, tx) => raw.query(text, values, tx?.getTransactionContext<Knex.Transaction>()),
    flush: (tx) => tx.flush(),
    // MikroORM rethrows a driver error as a DriverException carrying the driver's own fields
    // (code, errno, sqlState, fatal), which the dialects classify as they are.
  };
}

/** The database behind a MikroORM EntityManager: the dialect of the Knex client it runs on. */
export function mikroOrmDialectOf(em: SqlEntityManager): DataLayerDialect {
  return knexDialectOf(em.getKnex() as unknown as Knex);
}

/**
 * An inbox store on your MikroORM EntityManager (`orm.em`): handlers get the transaction's
 * EntityManager as `ctx.tx` (`tx.persist(...)`, `tx.findOne(...)`), and the inbox record commits
 * or rolls back with what they persist through it. PostgreSQL or MySQL / MariaDB, from the
 * Knex client MikroORM runs on.
 */
export function mikroOrmStore(em: SqlEntityManager, options: DataLayerStoreOptions = {}): PostgresExecutorStore<SqlEntityManager> | MysqlExecutorStore<SqlEntityManager> {
  return dataLayerStore(mikroOrmDialectOf(em), options, {
    postgres: (pgOptions: Omit<PostgresExecutorStoreOptions<SqlEntityManager>, "executor">) => new PostgresExecutorStore({ ...pgOptions, executor: fromMikroOrm(em, "postgres") }),
    mysql: (mysqlOptions) => new MysqlExecutorStore({ ...mysqlOptions, executor: fromMikroOrm(em, "mysql") }),
  });
}
