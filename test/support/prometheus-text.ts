/**
 * A strict reader of the Prometheus text exposition format (what `/metrics` serves): every
 * line is a comment (`# HELP`, `# TYPE`) or `name{label="value",...} number`. A line that is
 * neither fails the parse, so a test that reads metrics also checks that they parse.
 */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (-?(?:[0-9.eE+-]+|Inf|\+Inf|NaN))(?: -?[0-9]+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(?:,|$)/y;

export function parsePrometheusText(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("# HELP ") || line.startsWith("# TYPE ")) continue;
    const match = SAMPLE.exec(line);
    if (!match) throw new Error(`not a Prometheus sample line: ${JSON.stringify(line)}`);
    const labels: Record<string, string> = {};
    const body = match[2] ?? "";
    LABEL.lastIndex = 0;
    while (LABEL.lastIndex < body.length) {
      const start = LABEL.lastIndex;
      const label = LABEL.exec(body);
      if (!label || LABEL.lastIndex === start) throw new Error(`bad labels in ${JSON.stringify(line)}`);
      labels[label[1]!] = label[2]!.replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c));
    }
    const raw = match[3]!;
    samples.push({ name: match[1]!, labels, value: raw.endsWith("Inf") ? (raw.startsWith("-") ? -Infinity : Infinity) : Number(raw) });
  }
  return samples;
}

/** The value of the one sample named `name` whose labels include `labels`; undefined when none, an error when several. */
export function sampleValue(samples: readonly Sample[], name: string, labels: Record<string, string> = {}): number | undefined {
  const found = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  if (found.length > 1) throw new Error(`${found.length} samples of ${name} match ${JSON.stringify(labels)}`);
  return found[0]?.value;
}
