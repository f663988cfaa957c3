import { defineConfig } from "vitest/config";

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
          exclude: ["test/broker-global/**", "**/node_modules/**"],
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
          // that blocks every publisher): one file at a time, after every other file has finished.
          name: "broker-global",
          include: ["test/broker-global/**/*.test.ts"],
          fileParallelism: false,
          maxWorkers: 1,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
