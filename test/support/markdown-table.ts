/**
 * Reads the first markdown table after a heading (or in the whole text), as rows of cells keyed
 * by the header's column names. Backticks around a whole cell are kept: callers decide what a
 * cell means. Used by the tests that hold a document and the code it describes to each other.
 */
export function markdownTable(text: string, heading?: string): Array<Record<string, string>> {
  let lines = text.split("\n");
  if (heading !== undefined) {
    const at = lines.findIndex((l) => /^#+\s/.test(l) && l.replace(/^#+\s*/, "").trim() === heading);
    if (at < 0) throw new Error(`no heading ${JSON.stringify(heading)}`);
    lines = lines.slice(at + 1);
  }
  const start = lines.findIndex((l) => l.trimStart().startsWith("|"));
  if (start < 0) throw new Error("no table");
  const tableLines: string[] = [];
  for (const line of lines.slice(start)) {
    if (!line.trimStart().startsWith("|")) break;
    tableLines.push(line);
  }
  const [header, separator, ...body] = tableLines.map(cells);
  if (!header || !separator || !separator.every((c) => /^:?-+:?$/.test(c))) throw new Error("a table needs a header and a separator line");
  return body.map((row) => {
    if (row.length !== header.length) throw new Error(`row ${JSON.stringify(row)} has ${row.length} cells, the header ${header.length}`);
    return Object.fromEntries(header.map((name, i) => [name, row[i]!]));
  });
}

/** The cells of one table line; `\|` is a pipe inside a cell. */
function cells(line: string): string[] {
  const inner = line.trim().replace(/^\|/, "").replace(/\|$/, "");
  return inner.split(/(?<!\\)\|/).map((c) => c.trim().replaceAll("\\|", "|"));
}

/** `RI_CONFIG` -> RI_CONFIG: a cell that is one code span. */
export function unquoted(cell: string): string {
  const match = /^`([^`]*)`$/.exec(cell);
  return match ? match[1]! : cell;
}
