import { connect } from "node:net";
import { type ServiceSnapshot, leftoversSince, snapshotServices } from "./leftover-check.js";
import { compileTestBuild } from "./test-build.js";
import { TEST_DATABASES_VARIABLE, selectTestDatabases } from "./test-databases.js";

/**
 * vitest globalSetup: every real service the tests use must accept TCP connections before any
 * test runs. A service that is down fails the run with its name and the command that starts it;
 * tests never skip silently because a service is missing.
 */

interface Service {
  name: string;
  url: string;
  defaultPort: number;
  start: string;
}

const services: Service[] = [
  {
    name: "PostgreSQL",
    url: process.env.TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test",
    defaultPort: 5432,
    start: "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start",
  },
  {
    name: "MariaDB",
    url: process.env.TEST_MYSQL_URL ?? "mysql://root@127.0.0.1:3306/test",
    defaultPort: 3306,
    start: "start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd",
  },
  {
    name: "RabbitMQ",
    url: process.env.TEST_AMQP_URL ?? process.env.AMQP_URL ?? "amqp://guest:guest@127.0.0.1:5672",
    defaultPort: 5672,
    start: "rabbitmq-server -detached",
  },
];

function hostAndPort(service: Service): { host: string; port: number } {
  const url = new URL(service.url);
  const host = url.hostname.replace(/^\[|\]$/g, "") || "127.0.0.1";
  return { host, port: url.port ? Number(url.port) : service.defaultPort };
}

function probe(host: string, port: number, timeoutMs: number): Promise<string | null> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (problem: string | null) => {
      socket.destroy();
      resolve(problem);
    };
    socket.setTimeout(timeoutMs, () => done(`no answer within ${timeoutMs} ms`));
    socket.once("connect", () => done(null));
    socket.once("error", (error: NodeJS.ErrnoException) => done(error.code ?? error.message));
  });
}

export async function setup(): Promise<() => Promise<void>> {
  // A mistyped selection stops the run here, once, before any file skips a database over it.
  selectTestDatabases(process.env[TEST_DATABASES_VARIABLE]);
  const problems = await Promise.all(
    services.map(async (service) => {
      const { host, port } = hostAndPort(service);
      const problem = await probe(host, port, 3000);
      return problem === null
        ? null
        : `${service.name} does not accept connections on ${host}:${port} (${problem}); start it with: ${service.start}`;
    }),
  );
  const down = problems.filter((p): p is string => p !== null);
  if (down.length > 0) throw new Error(`test services are down:\n  ${down.join("\n  ")}`);
  // Once per run, whichever project's setup comes first: the snapshot the run's end compares
  // with, and the compiled build the child processes run.
  const owner = !(SNAPSHOT in globalThis);
  if (owner) {
    const [snapshot] = await Promise.all([snapshotServices(), compileTestBuild()]);
    (globalThis as Record<symbol, unknown>)[SNAPSHOT] = snapshot;
  }
  return async () => {
    if (!owner) return;
    const left = await leftoversSince((globalThis as Record<symbol, unknown>)[SNAPSHOT] as ServiceSnapshot);
    if (left.length > 0) {
      // vitest prints an error thrown here but still exits 0: fail the run explicitly.
      process.exitCode = 1;
      console.error(`the tests left behind what they created (each test removes its schemas, databases, queues and exchanges):\n  ${left.join("\n  ")}`);
    }
  };
}

const SNAPSHOT = Symbol.for("rabbit-inbox.tests.service-snapshot");
