import type { Logger } from "../../core/logger.js";
import type { Migration } from "../../core/store-contract/capabilities.js";

/**
 * What a dialect does for one migration run, inside whatever serialises migrators there (a
 * transaction holding an advisory lock, a named lock, the only write lock).
 */
export interface MigrationSteps {
  /** Creates the version table if it is missing. */
  ensureVersionTable(): Promise<void>;
  /** Versions already recorded. */
  appliedVersions(): Promise<ReadonlySet<number>>;
  /** Runs one migration's statements. */
  apply(migration: Migration): Promise<void>;
  /** Records the migration as applied. */
  record(migration: Migration): Promise<void>;
}

/** The migration loop, the same on every database: apply, in order, what is not recorded yet. */
export async function runMigrations(steps: MigrationSteps, migrations: readonly Migration[], logger: Logger, dialect: string): Promise<void> {
  await steps.ensureVersionTable();
  const applied = await steps.appliedVersions();
  for (const migration of migrations) {
    if (applied.has(migration.version)) continue;
    await steps.apply(migration);
    await steps.record(migration);
    logger.info("applied migration", { dialect, version: migration.version, migration: migration.name });
  }
}
