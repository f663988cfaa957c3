// Mutation testing (StrykerJS): `npm run mutate`. Which code is mutated, against which tests,
// and how to read the result: docs/testing.md.
/** @type {import("@stryker-mutator/api/core").PartialStrykerOptions} */
export default {
  testRunner: "vitest",
  vitest: { configFile: "vitest.stryker.config.ts" },
  // The dedup core, the AMQP layer, the stores' shared claim guards and transaction lifecycle,
  // and SQLite's claim with its stale fence and grants
  // (PostgreSQL's and MariaDB's: stryker.stores.config.mjs, `npm run mutate:stores`).
  mutate: [
    "src/core/**/*.ts",
    "src/amqp/**/*.ts",
    "src/store/sqlite/claim.ts",
    // What every store shares: the claim guards' decisions and the transaction lifecycle.
    "src/store/sql/claim-guards.ts",
    "src/store/sql/pooled-driver.ts",
    "!src/**/index.ts",
  ],
  // Only the tests that cover a mutant run against it.
  coverageAnalysis: "perTest",
  // The conformance suite shares one PostgreSQL, one MariaDB and a 2-core machine.
  concurrency: 2,
  timeoutMS: 30_000,
  // Type-only code and log messages are not behaviour.
  ignoreStatic: true,
  // Mutants whose code and tests did not change keep their last result: a rerun only tests what moved.
  incremental: true,
  incrementalFile: "reports/stryker-incremental.json",
  reporters: ["clear-text", "progress", "html", "json"],
  htmlReporter: { fileName: "reports/mutation/mutation.html" },
  jsonReporter: { fileName: "reports/mutation/mutation.json" },
  thresholds: { high: 90, low: 80, break: null },
  tempDirName: ".stryker-tmp",
  cleanTempDir: "always",
};
