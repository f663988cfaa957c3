import type { RabbitInboxHealth, RabbitInboxService } from "./rabbit-inbox-service.js";

/**
 * A health indicator's result as `@nestjs/terminus` reads it (its `HealthIndicatorResult`):
 * terminus counts an indicator whose status is `down` as failed, and answers 503.
 */
export type RabbitInboxHealthResult = Record<string, { status: "up" | "down" } & Record<string, unknown>>;

/**
 * Readiness of the inbox for `@nestjs/terminus` (no runtime dependency on it):
 *
 *     @Get("ready") @HealthCheck()
 *     ready() { return this.health.check([() => this.inbox.isHealthy()]); }
 *
 * Up while every consumer is connected and consuming (a partitioned one counts while it takes
 * part among the replicas, even holding no partition) and the relay, if any, is connected. The
 * details say which is not, per handler.
 */
export class RabbitInboxHealthIndicator {
  constructor(private readonly inbox: RabbitInboxService) {}

  async isHealthy(key = "rabbit-inbox"): Promise<RabbitInboxHealthResult> {
    const health = await this.inbox.health();
    return { [key]: { status: healthy(health) ? "up" : "down", ...details(health) } };
  }
}

function healthy(health: RabbitInboxHealth): boolean {
  return Object.values(health.consumers).every((c) => c.connected && c.consuming) && (health.relay === null || health.relay.connected);
}

function details(health: RabbitInboxHealth): Record<string, unknown> {
  const consumers = Object.fromEntries(Object.entries(health.consumers).map(([name, c]) => [name, {
    queue: c.queue, state: c.state, connected: c.connected, consuming: c.consuming, node: c.node,
    lastCommitAt: c.lastCommitAt?.toISOString() ?? null, ...(c.partitionsHeld ? { partitionsHeld: c.partitionsHeld } : {}),
  }]));
  const relay = health.relay && {
    state: health.relay.state, connected: health.relay.connected, node: health.relay.node,
    lastPublishAt: health.relay.lastPublishAt?.toISOString() ?? null, backlog: health.relay.backlog,
  };
  return { consumers, relay };
}
