import { Controller, Get, Header, Inject, Res } from "@nestjs/common";
import { HealthCheck, HealthCheckService, TypeOrmHealthIndicator } from "@nestjs/terminus";
import type { Registry } from "prom-client";
import { RabbitInboxHealthIndicator } from "../../src/nestjs/index.js";

export const METRICS_REGISTRY = Symbol("metrics registry");

/**
 * The ledger's operator endpoints, as `npm start` serves them on LEDGER_METRICS_PORT:
 * `/metrics` (Prometheus text), `/healthz` (the process answers) and `/readyz` (200 while the
 * consumer is connected and consuming, the relay connected and the database answering within
 * 2 s; 503 with the reasons otherwise).
 */
@Controller()
export class OperatorController {
  constructor(
    @Inject(HealthCheckService) private readonly health: HealthCheckService,
    @Inject(RabbitInboxHealthIndicator) private readonly inbox: RabbitInboxHealthIndicator,
    @Inject(TypeOrmHealthIndicator) private readonly database: TypeOrmHealthIndicator,
    @Inject(METRICS_REGISTRY) private readonly registry: Registry,
  ) {}

  @Get("healthz")
  @Header("cache-control", "no-store")
  healthz(): string {
    return "ok\n";
  }

  @Get("readyz")
  @Header("cache-control", "no-store")
  @HealthCheck()
  readyz() {
    return this.health.check([() => this.inbox.isHealthy("inbox"), () => this.database.pingCheck("database", { timeout: 2000 })]);
  }

  @Get("metrics")
  async metrics(@Res() res: { setHeader(name: string, value: string): void; end(body: string): void }): Promise<void> {
    res.setHeader("content-type", this.registry.contentType);
    res.end(await this.registry.metrics());
  }
}
