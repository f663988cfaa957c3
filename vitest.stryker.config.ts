import { defineConfig } from "vitest/config";

/**
 * The tests mutation testing runs against each mutant: the unit tests and the store conformance
 * suite on SQLite (in process, about ten seconds for the whole file). Every pipeline mutant is
 * covered by most conformance tests, so running them on PostgreSQL and MariaDB too tripled the
 * time of a run (hours) for the same verdicts on the pipeline; the claim guards of those two
 * stores have a run of their own (stryker.stores.config.mjs). Broker tests stay out: every
 * mutant would pay for them. See docs/testing.md.
 */
export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    globalSetup: ["test/support/global-setup.ts"],
    include: ["test/unit/**/*.test.ts", "test/conformance/sqlite.test.ts"],
    maxWorkers: 1,
  },
});
