import type { Logger } from '@nestjs/common';
import { RedisOutage } from './redis-outage';

describe('RedisOutage: one line per outage, not per request', () => {
  it('warns once when Redis fails, logs once when it is back, and again for the next outage', () => {
    const lines: string[] = [];
    const logger = {
      warn: (text: string) => lines.push(`warn ${text}`),
      log: (text: string) => lines.push(`log ${text}`),
    } as unknown as Logger;
    const outage = new RedisOutage(logger, 'limiting per node');
    outage.succeeded();
    for (let i = 0; i < 100; i++) outage.failed(new Error('connect ECONNREFUSED'));
    for (let i = 0; i < 10; i++) outage.succeeded();
    outage.failed(new Error('timeout'));
    expect(lines).toEqual([
      'warn Redis unavailable (connect ECONNREFUSED); limiting per node until it returns',
      'log Redis is back; limits are shared again',
      'warn Redis unavailable (timeout); limiting per node until it returns',
    ]);
  });
});
