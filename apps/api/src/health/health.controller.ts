import { Controller, Get } from '@nestjs/common';
import { InjectConfig, type Config } from '#config';

const started = Date.now();

/** `GET /healthz` and `/health` (ASMTP.md §3.10): alive, no auth, no tenant data. */
@Controller()
export class HealthController {
  constructor(@InjectConfig() private readonly config: Config) {}

  @Get(['/healthz', '/health'])
  health() {
    return { ok: true, network: this.config.network, version: this.config.version, uptime_ms: Date.now() - started };
  }
}
