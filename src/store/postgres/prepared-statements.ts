/**
 * Which named statements each pooled client has prepared, so that a transaction's first statement
 * (a strict-mode claim, a redelivery count) can travel with its BEGIN as
 * `BEGIN; EXECUTE "name"(literals)`: one round trip, without the parse and plan that the same
 * statement inlined as literals costs PostgreSQL's backend in every transaction. A name is
 * recorded once node-postgres has prepared it on that client, which its first use there does the
 * usual way (BEGIN on its own, then the statement with its parameters).
 *
 * A server that does not know the name answers 26000 (invalid_sql_statement_name): a pooler such
 * as PgBouncer, which renames the statements it prepares, or a session that ran DISCARD ALL.
 * The transaction then starts again the usual way, and this registry stops offering EXECUTE.
 */
export class PreparedStatements {
  private readonly byClient = new WeakMap<object, Set<string>>();
  private usable = true;

  /** False once a server refused EXECUTE of a name it should know. */
  get enabled(): boolean {
    return this.usable;
  }

  has(client: object, name: string): boolean {
    return this.usable && (this.byClient.get(client)?.has(name) ?? false);
  }

  add(client: object, name: string): void {
    const names = this.byClient.get(client);
    if (names) names.add(name);
    else this.byClient.set(client, new Set([name]));
  }

  disable(): void {
    this.usable = false;
  }
}

/** Prepared-statement names must be unique per text on a connection; the schema is part of the text. */
export function statementTag(schema: string): string {
  return schema ? `_${Buffer.from(schema).toString("hex").slice(0, 40)}` : "";
}
