import { defineConfig } from "vitest/config";
import { standalone } from "./test/support/cluster.js";
import { haBroker } from "./test/support/ha-clusters.js";

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    globalSetup: ["test/support/global-setup.ts"],
    projects: [
      {
        extends: true,
        test: {
          name: "main",
          include: ["test/**/*.test.ts"],
          exclude: ["test/broker-global/**", "test/cluster/**", "test/ha/**", "**/node_modules/**"],
          // Integration tests start child processes and talk to one broker; two files at a time
          // keeps a 2-core machine responsive while isolating each test by queue and schema names.
          fileParallelism: true,
          maxWorkers: 2,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          // Tests that change broker-wide settings at runtime (consumer_timeout, a memory alarm
          // that blocks every publisher) run on a standalone node of their own (started by the
          // globalSetup through scripts/rabbitmq-cluster.sh), never on the system broker: the
          // support helpers in test/support/broker.ts follow TEST_AMQP_URL to it. One file at a
          // time, after the main project, so no other test competes for the two cores meanwhile.
          name: "broker-global",
          include: ["test/broker-global/**/*.test.ts"],
          globalSetup: ["test/support/standalone-global-setup.ts"],
          env: { TEST_AMQP_URL: standalone.url(1) },
          fileParallelism: false,
          maxWorkers: 1,
          sequence: { groupOrder: 1 },
        },
      },
      {
        extends: true,
        test: {
          // Failover tests on a 3-node cluster of the tests' own (c1..c3@localhost, AMQP
          // 5701-5703), started by the globalSetup unless it runs already. They kill and restart
          // nodes: one file at a time, last.
          name: "cluster",
          include: ["test/cluster/**/*.test.ts"],
          globalSetup: ["test/support/cluster-global-setup.ts"],
          testTimeout: 180_000,
          hookTimeout: 180_000,
          fileParallelism: false,
          maxWorkers: 1,
          sequence: { groupOrder: 2 },
        },
      },
      {
        extends: true,
        test: {
          // Databases that fail over, each started by its own script (globalSetup, once per run,
          // stopped at the end): a PostgreSQL primary with a synchronous standby, Patroni over
          // three nodes, a 3-node MariaDB Galera cluster; partitioned ledgers on a RabbitMQ node
          // of their own with the consistent-hash plugin (h1@localhost, 5731), which the support
          // helpers follow through TEST_AMQP_URL. They kill nodes: one file at a time, last.
          name: "ha",
          include: ["test/ha/**/*.test.ts"],
          globalSetup: ["test/support/ha-global-setup.ts"],
          env: { TEST_AMQP_URL: haBroker.url(1) },
          testTimeout: 300_000,
          hookTimeout: 600_000,
          fileParallelism: false,
          maxWorkers: 1,
          sequence: { groupOrder: 3 },
        },
      },
    ],
  },
});
