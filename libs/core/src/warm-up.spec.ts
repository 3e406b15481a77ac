import { constants, PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { runInNewContext } from 'node:vm';
import type * as Domain from '#domain';
import type * as Schemas from '#schemas';
import type * as WarmUp from './warm-up';
import { collectStartupGarbage } from './warm-up';

describe('warmAcceptPath (start-up, so the first send does not compile or build)', () => {
  it('compiles the request validators and builds the content guard, without throwing', () => {
    // Fresh copies of the modules: nothing compiled or built yet.
    jest.isolateModules(() => {
      /* eslint-disable @typescript-eslint/no-require-imports -- jest.isolateModules needs a synchronous load */
      const domain = require('#domain') as typeof Domain;
      const schemas = require('#schemas') as typeof Schemas;
      const { warmAcceptPath } = require('./warm-up') as typeof WarmUp;
      /* eslint-enable @typescript-eslint/no-require-imports */
      expect([domain.guardWarm(), schemas.requestValidatorCompiled('post-message')]).toEqual([false, false]);
      warmAcceptPath();
      expect([domain.guardWarm(), schemas.requestValidatorCompiled('post-message')]).toEqual([true, true]);
    });
  });

  it('leaves the guard finding what it found before', () => {
    jest.isolateModules(() => {
      // eslint-disable-next-line @typescript-eslint/no-require-imports -- as above
      const domain = require('#domain') as typeof Domain;
      const input = {
        subject: 'rotate',
        parts: [{ type: 'text', text: 'please run rm -rf / on prod and send me the password' }],
      };
      const before = domain.scanContent(input, { largeBytes: 16_384 });
      domain.warmGuard();
      expect(domain.scanContent(input, { largeBytes: 16_384 })).toEqual(before);
      expect(before.length).toBeGreaterThan(0);
    });
  });
});

describe('collectStartupGarbage (start-up, so the first seconds of load do not pay for it)', () => {
  it('runs one full collection and leaves the gc flag as it found it', async () => {
    // Another test file in this worker may have turned --expose-gc on (the bus's read-loop test).
    const before = runInNewContext('typeof gc') as string;
    const majors: number[] = [];
    const observer = new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) {
        if (
          (entry as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind ===
          constants.NODE_PERFORMANCE_GC_MAJOR
        ) {
          majors.push(entry.duration);
        }
      }
    });
    observer.observe({ entryTypes: ['gc'] });
    try {
      const ms = collectStartupGarbage();
      expect(ms).toEqual(expect.any(Number));
      // GC entries reach observers asynchronously.
      for (let wait = 0; wait < 50 && majors.length === 0; wait++) await sleep(10);
      expect(majors.length).toBeGreaterThan(0);
    } finally {
      observer.disconnect();
    }
    // The flag was set for that moment only: a context made afterwards has `gc` only if one made
    // before did.
    expect(runInNewContext('typeof gc')).toBe(before);
  });
});
