/**
 * A `$1`-style statement taken apart at its placeholders, for data layers whose raw API wants
 * something else (Knex's `?`, Drizzle's `sql` chunks): `texts` has one more element than
 * `values`, and `values[i]` goes between `texts[i]` and `texts[i + 1]`. A placeholder used twice
 * (`$1 ... $1`) yields its value twice. Only for the inbox's own SQL, which has no `$` in a
 * string literal or a dollar-quoted body.
 */
export interface PositionalStatement {
  texts: string[];
  values: unknown[];
}

export function toPositional(text: string, values: readonly unknown[]): PositionalStatement {
  const texts: string[] = [];
  const ordered: unknown[] = [];
  let last = 0;
  for (const match of text.matchAll(/\$(\d+)/g)) {
    const index = Number(match[1]) - 1;
    if (index < 0 || index >= values.length) {
      throw new RangeError(`placeholder ${match[0]} has no value (${values.length} given)`);
    }
    texts.push(text.slice(last, match.index));
    ordered.push(values[index]);
    last = match.index + match[0].length;
  }
  texts.push(text.slice(last));
  return { texts, values: ordered };
}
