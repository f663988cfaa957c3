import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Integration tests start child processes and talk to one broker; two files at a time keeps
    // a 2-core machine responsive while isolating each test by queue and schema names.
    fileParallelism: true,
    maxWorkers: 2,
    globalSetup: ["test/support/global-setup.ts"],
  },
});
