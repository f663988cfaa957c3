import { defineConfig } from "vitest/config";

/**
 * The tests the claim code of PostgreSQL and MariaDB is mutated against: their conformance
 * files (stryker.stores.config.mjs). Slower than the main run: most conformance tests claim,
 * so most of them cover every mutant of the claim. See docs/testing.md.
 */
export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    globalSetup: ["test/support/global-setup.ts"],
    include: ["test/conformance/postgres.test.ts", "test/conformance/mysql.test.ts"],
    maxWorkers: 1,
  },
});
