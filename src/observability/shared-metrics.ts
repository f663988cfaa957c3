import type { Counter, Gauge, Histogram, Registry } from "prom-client";
import type { MetricsRegistry } from "./inbox-metrics.js";
import { loadPromClient } from "./load-prom-client.js";

/**
 * The library's metrics on one registry, created once and shared: several consumers (and a
 * relay) of one process register on the same registry, each under its own label values.
 */

export function sharedCounter<L extends string>(given: MetricsRegistry, name: string, help: string, labelNames: readonly L[]): Counter<L> {
  const registry = given as Registry;
  const existing = registry.getSingleMetric(name);
  if (existing) return existing as Counter<L>;
  const { Counter } = loadPromClient();
  return new Counter<L>({ name, help, labelNames, registers: [registry] });
}

export function sharedHistogram<L extends string>(
  given: MetricsRegistry, name: string, help: string, labelNames: readonly L[], buckets: number[],
): Histogram<L> {
  const registry = given as Registry;
  const existing = registry.getSingleMetric(name);
  if (existing) return existing as Histogram<L>;
  const { Histogram } = loadPromClient();
  return new Histogram<L>({ name, help, labelNames, buckets, registers: [registry] });
}

/** Sets a gauge's values when the registry is scraped. */
export type GaugeSource<L extends string> = (gauge: Gauge<L>) => void | Promise<void>;

const sourcesOf = new WeakMap<Gauge<string>, Set<GaugeSource<string>>>();

/**
 * A gauge read on scrape: each source (one per consumer or relay) sets its own label values,
 * after the gauge forgot the previous scrape's (a stopped consumer's series disappear). Returns
 * the function that removes the source, and the gauge with its last source.
 */
export function scrapedGauge<L extends string>(
  given: MetricsRegistry, name: string, help: string, labelNames: readonly L[], source: GaugeSource<L>,
): () => void {
  const registry = given as Registry;
  let gauge = registry.getSingleMetric(name) as Gauge<L> | undefined;
  let sources = gauge ? sourcesOf.get(gauge) : undefined;
  if (!gauge || !sources) {
    const { Gauge } = loadPromClient();
    const all = sources = new Set();
    gauge = new Gauge<L>({
      name, help, labelNames, registers: [registry],
      async collect() {
        this.reset();
        await Promise.all([...all].map(async (s) => { await s(this); }));
      },
    });
    sourcesOf.set(gauge, sources);
  }
  const own = source as GaugeSource<string>;
  sources.add(own);
  return () => {
    sources.delete(own);
    // The last source gone, the gauge goes too: a gauge without labels would read 0 otherwise.
    if (sources.size === 0 && registry.getSingleMetric(name) === gauge) registry.removeSingleMetric(name);
  };
}
