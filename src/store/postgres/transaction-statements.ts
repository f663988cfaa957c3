import { writeProbe } from "../inbox-tables.js";
import type { ArrayParameters } from "./array-parameters.js";
import { PostgresInbox } from "./inbox.js";
import { PostgresOutboxWrites } from "./outbox.js";

/**
 * The SQL every PostgreSQL store runs inside its transactions, whoever holds the connection (its
 * own pool or a data layer's transaction): the inbox's statements, the write probe and the
 * outbox's writes. `arrays`: how their array parameters travel (binary on the store's own
 * node-postgres clients, plain arrays on a data layer's connection).
 */
export function postgresTransactionStatements(prefix: string, schema: string | undefined, arrays: ArrayParameters) {
  return {
    name: "postgres",
    inbox: new PostgresInbox(prefix, schema ?? "", arrays),
    writeProbe: writeProbe(prefix),
    outbox: new PostgresOutboxWrites(prefix, schema, arrays),
  };
}
