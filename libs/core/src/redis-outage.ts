import type { Logger } from '@nestjs/common';

/**
 * One warning when a limiter loses Redis and one line when it is back, instead of one per request:
 * a limiter outage is a state, not a stream of events.
 */
export class RedisOutage {
  private down = false;

  constructor(
    private readonly logger: Logger,
    /** What the limiter does meanwhile, e.g. "limiting per node". */
    private readonly meanwhile: string,
  ) {}

  failed(error: unknown): void {
    if (this.down) return;
    this.down = true;
    this.logger.warn(`Redis unavailable (${(error as Error).message}); ${this.meanwhile} until it returns`);
  }

  succeeded(): void {
    if (!this.down) return;
    this.down = false;
    this.logger.log('Redis is back; limits are shared again');
  }
}
