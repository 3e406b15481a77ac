import { setTimeout as sleep } from 'node:timers/promises';
import { runEnvelopeId, ulid, type Cursor } from '#domain';
import { TestClient } from '../support/client';
import { createTestDatabase } from '../support/database';
import { startAll, stopAll, type TestProcess } from '../support/processes';
import { testRedisUrl } from '../support/services';

/**
 * Schedules across a worker cluster (EXTENSIONS.md §3, "exactly one envelope per due run, however
 * many workers run"; DESIGN.md invariant 5 for workers): 3 worker processes and 1 api process on one
 * Postgres and one Redis prefix, all on the same accelerated clock (ROOST_CLOCK_SPEED=60 from one
 * ROOST_CLOCK_EPOCH_MS: one real second is one simulated minute). 100 schedules fire every
 * simulated minute, 15 times each, while workers are `kill -9`ed mid-run and later restarted.
 * At the end each schedule sent exactly max_count envelopes, one per run, each with the run's
 * deterministic id.
 */

jest.setTimeout(120_000);

const OWNERS = 10;
const RECIPIENTS = 10;
const MAX_COUNT = 15;
const SPEED = 60;
/** One simulated minute: one real second. */
const INTERVAL = 60_000;
/** Simulated ms: 2 real seconds, so a dead worker's leases are taken over quickly. */
const LEASE = 120_000;

interface Agent {
  handle: string;
  token: string;
}

let database: { url: string; drop: () => Promise<void> } | undefined;
let api: TestProcess | undefined;
let workers: TestProcess[] = [];
let client: TestClient;
const adminToken = `admin-${ulid()}`;
const epoch = Date.now();
/** The wall-clock moment of a simulated time (every process runs at SPEED from `epoch`). */
const realTimeOf = (simulated: number) => epoch + (simulated - epoch) / SPEED;

beforeAll(async () => {
  database = await createTestDatabase('roost_e2e');
  const env = {
    DATABASE_URL: database.url,
    REDIS_URL: testRedisUrl(),
    ROOST_REDIS_PREFIX: `roost-e2e:${ulid()}:`,
    ROOST_ADMIN_TOKEN: adminToken,
    ROOST_LOG_LEVEL: 'warn',
    ROOST_HOST: '127.0.0.1',
    ROOST_RATE_LIMIT_PER_S: '0',
    ROOST_CLOCK_SPEED: String(SPEED),
    ROOST_CLOCK_EPOCH_MS: String(epoch),
    ROOST_SCHEDULE_TICK_MS: '200',
    ROOST_SCHEDULE_LEASE_MS: String(LEASE),
    ROOST_SCHEDULE_MIN_INTERVAL_MS: String(INTERVAL),
    ROOST_RETENTION_INTERVAL_MS: '86400000',
    // The test Postgres is shared (max_connections 100): small pools, so a restart still gets in.
    ROOST_DB_POOL_SIZE: '6',
  };
  // The api first: it applies the migrations, so the workers start on a ready schema.
  [api] = await startAll([{ name: 'api', env: { ...env, ROOST_ROLE: 'api' } }]);
  workers = await startAll([0, 1, 2].map((i) => ({ name: `worker-${i}`, env: { ...env, ROOST_ROLE: 'worker' } })));
  client = new TestClient(api.url);
});

afterAll(async () => {
  await stopAll([api, ...workers], 3_000);
  await database?.drop().catch(() => undefined);
});

async function agent(handle: string): Promise<Agent> {
  const reply = await client.post('/_admin/agents', { handle, policy: 'open' }, adminToken);
  if (reply.status !== 201) throw new Error(`creating ${handle}: ${reply.status} ${reply.text}`);
  return { handle, token: reply.body.token as string };
}

/** Every `in` header of an agent, oldest first. */
async function inbox(token: string): Promise<any[]> {
  const headers: any[] = [];
  let cursor: Cursor | null = null;
  for (;;) {
    const after: string = cursor
      ? `&after_created_at=${cursor.created_at}&after_envelope_id=${cursor.envelope_id}`
      : '';
    const reply = await client.get(`/mailbox?order=asc&limit=1000${after}`, token);
    if (reply.status !== 200) throw new Error(`GET /mailbox: ${reply.status} ${reply.text}`);
    headers.push(...reply.body.envelope_headers);
    cursor = reply.body.next_cursor;
    if (cursor === null) return headers;
  }
}

async function schedulesOf(owner: Agent): Promise<any[]> {
  const reply = await client.get('/schedules', owner.token);
  if (reply.status !== 200) throw new Error(`GET /schedules: ${reply.status} ${reply.text}`);
  return reply.body.schedules;
}

/** Sum of one counter over the processes that are up (a killed worker's counts die with it). */
async function firings(result: string): Promise<number> {
  let sum = 0;
  for (const worker of workers.filter((w) => w.running)) {
    const text = await (await fetch(`${worker.url}/metrics`)).text();
    const match = new RegExp(`^roost_schedule_firings_total\\{result="${result}"\\} (\\S+)$`, 'm').exec(text);
    sum += match ? Number(match[1]) : 0;
  }
  return sum;
}

test('100 schedules on 3 workers, two killed -9 mid-run and restarted: every due run sends exactly one envelope', async () => {
  const started = Date.now();
  const owners = await Promise.all(Array.from({ length: OWNERS }, (_, i) => agent(`@wc.owner${i}`)));
  const recipients = await Promise.all(Array.from({ length: RECIPIENTS }, (_, i) => agent(`@wc.inbox${i}`)));

  // Each owner schedules one standing message to each recipient.
  const created = await Promise.all(
    owners.flatMap((owner, o) =>
      recipients.map(async (recipient, r) => {
        const reply = await client.post(
          '/schedules',
          {
            envelope: {
              to: [recipient.handle],
              subject: `tick ${o}/${r}`,
              content_parts: [{ type: 'text', text: `from ${owner.handle}` }],
            },
            interval_ms: INTERVAL,
            max_count: MAX_COUNT,
          },
          owner.token,
        );
        if (reply.status !== 201) throw new Error(`POST /schedules: ${reply.status} ${reply.text}`);
        return { id: reply.body.id as string, owner, recipient };
      }),
    ),
  );
  expect(created).toHaveLength(OWNERS * RECIPIENTS);
  const firing = Date.now();

  // Mid-run, a worker dies without a word and comes back a few seconds later; then another one.
  const kills: number[] = [];
  for (const [victim, downMs] of [
    [workers[1], 4_000],
    [workers[0], 2_500],
  ] as const) {
    await sleep(3_000 + Math.floor(Math.random() * 200));
    await victim.kill('SIGKILL');
    kills.push(Math.round((Date.now() - firing) / 100) / 10);
    await sleep(downMs);
    await victim.start();
  }

  // Wait until every schedule has completed (15 runs at one per real second, plus the disturbance).
  const deadline = Date.now() + 60_000;
  let schedules: any[];
  for (;;) {
    schedules = (await Promise.all(owners.map(schedulesOf))).flat();
    if (schedules.every((s) => s.status !== 'active')) break;
    if (Date.now() > deadline) {
      const active = schedules.filter((s) => s.status === 'active');
      throw new Error(`${active.length} schedules still active, e.g. ${JSON.stringify(active[0])}`);
    }
    await sleep(500);
  }
  // Anything in flight after the last recording would show up now.
  await sleep(1_500);

  const byId = new Map(schedules.map((s) => [s.id as string, s]));
  const headers = (await Promise.all(recipients.map((r) => inbox(r.token)))).flat();
  const bySchedule = new Map<string, any[]>();
  for (const header of headers) {
    if (typeof header.schedule_id !== 'string') continue;
    bySchedule.set(header.schedule_id, [...(bySchedule.get(header.schedule_id) ?? []), header]);
  }

  let duplicates = 0;
  /** Runs sent more than a real second after their scheduled time (a lease taken over, lag). */
  let late = 0;
  /** Slots skipped because a run was late (recovery without a burst). */
  let skipped = 0;
  let missing = 0;
  let wrongIds = 0;
  for (const { id, owner, recipient } of created) {
    const schedule = byId.get(id)!;
    const sent = (bySchedule.get(id) ?? []).sort((a, b) => a.date_ms - b.date_ms);
    duplicates += Math.max(0, sent.length - schedule.send_count) + (sent.length - new Set(sent.map((h) => h.id)).size);
    missing += Math.max(0, MAX_COUNT - sent.length);
    // Run n (in scheduled-time order) carries the id derived from (schedule, n, scheduled time).
    sent.forEach((header, i) => {
      if (header.created_at - realTimeOf(header.date_ms) > 1_000) late++;
      if (i > 0) skipped += (header.date_ms - sent[i - 1].date_ms) / INTERVAL - 1;
      if (header.id !== runEnvelopeId(id, i + 1, header.date_ms)) wrongIds++;
      expect(header.from).toBe(owner.handle);
      expect(header.to).toEqual([recipient.handle]);
    });
  }
  const summary = {
    schedules: created.length,
    runs: schedules.reduce((sum, s) => sum + s.send_count, 0),
    envelopes: headers.length,
    duplicates,
    missing,
    wrong_ids: wrongIds,
    sent_by_survivors: await firings('sent'),
    replayed_by_survivors: await firings('replayed'),
    late_runs: late,
    skipped_slots: skipped,
    kills_at_s_after_creation: kills,
    seconds: Math.round((Date.now() - started) / 1000),
  };
  console.log(`worker-cluster: ${JSON.stringify(summary)}`);

  expect(schedules.map((s) => s.status)).toEqual(created.map(() => 'completed'));
  expect(schedules.map((s) => s.send_count)).toEqual(created.map(() => MAX_COUNT));
  expect(schedules.filter((s) => s.last_error !== null)).toEqual([]);
  expect({ envelopes: headers.length, duplicates, missing, wrongIds }).toEqual({
    envelopes: OWNERS * RECIPIENTS * MAX_COUNT,
    duplicates: 0,
    missing: 0,
    wrongIds: 0,
  });
  for (const { id } of created) {
    const sent = bySchedule.get(id)!;
    expect(sent).toHaveLength(byId.get(id)!.send_count);
    // One envelope per distinct scheduled time: no run sent twice under two times.
    expect(new Set(sent.map((h) => h.date_ms)).size).toBe(sent.length);
  }
  // The restarted workers are healthy again.
  for (const worker of workers) expect((await fetch(`${worker.url}/healthz`)).status).toBe(200);
});
