import { InboxConfigError, describeError } from "../core/errors.js";

/**
 * An error the database raises for SQL it cannot run as written: a table, column or function it
 * does not have, a syntax error, a privilege the user lacks. No event is at fault and no retry
 * can help, whichever event meets it first: it is a configuration error, so a consumer stops
 * without acking (its deliveries wait in the queue, in order) instead of retrying, delaying and
 * quarantining every event until someone notices.
 */
export function unrunnableSqlError(database: string, code: string | number, error: unknown): InboxConfigError {
  const text = describeError(error);
  const ours = /rabbit_inbox_/.test(text)
    ? " The inbox's own tables: run `rabbit-inbox migrate` (or `store.migrate()`) against this database and schema."
    : "";
  return new InboxConfigError(
    `${database} ${code}: ${text}. The database cannot run this SQL as written (a table, column or function it does not have, ` +
    `a syntax error, a privilege this user lacks: a migration not run, another schema or search path, a missing GRANT); ` +
    `retrying cannot help.${ours}`,
    { cause: error },
  );
}
