import { type Server, type Socket, createServer, connect } from "node:net";

/**
 * A TCP proxy in front of a real service, for taking the service away from a client and giving
 * it back: `stop()` cuts every open connection and stops listening (new connections are refused,
 * as from a server that is down), `start()` listens again on the same port.
 */
export class TcpProxy {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  private listenPort = 0;

  constructor(private readonly target: { host: string; port: number }) {}

  get port(): number {
    return this.listenPort;
  }

  async start(): Promise<void> {
    const server = createServer((client) => {
      const upstream = connect(this.target);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on("close", () => this.sockets.delete(s));
        s.on("error", () => { client.destroy(); upstream.destroy(); });
      }
      client.pipe(upstream);
      upstream.pipe(client);
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.listenPort, "127.0.0.1", () => resolve());
    });
    const address = server.address();
    if (address === null || typeof address === "string") throw new Error("proxy has no TCP address");
    this.listenPort = address.port;
    this.server = server;
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
