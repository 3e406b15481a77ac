import { setTimeout as sleep } from 'node:timers/promises';
import { ulid } from '#domain';
import { TestClient } from '../support/client';
import { createTestDatabase } from '../support/database';
import { healthz, readyz, startAll, stopAll, type TestProcess } from '../support/processes';
import { RedisServer } from './cluster';

/**
 * A Redis restart without persistence forgets BullMQ's job schedulers. The worker must upsert them
 * again when its connection comes back, or no schedule fires until some worker restarts (found by
 * `npm run chaos`: every schedule stuck `active` after the run's last Redis restart).
 *
 * A frozen Redis (SIGSTOP: its connections stay open, nothing answers) is the other outage: the
 * worker's commands wait instead of failing. It must stay alive for the kubelet while it lasts
 * (`/healthz` answered within the chart's 3 s timeout, so no restart), say it is not ready, and
 * fire its schedules again once Redis answers.
 */

jest.setTimeout(90_000);

const adminToken = `admin-${ulid()}`;
let redis: RedisServer;
let database: { url: string; drop: () => Promise<void> };
let nodes: TestProcess[] = [];
let client: TestClient;

beforeAll(async () => {
  redis = await RedisServer.start();
  database = await createTestDatabase('roost_e2e');
  const env = {
    DATABASE_URL: database.url,
    REDIS_URL: redis.url,
    ROOST_REDIS_PREFIX: `roost-e2e:${ulid()}:`,
    ROOST_ADMIN_TOKEN: adminToken,
    ROOST_LOG_LEVEL: 'warn',
    ROOST_RATE_LIMIT_PER_S: '0',
    // One simulated minute per real second, shared by both processes.
    ROOST_CLOCK_SPEED: '60',
    ROOST_CLOCK_EPOCH_MS: String(Date.now()),
    ROOST_SCHEDULE_TICK_MS: '200',
  };
  nodes = await startAll([
    { name: 'api', env: { ...env, ROOST_ROLE: 'api' } },
    { name: 'worker', env: { ...env, ROOST_ROLE: 'worker' } },
  ]);
  client = new TestClient(nodes[0].url);
});

afterAll(async () => {
  redis?.resume();
  await stopAll(nodes);
  await redis?.kill();
  await database?.drop();
});

async function sendCount(token: string, id: string): Promise<number> {
  const reply = await client.get(`/schedules/${id}`, token);
  if (reply.status !== 200) throw new Error(`GET /schedules/${id}: ${reply.status} ${reply.text}`);
  return reply.body.send_count as number;
}

async function waitForRuns(token: string, id: string, atLeast: number, timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const count = await sendCount(token, id);
    if (count >= atLeast) return count;
    if (Date.now() > deadline)
      throw new Error(`schedule ${id}: ${count} runs, expected at least ${atLeast} within ${timeoutMs} ms`);
    await sleep(200);
  }
}

/** An owner and an inbox, and a schedule sending every simulated minute (one real second). */
async function everySecond(prefix: string): Promise<{ owner: string; id: string }> {
  const tokens: Record<string, string> = {};
  for (const handle of [`@${prefix}.owner`, `@${prefix}.inbox`]) {
    const reply = await client.post('/_admin/agents', { handle, policy: 'open' }, adminToken);
    expect(reply.status).toBe(201);
    tokens[handle] = reply.body.token as string;
  }
  const created = await client.post(
    '/schedules',
    {
      envelope: { to: [`@${prefix}.inbox`], content_parts: [{ type: 'text', text: 'tick' }] },
      interval_ms: 60_000,
      max_count: 10_000,
    },
    tokens[`@${prefix}.owner`],
  );
  expect(created.status).toBe(201);
  return { owner: tokens[`@${prefix}.owner`], id: created.body.id as string };
}

test('schedules keep firing after Redis restarts empty, without restarting the worker', async () => {
  const { owner, id } = await everySecond('wr');
  await waitForRuns(owner, id, 2, 20_000);
  for (let restart = 0; restart < 2; restart++) {
    await redis.restart(500);
    const before = await sendCount(owner, id);
    // One run per real second: three more within 15 s only if the job scheduler came back.
    await waitForRuns(owner, id, before + 3, 15_000);
  }
  expect(nodes.every((node) => node.running)).toBe(true);
});

test('a frozen Redis: the worker stays alive and says it is unready, then fires its schedules again', async () => {
  const FREEZE_MS = 8_000;
  const { owner, id } = await everySecond('wf');
  const worker = nodes[1];
  await waitForRuns(owner, id, 2, 20_000);
  expect((await readyz(worker)).status).toBe(200);

  redis.pause();
  // A probe of each kind every second, each on its own (as the kubelet's periodic probes are).
  const probes: Array<Promise<[number, number]>> = [];
  try {
    for (let second = 0; second < FREEZE_MS / 1_000; second++) {
      probes.push(Promise.all([healthz(worker), readyz(worker).then((r) => r.status)]));
      await sleep(1_000);
    }
  } finally {
    redis.resume();
  }
  const answers = await Promise.all(probes);
  // Liveness never fails (a restart would not bring Redis back); readiness says what is wrong.
  expect(answers.map(([live]) => live)).toEqual(answers.map(() => 200));
  expect(answers.slice(1).map(([, ready]) => ready)).toContain(503);
  expect(worker.running).toBe(true);

  const before = await sendCount(owner, id);
  await waitForRuns(owner, id, before + 3, 15_000);
  for (let i = 0; i < 50 && (await readyz(worker)).status !== 200; i++) await sleep(200);
  expect((await readyz(worker)).status).toBe(200);
});
