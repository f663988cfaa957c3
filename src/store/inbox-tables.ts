/**
 * A write that changes nothing (it matches no row), which a database refusing writes refuses:
 * read-only nodes check the statement, not the rows it would touch.
 */
export function writeProbe(prefix: string): { text: string; values: [] } {
  return { text: `DELETE FROM ${inboxTableNames(prefix).redelivery} WHERE 1 = 0`, values: [] };
}

/** Names of the inbox's tables under a qualified prefix (empty, or a schema/database and a dot). */
export function inboxTableNames(prefix: string) {
  return {
    migrations: `${prefix}rabbit_inbox_migrations`,
    dedup: `${prefix}rabbit_inbox_dedup`,
    quarantine: `${prefix}rabbit_inbox_quarantine`,
    horizon: `${prefix}rabbit_inbox_purge_horizon`,
    audit: `${prefix}rabbit_inbox_quarantine_audit`,
    grant: `${prefix}rabbit_inbox_replay_grant`,
    redelivery: `${prefix}rabbit_inbox_redelivery`,
  };
}
