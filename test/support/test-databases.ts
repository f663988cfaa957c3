import { it } from "vitest";

/**
 * The one list of databases the tests run on, and the environment variable that narrows it:
 * `RABBIT_INBOX_TEST_DATABASES=postgres,sqlite` runs every per-database test on those two only;
 * unset (or empty) runs them on all. A name that is not a database here is an error that fails
 * every file that loops over databases, never a silent skip: a typo would otherwise pass a run
 * that tested nothing.
 */

export type TestDatabaseKind = "postgres" | "sqlite" | "mysql";

/** Every database the library supports, in the order tests run on them. */
export const ALL_TEST_DATABASES: readonly TestDatabaseKind[] = ["postgres", "sqlite", "mysql"];

export const TEST_DATABASES_VARIABLE = "RABBIT_INBOX_TEST_DATABASES";

/** The databases a comma-separated selection names, in ALL_TEST_DATABASES order; unset or blank: all. */
export function selectTestDatabases(selection: string | undefined): readonly TestDatabaseKind[] {
  if (selection === undefined || selection.trim() === "") return ALL_TEST_DATABASES;
  const names = selection.split(",").map((name) => name.trim());
  const unknown = names.filter((name) => !(ALL_TEST_DATABASES as readonly string[]).includes(name));
  if (unknown.length > 0) {
    throw new Error(`${TEST_DATABASES_VARIABLE}=${JSON.stringify(selection)}: unknown database ${unknown.map((n) => JSON.stringify(n)).join(", ")} (known: ${ALL_TEST_DATABASES.join(", ")}, comma-separated)`);
  }
  return ALL_TEST_DATABASES.filter((kind) => names.includes(kind));
}

/** The databases this run tests on. */
export const TEST_DATABASES: readonly TestDatabaseKind[] = selectTestDatabases(process.env[TEST_DATABASES_VARIABLE]);

export function isTestDatabaseSelected(kind: TestDatabaseKind): boolean {
  return TEST_DATABASES.includes(kind);
}

/**
 * The cases of a test written for some databases only (PostgreSQL and SQLite, say) that run on
 * a selected database: the kinds themselves, or cases that each name theirs through `kindOf`.
 * When the selection leaves none, registers one skipped test that says so: vitest fails a file
 * that registers no test at all, and the skip shows in the report.
 */
export function onSelectedDatabases<T>(cases: readonly T[], kindOf: (item: T) => TestDatabaseKind = (item) => item as TestDatabaseKind): T[] {
  const selected = cases.filter((item) => isTestDatabaseSelected(kindOf(item)));
  if (selected.length === 0) {
    const supported = [...new Set(cases.map(kindOf))].join(", ");
    it.skip(`${TEST_DATABASES_VARIABLE}=${process.env[TEST_DATABASES_VARIABLE] ?? ""} selects none of ${supported}`, () => undefined);
  }
  return selected;
}
