import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '@nestjs/common';
import { RedisOutage } from './redis-outage';

function recorder(): { lines: string[]; logger: Logger } {
  const lines: string[] = [];
  const logger = {
    warn: (text: string) => lines.push(`warn ${text}`),
    log: (text: string) => lines.push(`log ${text}`),
  } as unknown as Logger;
  return { lines, logger };
}

describe('RedisOutage', () => {
  it('warns once when Redis fails, logs once when it is back, and again for the next outage', () => {
    const { lines, logger } = recorder();
    const outage = new RedisOutage(logger, 'limiting per node', () => new Promise(() => undefined));
    outage.succeeded();
    for (let i = 0; i < 100; i++) outage.failed(new Error('connect ECONNREFUSED'));
    for (let i = 0; i < 10; i++) outage.succeeded();
    outage.failed(new Error('timeout'));
    outage.close();
    expect(lines).toEqual([
      'warn Redis unavailable (connect ECONNREFUSED); limiting per node until it returns',
      'warn Redis is back; limits are shared again',
      'warn Redis unavailable (timeout); limiting per node until it returns',
    ]);
  });

  it('is down from the first failure until a probe answers; one probe at a time, none while up', async () => {
    const { lines, logger } = recorder();
    let probes = 0;
    let counted = 0;
    let answers = false;
    const outage = new RedisOutage(
      logger,
      'limiting per node',
      async () => {
        probes++;
        if (!answers) throw new Error('Command timed out');
      },
      () => counted++,
      5,
    );
    await sleep(30);
    expect([outage.down, probes]).toEqual([false, 0]);

    const downAt = performance.now();
    outage.failed(new Error('Command timed out'));
    outage.failed(new Error('Command timed out')); // a second failure does not start a second probe
    expect(outage.down).toBe(true);
    for (let i = 0; i < 400 && probes < 3; i++) await sleep(5);
    expect(outage.down).toBe(true);
    expect(probes).toBeGreaterThanOrEqual(3);
    // One probe every 5 ms at most, one at a time: not one per failure, nor a burst.
    expect(probes).toBeLessThanOrEqual(Math.floor((performance.now() - downAt) / 5));

    answers = true;
    for (let i = 0; i < 100 && outage.down; i++) await sleep(5);
    expect(outage.down).toBe(false);
    expect(counted).toBe(probes - 1); // every probe but the one that found Redis back
    const afterBack = probes;
    await sleep(30);
    expect(probes).toBe(afterBack);
    expect(lines).toEqual([
      'warn Redis unavailable (Command timed out); limiting per node until it returns',
      'warn Redis is back; limits are shared again',
    ]);
  });

  it('a probe in flight when Redis came back and failed again goes on alone: never two chains of probes', async () => {
    const { logger } = recorder();
    const inFlight: Array<{ resolve: () => void; reject: (error: Error) => void }> = [];
    const outage = new RedisOutage(
      logger,
      'limiting per node',
      () => new Promise<void>((resolve, reject) => inFlight.push({ resolve, reject })),
      () => undefined,
      5,
    );
    outage.failed(new Error('Command timed out'));
    for (let i = 0; i < 400 && inFlight.length === 0; i++) await sleep(5);
    expect(inFlight).toHaveLength(1);
    outage.succeeded(); // another command answered while the probe waits
    outage.failed(new Error('Command timed out')); // and the next one failed
    inFlight[0].reject(new Error('Command timed out'));
    for (let i = 0; i < 400 && inFlight.length < 2; i++) await sleep(5);
    await sleep(40); // a second chain would have started a third probe by now
    expect(inFlight).toHaveLength(2);
    expect(outage.down).toBe(true);
    inFlight[1].resolve();
    for (let i = 0; i < 400 && outage.down; i++) await sleep(5);
    expect(outage.down).toBe(false);
    outage.close();
  });

  it('stops probing when closed', async () => {
    const { logger } = recorder();
    let probes = 0;
    const outage = new RedisOutage(
      logger,
      'limiting per node',
      async () => {
        probes++;
        throw new Error('down');
      },
      () => undefined,
      5,
    );
    outage.failed(new Error('down'));
    outage.close();
    await sleep(40);
    expect(probes).toBe(0);
    expect(outage.down).toBe(true);
  });
});
