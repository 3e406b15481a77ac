import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { ulid } from '#domain';
import { TestClient } from '../support/client';
import { createTestDatabase } from '../support/database';
import { freePort, startAll, stopAll, TestProcess, operatorEnv } from '../support/processes';
import { until } from '../support/until';
import { connect } from '../support/ws';

/**
 * ROOST_METRICS_PORT on real processes: a second listener serves `/metrics`, `/healthz` and
 * `/readyz`; the main port (the one the Ingress routes) no longer serves `/metrics`. The gauges an
 * SRE looks for are there and follow the traffic: build info, dependency state, stream length per
 * partition (api), read lag per held partition (gateway), BullMQ job counts per state (worker).
 */

/** Samples of a metric: label text → value. */
function samples(text: string, name: string): Map<string, number> {
  const found = new Map<string, number>();
  for (const line of text.split('\n')) {
    const match = /^([a-z_]+)(\{.*\})? (\S+)$/.exec(line);
    if (match && match[1] === name) found.set(match[2] ?? '', Number(match[3]));
  }
  return found;
}

const sum = (values: Map<string, number>) => [...values.values()].reduce((a, b) => a + b, 0);

describe('the metrics listener (ROOST_METRICS_PORT)', () => {
  let database: { url: string; drop: () => Promise<void> };
  let nodes: TestProcess[] = [];
  const metricsPorts: number[] = [];
  const adminToken = `admin-${ulid()}`;
  let env: Record<string, string>;

  beforeAll(async () => {
    database = await createTestDatabase('roost_e2e');
    env = operatorEnv(database.url, adminToken);
    for (let i = 0; i < 3; i++) metricsPorts.push(await freePort());
    nodes = await startAll(
      (['api', 'gateway', 'worker'] as const).map((role, i) => ({
        name: role,
        env: { ...env, ROOST_ROLE: role, ROOST_METRICS_PORT: String(metricsPorts[i]) },
      })),
    );
  });

  afterAll(async () => {
    await stopAll(nodes);
    await database?.drop();
  });

  const scrape = async (i: number) => {
    const response = await fetch(`http://127.0.0.1:${metricsPorts[i]}/metrics`);
    expect([response.status, response.headers.get('content-type')]).toEqual([
      200,
      'text/plain; version=0.0.4; charset=utf-8',
    ]);
    return response.text();
  };

  it('serves /metrics, /healthz and /readyz on its own port; the main port answers 404 for /metrics', async () => {
    for (const [i, node] of nodes.entries()) {
      // Redis connects in the background (no role waits for it at start-up): give it a moment.
      const text = await until(
        async () => {
          const scraped = await scrape(i);
          return samples(scraped, 'roost_dependency_up').get('{dependency="redis"}') === 1 ? scraped : undefined;
        },
        15_000,
        'roost_dependency_up{dependency="redis"} 1',
        250,
      );
      expect(samples(text, 'roost_build_info')).toEqual(new Map([[`{version="0.1.0",node="${hostname()}"}`, 1]]));
      expect(samples(text, 'roost_dependency_up')).toEqual(
        new Map([
          ['{dependency="postgres"}', 1],
          ['{dependency="redis"}', 1],
        ]),
      );
      expect(samples(text, 'process_resident_memory_bytes').size).toBe(1);

      const main = await fetch(`${node.url}/metrics`);
      expect(main.status).toBe(404);
      expect(((await main.json()) as { error: { code: string } }).error.code).toBe('NOT_FOUND');
      // The probes stay on the main port, and are on the metrics port too.
      expect((await fetch(`${node.url}/readyz`)).status).toBe(200);
      const base = `http://127.0.0.1:${metricsPorts[i]}`;
      expect(await (await fetch(`${base}/readyz`)).json()).toEqual({
        ok: true,
        checks: { postgres: true, redis: true },
      });
      expect(((await (await fetch(`${base}/healthz`)).json()) as { ok: boolean }).ok).toBe(true);
      const other = await fetch(`${base}/_admin/agents`);
      expect([other.status, ((await other.json()) as { error: { code: string } }).error.code]).toEqual([
        404,
        'NOT_FOUND',
      ]);
      expect((await fetch(`${base}/metrics`, { method: 'POST' })).status).toBe(405);
    }
  });

  it('stream length grows with sends (api), a holding gateway reports its read lag, the worker its BullMQ jobs', async () => {
    const [, gateway] = nodes;
    const client = new TestClient(nodes[0].url);
    const alice = (await client.post('/_admin/agents', { handle: '@ml.alice', policy: 'open' }, adminToken)).body
      .token as string;
    const bob = (await client.post('/_admin/agents', { handle: '@ml.bob', policy: 'open' }, adminToken)).body
      .token as string;
    const socket = await connect(gateway.url, { token: bob });
    try {
      const before = sum(samples(await scrape(0), 'roost_stream_length'));
      expect(samples(await scrape(0), 'roost_stream_length').size).toBe(16); // every partition
      const ids: string[] = [];
      for (let n = 0; n < 5; n++) {
        const reply = await client.post(
          '/messages',
          { id: ulid(), to: ['@ml.bob'], date_ms: Date.now(), content_parts: [{ type: 'text', text: `m${n}` }] },
          alice,
        );
        expect(reply.status).toBe(202);
        ids.push(reply.body.id);
      }
      await socket.until(() => ids.every((id) => socket.ids.includes(id)), 10_000, 'the five notifies');
      expect(sum(samples(await scrape(0), 'roost_stream_length'))).toBe(before + 5);
      // The gateway holds bob's partition only, and has read everything in it.
      const lag = samples(await scrape(1), 'roost_stream_lag_entries');
      expect([...lag.values()]).toEqual([0]);
      // The api holds no partition: no lag series.
      expect(samples(await scrape(0), 'roost_stream_lag_entries').size).toBe(0);
    } finally {
      socket.close();
    }
    // The worker's queue: the four states, the schedulers' next runs among them.
    let jobs = new Map<string, number>();
    for (let i = 0; i < 50 && sum(jobs) === 0; i++) {
      jobs = samples(await scrape(2), 'roost_jobs');
      await sleep(100);
    }
    expect([...jobs.keys()].sort()).toEqual(
      ['active', 'delayed', 'failed', 'waiting'].map((state) => `{queue="roost-jobs",state="${state}"}`),
    );
    expect(sum(jobs)).toBeGreaterThan(0);
    // api and gateway run no jobs: no job series.
    expect(samples(await scrape(0), 'roost_jobs').size).toBe(0);
  });

  it('a metrics port already in use stops start-up with a message naming ROOST_METRICS_PORT', async () => {
    await expect(
      TestProcess.start({
        name: 'api (port taken)',
        env: { ...env, ROOST_ROLE: 'api', ROOST_METRICS_PORT: String(metricsPorts[0]) },
      }),
    ).rejects.toThrow(/ROOST_METRICS_PORT \d+ on 127\.0\.0\.1: EADDRINUSE/);
  });
});
