import { Controller, Get, Header, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { OpsService } from './ops.service';

/**
 * Probes on the main port of every process, unauthenticated and free of tenant data: `/healthz`
 * and `/health` (alive, ASMTP.md §3.10), `/readyz` (can this node do its job; see OpsService).
 */
@Controller()
export class OpsController {
  constructor(private readonly ops: OpsService) {}

  @Get(['/healthz', '/health'])
  health() {
    return this.ops.health();
  }

  @Get('/readyz')
  async ready(@Res({ passthrough: true }) reply: FastifyReply) {
    const readiness = await this.ops.readiness();
    reply.code(readiness.ok ? 200 : 503);
    return readiness;
  }
}

/** `/metrics` on the main port, only with `ROOST_METRICS_PORT=0` (else on the metrics listener). */
@Controller()
export class MetricsController {
  constructor(private readonly ops: OpsService) {}

  @Get('/metrics')
  @Header('content-type', 'text/plain; version=0.0.4; charset=utf-8')
  metricsText(): Promise<string> {
    return this.ops.metricsText();
  }
}
