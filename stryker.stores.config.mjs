// Mutation testing of PostgreSQL's and MariaDB's claim, stale fence and replay grants, against
// their conformance files: `npm run mutate:stores`. Separate from `npm run mutate` because these
// mutants need the PostgreSQL and MariaDB conformance files, which would multiply the time of
// every pipeline mutant if they ran in the main run (docs/testing.md).
import base from "./stryker.config.mjs";

/** @type {import("@stryker-mutator/api/core").PartialStrykerOptions} */
export default {
  ...base,
  vitest: { configFile: "vitest.stryker-stores.config.ts" },
  mutate: [
    "src/store/postgres/postgres-claim-guards.ts",
    // claim and insertBatch.
    "src/store/postgres/postgres-inbox-sql.ts:32-84",
    // The claim: the length checks, which keys the INSERT claimed, and the guards' statements.
    "src/store/mysql/claim.ts",
  ],
  incrementalFile: "reports/stryker-stores-incremental.json",
  htmlReporter: { fileName: "reports/mutation-stores/mutation.html" },
  jsonReporter: { fileName: "reports/mutation-stores/mutation.json" },
};
