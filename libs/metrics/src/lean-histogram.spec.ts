import { Histogram, Registry } from 'prom-client';
import { expectSameExport, promPair } from '../../../test/support/prom-pair';
import { LeanHistogram } from './lean-histogram';

const BUCKETS = [0.0005, 0.001, 0.005, 0.01, 0.1, 1];

/** The same metric twice: prom-client's Histogram and LeanHistogram, each on its own registries. */
function pair(labelNames: string[] = []) {
  const config = { name: 'roost_test_seconds', help: 'A test histogram.', buckets: BUCKETS, labelNames };
  return promPair(
    (registers) => new Histogram({ ...config, registers }),
    (registers) => new LeanHistogram({ ...config, registers }),
  );
}

/** Values on, between, below and above the bounds, and negative. */
const VALUES = [0, 0.0005, 0.0004, 0.00051, 0.001, 0.003, 0.005, 0.0101, 0.1, 0.7, 1, 1.0001, 12, -3];

describe('LeanHistogram exports what prom-client Histogram exports', () => {
  it('unlabelled: the zero series before any observation, then every bucket, sum and count', async () => {
    const { prom, lean, promRegistry, leanRegistry } = pair();
    await expectSameExport(promRegistry, leanRegistry);
    for (const value of VALUES) {
      prom.observe(value);
      lean.observe(value);
    }
    await expectSameExport(promRegistry, leanRegistry);
    expect(await leanRegistry.text.metrics()).toContain('roost_test_seconds_bucket{le="0.005"} 8\n');
    expect(await leanRegistry.text.metrics()).toContain('roost_test_seconds_count 14\n');
  });

  it('labelled: series in first-observed order, through observe and bind alike', async () => {
    const { prom, lean, promRegistry, leanRegistry } = pair(['route', 'method']);
    await expectSameExport(promRegistry, leanRegistry);
    const post = lean.bind({ route: '/messages', method: 'POST' });
    VALUES.forEach((value, i) => {
      prom.observe({ route: '/messages', method: 'POST' }, value);
      post(value);
      if (i % 3 === 0) {
        prom.observe({ route: '/mailbox', method: 'GET' }, value * 2);
        lean.observe({ route: '/mailbox', method: 'GET' }, value * 2);
      }
    });
    prom.observe({ route: '/messages' }, 0.002);
    lean.observe({ route: '/messages' }, 0.002);
    await expectSameExport(promRegistry, leanRegistry);
    expect(await leanRegistry.text.metrics()).toContain(
      'roost_test_seconds_bucket{le="+Inf",route="/messages",method="POST"} 14\n',
    );
  });

  it('label values that need escaping, and numbers as values', async () => {
    const { prom, lean, promRegistry, leanRegistry } = pair(['stage']);
    // 7 and '7' are one series in prom-client (its key joins the values as strings).
    for (const stage of ['a"b', 'back\\slash', 'line\nbreak', 7, '7', '']) {
      prom.observe({ stage }, 0.01);
      lean.observe({ stage }, 0.01);
    }
    await expectSameExport(promRegistry, leanRegistry);
  });

  it('reset empties it as prom-client does, and a bound observer goes on counting afterwards', async () => {
    const { prom, lean, promRegistry, leanRegistry } = pair(['stage']);
    const queue = lean.bind({ stage: 'queue' });
    prom.observe({ stage: 'queue' }, 0.002);
    queue(0.002);
    prom.reset();
    lean.reset();
    await expectSameExport(promRegistry, leanRegistry);
    expect(await leanRegistry.text.metrics()).not.toContain('_bucket');
    prom.observe({ stage: 'queue' }, 0.003);
    queue(0.003);
    await expectSameExport(promRegistry, leanRegistry);
    expect(await leanRegistry.text.metrics()).toContain('roost_test_seconds_count{stage="queue"} 1\n');

    const unlabelled = pair();
    unlabelled.prom.observe(1);
    unlabelled.lean.observe(1);
    unlabelled.prom.reset();
    unlabelled.lean.reset();
    await expectSameExport(unlabelled.promRegistry, unlabelled.leanRegistry);
  });

  it('get() gives the same values as prom-client (labels merged per value)', async () => {
    const { prom, lean } = pair(['stage']);
    prom.observe({ stage: 'write' }, 0.004);
    lean.observe({ stage: 'write' }, 0.004);
    expect(await lean.get()).toEqual(await prom.get());
    const write = (await lean.get()).values.find((v) => v.metricName === 'roost_test_seconds_count');
    expect(write).toMatchObject({ labels: { stage: 'write' }, value: 1 });
  });

  it('refuses what prom-client refuses, with the same errors, and records nothing', async () => {
    const { prom, lean, promRegistry, leanRegistry } = pair(['stage']);
    // Refused before a series is made: none is exported for them.
    for (const value of [NaN, Infinity, -Infinity]) {
      expect(() => prom.observe({ stage: 'x' }, value)).toThrow(TypeError);
      expect(() => lean.observe({ stage: 'x' }, value)).toThrow(`Value is not a valid number: ${value}`);
      expect(() => lean.bind({ stage: 'x' })(value)).toThrow(TypeError);
    }
    await expectSameExport(promRegistry, leanRegistry);
    expect(await leanRegistry.text.metrics()).not.toContain('stage="x"');
    const unknown = { stage: 'x', colour: 'red' } as { stage: string };
    let promError: unknown;
    try {
      prom.observe(unknown, 1);
    } catch (error) {
      promError = error;
    }
    expect(() => lean.observe(unknown, 1)).toThrow((promError as Error).message);
    // A known series with an unknown label added is refused too.
    lean.observe({ stage: 'x' }, 1);
    prom.observe({ stage: 'x' }, 1);
    expect(() => lean.observe(unknown, 1)).toThrow('Added label "colour"');
    await expectSameExport(promRegistry, leanRegistry);
    expect(() => new LeanHistogram({ name: 'h', help: 'h', labelNames: ['le'], buckets: [1] })).toThrow(
      'le is a reserved',
    );
    expect(() => new LeanHistogram({ name: 'h', help: 'h', buckets: [2, 1] })).toThrow('increasing');
    expect(() => new LeanHistogram({ name: 'bad-name', help: 'h', buckets: [1] })).toThrow('Invalid metric name');
  });

  it('registering a second metric of the same name on a registry fails, as with prom-client', () => {
    const registry = new Registry();
    new LeanHistogram({ name: 'roost_dup', help: 'h', buckets: [1], registers: [registry] });
    expect(() => new Histogram({ name: 'roost_dup', help: 'h', registers: [registry] })).toThrow(
      'already been registered',
    );
  });

  it('startTimer observes the elapsed seconds under its labels', async () => {
    const lean = new LeanHistogram({ name: 'roost_t', help: 'h', labelNames: ['direction', 'kind'], buckets: [10] });
    const stop = lean.startTimer({ direction: 'forward' });
    await new Promise((resolve) => setTimeout(resolve, 20));
    const seconds = stop({ kind: 'list' });
    expect(seconds).toBeGreaterThanOrEqual(0.015);
    const values = (await lean.get()).values;
    expect(values.find((v) => v.metricName === 'roost_t_sum')).toMatchObject({
      labels: { direction: 'forward', kind: 'list' },
      value: seconds,
    });
  });
});
