import { createRequire } from "node:module";
import type * as PromClient from "prom-client";
import { InboxConfigError } from "../core/errors.js";

let loaded: typeof PromClient | undefined;

/**
 * prom-client, loaded the first time a consumer or relay is given a registry: an optional peer
 * that an application without metrics never installs nor loads. Synchronous (prom-client is a
 * CommonJS package) so that constructors stay synchronous.
 */
export function loadPromClient(): typeof PromClient {
  if (loaded) return loaded;
  try {
    loaded = createRequire(import.meta.url)("prom-client") as typeof PromClient;
  } catch (error) {
    throw new InboxConfigError("metrics need the optional peer dependency prom-client: npm install prom-client", { cause: error });
  }
  return loaded;
}
