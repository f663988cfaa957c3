import { execFile } from "node:child_process";
import { promisify } from "node:util";
import mysql from "mysql2/promise";
import pg from "pg";
import { amqpUrl } from "./broker.js";
import { mysqlUrl, pgUrl } from "./databases.js";

const run = promisify(execFile);

/**
 * What the tests create on the shared services and must remove: PostgreSQL schemas and MariaDB
 * databases named `ri_test_*`, and the broker's queues and exchanges. The run's global setup
 * takes a snapshot before the first test; its teardown fails the run, naming each one, if any
 * appeared since and is still there. A test whose cleanup skips a step when an earlier one
 * throws (closing a store the test already closed) leaves exactly this behind.
 */
export interface ServiceSnapshot {
  pgSchemas: Set<string>;
  mysqlDatabases: Set<string>;
  /** Undefined when the broker cannot be listed from here (see brokerObjects). */
  broker: Set<string> | undefined;
}

export async function snapshotServices(): Promise<ServiceSnapshot> {
  const [pgSchemas, mysqlDatabases, broker] = await Promise.all([listPgSchemas(), listMysqlDatabases(), brokerObjects()]);
  return { pgSchemas, mysqlDatabases, broker };
}

/** The objects created since `before` and still present, one line each; empty when none. */
export async function leftoversSince(before: ServiceSnapshot): Promise<string[]> {
  const after = await snapshotServices();
  const added = (was: Set<string> | undefined, is: Set<string> | undefined, what: string) =>
    was && is ? [...is].filter((name) => !was.has(name)).sort().map((name) => `${what} ${name}`) : [];
  return [
    ...added(before.pgSchemas, after.pgSchemas, "PostgreSQL schema"),
    ...added(before.mysqlDatabases, after.mysqlDatabases, "MariaDB database"),
    ...added(before.broker, after.broker, "RabbitMQ"),
  ];
}

async function listPgSchemas(): Promise<Set<string>> {
  const client = new pg.Client({ connectionString: pgUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ name: string }>("SELECT nspname AS name FROM pg_namespace WHERE nspname LIKE 'ri\\_test\\_%'");
    return new Set(rows.map((r) => r.name));
  } finally {
    await client.end();
  }
}

async function listMysqlDatabases(): Promise<Set<string>> {
  const connection = await mysql.createConnection(mysqlUrl);
  try {
    const [rows] = await connection.query("SELECT SCHEMA_NAME AS name FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE 'ri\\_test\\_%'");
    return new Set((rows as Array<{ name: string }>).map((r) => r.name));
  } finally {
    await connection.end();
  }
}

/**
 * The broker's queues and exchanges of the default virtual host, through `rabbitmqctl`: AMQP
 * cannot list them. Only for the local broker on its default port, the one rabbitmqctl reaches
 * without options; for another broker the check says once that it does not look.
 */
async function brokerObjects(): Promise<Set<string> | undefined> {
  const url = new URL(amqpUrl);
  const local = ["127.0.0.1", "localhost"].includes(url.hostname) && (url.port === "" || url.port === "5672") && ["", "/", "/%2F"].includes(url.pathname);
  if (!local) {
    console.log(`leftover check: queues and exchanges not checked on ${url.host} (only the local broker on 5672 is listed, with rabbitmqctl)`);
    return undefined;
  }
  const list = async (what: "queues" | "exchanges") =>
    (await run("rabbitmqctl", ["-q", `list_${what}`, "name", "--no-table-headers"], { timeout: 60_000 })).stdout
      .split("\n").filter((name) => name !== "").map((name) => `${what === "queues" ? "queue" : "exchange"} ${name}`);
  try {
    return new Set([...(await list("queues")), ...(await list("exchanges"))]);
  } catch (error) {
    // A broker in a container answers on 5672 with no rabbitmqctl here: the tests still run.
    console.log(`leftover check: queues and exchanges not checked (rabbitmqctl failed: ${(error as Error).message.split("\n")[0]})`);
    return undefined;
  }
}
