import { type Server, createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { Registry } from "prom-client";

/** What /readyz asks: every check must pass for a 200. */
export type ReadinessCheck = () => Promise<{ ready: boolean; detail: Record<string, unknown> }>;

/**
 * The ledger's operator endpoints, on node:http: `/metrics` (Prometheus text), `/healthz` (the
 * process answers: 200) and `/readyz` (200 while connected to the broker and the database and
 * consuming, 503 otherwise, with the reasons as JSON for a person reading it).
 */
export async function startMetricsServer(options: { host: string; port: number; registry: Registry; ready: ReadinessCheck }): Promise<{ url: string; close: () => Promise<void> }> {
  const server: Server = createServer((request, response) => {
    const path = (request.url ?? "/").split("?")[0];
    const reply = (status: number, contentType: string, body: string) => {
      response.writeHead(status, { "content-type": contentType, "cache-control": "no-store" });
      response.end(body);
    };
    if (request.method !== "GET" && request.method !== "HEAD") return reply(405, "text/plain", "method not allowed\n");
    if (path === "/healthz") return reply(200, "text/plain", "ok\n");
    if (path === "/metrics") {
      options.registry.metrics().then(
        (text) => reply(200, options.registry.contentType, text),
        (error: unknown) => reply(500, "text/plain", `metrics failed: ${error instanceof Error ? error.message : String(error)}\n`),
      );
      return;
    }
    if (path === "/readyz") {
      options.ready().then(
        ({ ready, detail }) => reply(ready ? 200 : 503, "application/json", `${JSON.stringify({ ready, ...detail })}\n`),
        (error: unknown) => reply(503, "application/json", `${JSON.stringify({ ready: false, error: error instanceof Error ? error.message : String(error) })}\n`),
      );
      return;
    }
    reply(404, "text/plain", "not found: /metrics, /healthz, /readyz\n");
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host, () => resolve());
  });
  // Never keeps the process alive on its own: the drain on SIGTERM decides when it exits.
  server.unref();
  const { address, port } = server.address() as AddressInfo;
  return {
    url: `http://${address.includes(":") ? `[${address}]` : address}:${port}`,
    close: () => new Promise<void>((resolve) => { server.close(() => resolve()); server.closeAllConnections(); }),
  };
}

/** Resolves with `work`'s answer, or with false after `ms`: a database that hangs is not ready. */
export async function withinMs(ms: number, work: () => Promise<unknown>): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      work().then(() => true, () => false),
      new Promise<boolean>((resolve) => { timer = setTimeout(() => resolve(false), ms); }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
