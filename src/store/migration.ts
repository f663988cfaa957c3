/**
 * A numbered schema migration, applied once and recorded in `rabbit_inbox_migrations`.
 * `{schema}` in the SQL is replaced by the qualified table prefix (empty, or `"name".`).
 * Never edit a shipped migration: add the next number.
 */
export interface Migration {
  version: number;
  name: string;
  sql: string;
}
