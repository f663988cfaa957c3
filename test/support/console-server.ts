import { type Server, createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach } from "vitest";
import { type ConsoleOptions, createConsoleHandler } from "../../src/operations.js";

/** A console served on a free loopback port for one test; stopped after it. */
export interface ConsoleServer {
  url: string;
  /** fetch relative to the console, no redirects followed. */
  call(path: string, init?: RequestInit): Promise<Response>;
  /** Logs in with the form (as a browser would) and returns the session cookie and its CSRF token. */
  login(token: string, name?: string): Promise<{ cookie: string; csrf: string }>;
}

const servers: Array<{ server: Server; close(): Promise<void> }> = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.server.closeAllConnections();
    await new Promise((done) => s.server.close(done));
    await s.close();
  }
});

export const TEST_TOKEN = "console-test-token-7f3a9c1e5b";

export async function startConsole(options: ConsoleOptions): Promise<ConsoleServer> {
  const handler = createConsoleHandler(options);
  const server = createServer(handler);
  await new Promise<void>((listening) => server.listen(0, "127.0.0.1", () => listening()));
  servers.push({ server, close: () => handler.close() });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const call = (path: string, init: RequestInit = {}) => fetch(url + path, { redirect: "manual", ...init });
  return {
    url, call,
    async login(token, name = "alice") {
      const response = await call("/login", { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: new URLSearchParams({ token, name }).toString() });
      if (response.status !== 303) throw new Error(`login answered ${response.status}: ${await response.text()}`);
      const cookie = response.headers.get("set-cookie")!.split(";")[0]!;
      const page = await (await call("/", { headers: { cookie } })).text();
      const csrf = /name="_csrf" value="([^"]+)"/.exec(page)?.[1];
      if (!csrf) throw new Error("no CSRF token on the page after login");
      return { cookie, csrf };
    },
  };
}
