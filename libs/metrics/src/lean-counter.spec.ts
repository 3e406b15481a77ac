import { Counter } from 'prom-client';
import { expectSameExport, promPair } from '../../../test/support/prom-pair';
import { LeanCounter } from './lean-counter';

/** The same counter twice: prom-client's and LeanCounter, each on a text and an OpenMetrics registry. */
function pair(labelNames: string[] = []) {
  const config = { name: 'roost_test_total', help: 'A test counter.', labelNames };
  return promPair(
    (registers) => new Counter({ ...config, registers }),
    (registers) => new LeanCounter({ ...config, registers }),
  );
}

describe('LeanCounter exports what prom-client Counter exports', () => {
  it('unlabelled: 0 before any increment, then the sum of increments; 0 again after reset', async () => {
    const { prom, lean, promRegistry, leanRegistry } = pair();
    await expectSameExport(promRegistry, leanRegistry);
    for (const counter of [prom, lean]) {
      counter.inc();
      counter.inc(2.5);
      counter.inc(0);
    }
    await expectSameExport(promRegistry, leanRegistry);
    expect(await leanRegistry.open.metrics()).toContain('roost_test_total 3.5\n');
    prom.reset();
    lean.reset();
    await expectSameExport(promRegistry, leanRegistry);
    expect(await leanRegistry.open.metrics()).toContain('roost_test_total 0\n');
  });

  it('labelled: series in first-use order (inc with 0 makes one), through inc and bind alike', async () => {
    const { prom, lean, promRegistry, leanRegistry } = pair(['route', 'method', 'status']);
    await expectSameExport(promRegistry, leanRegistry);
    const created = lean.bind({ route: '/messages', method: 'POST', status: '202' });
    for (let i = 0; i < 5; i++) {
      prom.inc({ route: '/messages', method: 'POST', status: '202' });
      created();
      if (i % 2 === 0) {
        prom.inc({ route: '/mailbox', method: 'GET', status: 200 }, 2);
        lean.inc({ route: '/mailbox', method: 'GET', status: 200 }, 2);
      }
    }
    prom.inc({ route: '/messages', method: 'POST', status: '400' }, 0);
    lean.inc({ route: '/messages', method: 'POST', status: '400' }, 0);
    prom.inc({ route: '/mailbox', method: 'GET', status: '200' });
    lean.inc({ route: '/mailbox', method: 'GET', status: '200' });
    prom.inc({ route: 'a"b\\c\nd' });
    lean.inc({ route: 'a"b\\c\nd' });
    await expectSameExport(promRegistry, leanRegistry);
    expect(await leanRegistry.open.metrics()).toContain(
      'roost_test_total{route="/mailbox",method="GET",status="200"} 7\n',
    );
    prom.reset();
    lean.reset();
    created();
    prom.inc({ route: '/messages', method: 'POST', status: '202' });
    await expectSameExport(promRegistry, leanRegistry);
  });

  it("refuses a negative increment and an unknown label with prom-client's errors, and a non-number", async () => {
    const { prom, lean, promRegistry, leanRegistry } = pair(['result']);
    const errorOf = (f: () => void) => {
      try {
        f();
      } catch (error) {
        return (error as Error).message;
      }
      return undefined;
    };
    expect(errorOf(() => lean.inc({ result: 'x' }, -1))).toBe(errorOf(() => prom.inc({ result: 'x' }, -1)));
    const unknown = { result: 'x', colour: 'red' } as { result: string };
    expect(errorOf(() => lean.inc(unknown))).toBe(errorOf(() => prom.inc(unknown)));
    expect(errorOf(() => lean.inc({ result: 'x' }, Infinity))).toBe(errorOf(() => prom.inc({ result: 'x' }, Infinity)));
    expect(() => lean.inc({ result: 'x' }, NaN)).toThrow(TypeError);
    await expectSameExport(promRegistry, leanRegistry);
    expect(await leanRegistry.text.metrics()).not.toContain('result="x"');
  });
});
