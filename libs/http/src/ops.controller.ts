import { Controller, Get, Header, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { FrameBus } from '#bus';
import { InjectConfig, type Config } from '#config';
import { InjectDatabase, migrationsApplied, type Database } from '#db';
import { Metrics } from '#metrics';

const started = Date.now();

/**
 * Operational endpoints on every process, unauthenticated and free of tenant data:
 * `/healthz` and `/health` (alive, ASMTP.md §3.10), `/readyz` (dependencies), `/metrics`.
 */
@Controller()
export class OpsController {
  constructor(
    @InjectConfig() private readonly config: Config,
    @InjectDatabase() private readonly database: Database,
    private readonly bus: FrameBus,
    private readonly metrics: Metrics,
  ) {}

  @Get(['/healthz', '/health'])
  health() {
    return { ok: true, network: this.config.network, version: this.config.version, uptime_ms: Date.now() - started };
  }

  /** 200 when Postgres answers with every migration applied and the bus (Redis) answers; else 503. */
  @Get('/readyz')
  async ready(@Res({ passthrough: true }) reply: FastifyReply) {
    const [database, bus] = await Promise.all([
      migrationsApplied(this.database).catch(() => false),
      this.bus.ready().catch(() => false),
    ]);
    const ok = database && bus;
    reply.code(ok ? 200 : 503);
    return { ok, checks: { postgres: database, redis: this.config.redisUrl === null ? 'embedded' : bus } };
  }

  @Get('/metrics')
  @Header('content-type', 'text/plain; version=0.0.4; charset=utf-8')
  async metricsText(): Promise<string> {
    const pool = this.database.poolStats();
    this.metrics.dbPool.set({ state: 'in_use' }, pool.total - pool.idle);
    this.metrics.dbPool.set({ state: 'idle' }, pool.idle);
    this.metrics.dbPool.set({ state: 'waiting' }, pool.waiting);
    return this.metrics.registry.metrics();
  }
}
