// Mutation testing of PostgreSQL's and MariaDB's claim, stale fence and replay grants, against
// their conformance files: `npm run mutate:stores`. Separate from `npm run mutate` because it
// takes far longer (docs/testing.md).
import base from "./stryker.config.mjs";

/** @type {import("@stryker-mutator/api/core").PartialStrykerOptions} */
export default {
  ...base,
  vitest: { configFile: "vitest.stryker-stores.config.ts" },
  mutate: [
    "src/store/postgres/postgres-claim-guards.ts",
    "src/store/postgres/postgres-inbox-sql.ts:32-84",
    "src/store/mysql/mysql-claim-guards.ts",
    "src/store/mysql/mysql-store.ts:310-370",
  ],
  incrementalFile: "reports/stryker-stores-incremental.json",
  htmlReporter: { fileName: "reports/mutation-stores/mutation.html" },
  jsonReporter: { fileName: "reports/mutation-stores/mutation.json" },
};
