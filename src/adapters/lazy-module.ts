import { loadDriver } from "../store/load-driver.js";

/**
 * Loads an optional peer package the first time an adapter needs it (with loadDriver's install
 * hint), then reuses it: importing `rabbit-inbox/kysely` costs nothing until a statement runs.
 */
export function lazyModule<T>(name: string, purpose: string): () => Promise<T> {
  let loading: Promise<T> | undefined;
  return () => {
    loading ??= loadDriver<T>(name, purpose).catch((error: unknown) => {
      loading = undefined; // a later install can still succeed
      throw error;
    });
    return loading;
  };
}
