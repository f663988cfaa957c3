/**
 * The `queryContext` of the inbox's own statements. Knex passes every response, raw ones too,
 * through the `postProcessResponse` of your config: if yours renames columns (camelCase), return
 * the response unchanged when `queryContext?.rabbitInbox` is true.
 */
export const KNEX_INBOX_QUERY_CONTEXT = { rabbitInbox: true } as const;
