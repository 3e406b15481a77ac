import { setTimeout as sleep } from 'node:timers/promises';
import Redis from 'ioredis';
import { ulid } from '#domain';
import { TestClient } from '../support/client';
import { createTestDatabase } from '../support/database';
import { freePort, readyz, startAll, stopAll, TestProcess } from '../support/processes';
import { connect, type Listener } from '../support/ws';
import { RedisServer } from './cluster';

/**
 * Redis outages on real processes, each against a PRIVATE `redis-server` on a free port that the
 * test kills and starts again (the machine's shared Redis is never touched):
 *
 * - Readiness follows what a node can serve: api and gateway stay ready (200, `checks.redis:
 *   false`, `roost_dependency_up{dependency="redis"} 0`) because accepting needs only Postgres and
 *   gateways backfill from Postgres; the worker, whose job queue is Redis, answers 503.
 * - The issue's fault case: Redis down under steady load while a simulated kubelet polls `/readyz`
 *   of every api and gateway every 5 s with failure threshold 2 (the chart's readiness probe). No
 *   probe fails, every send is a 202, and every 202 reaches the connected recipient: late (by
 *   backfill from Postgres), but it arrives. The outage lasts 25 s, not the issue's 60 s: that is
 *   five probe periods per node, over twice the 10 s a probe needs to mark a pod unready, and long
 *   enough for ioredis' reconnect backoff to reach its 2 s ceiling; a longer outage runs the same
 *   code paths and would add half a minute of CI.
 * - Each outage is logged once when it begins and once when it ends, per component, however many
 *   requests meet it (the rate limiter used to log every request).
 * - `ROOST_ROLE=all` with REDIS_URL at a dead Redis starts, serves, delivers over the WebSocket
 *   (backfill from Postgres), and recovers when Redis comes up.
 */

const OUTAGE_MS = 25_000;
const PROBE_PERIOD_MS = 5_000;
const FAILURE_THRESHOLD = 2;

async function until<T>(
  what: string,
  ask: () => Promise<T>,
  ok: (value: T) => boolean,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await ask();
    if (ok(value)) return value;
    if (Date.now() > deadline) throw new Error(`${what}: still ${JSON.stringify(value)} after ${timeoutMs} ms`);
    await sleep(200);
  }
}

/** One sample of a metric (labels matched exactly as written), or undefined when absent. */
async function metric(node: TestProcess, sample: string): Promise<number | undefined> {
  const text = await (await fetch(`${node.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${sample} `));
  return line === undefined ? undefined : Number(line.slice(sample.length + 1));
}

/** The process's JSON log lines (stdout) whose `msg` matches (and `context`, if given), access lines excluded. */
function logLines(node: TestProcess, pattern: RegExp, context?: string): string[] {
  return node.stdout.filter((line) => {
    try {
      const entry = JSON.parse(line) as { msg?: string; context?: string };
      if (context !== undefined && entry.context !== context) return false;
      return entry.msg !== 'request' && pattern.test(entry.msg ?? '');
    } catch {
      return pattern.test(line);
    }
  });
}

async function createAgent(client: TestClient, adminToken: string, handle: string): Promise<string> {
  const reply = await client.post('/_admin/agents', { handle, policy: 'open' }, adminToken);
  if (reply.status !== 201) throw new Error(`creating ${handle}: ${reply.status} ${reply.text}`);
  return reply.body.token as string;
}

async function send(url: string, token: string, to: string, n: number): Promise<{ id: string; status: number }> {
  const id = ulid();
  try {
    const response = await fetch(`${url}/messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        id,
        to: [to],
        date_ms: Date.now(),
        subject: `outage ${n}`,
        content_parts: [{ type: 'text', text: `message ${n}` }],
      }),
      signal: AbortSignal.timeout(15_000),
    });
    await response.arrayBuffer();
    return { id, status: response.status };
  } catch {
    return { id, status: 0 };
  }
}

interface OutageNodes {
  adminToken: string;
  database: { url: string; drop: () => Promise<void> };
  redis: RedisServer;
  nodes: TestProcess[];
}

/**
 * One process per role on a fresh database and a private Redis, logging at info, the limiter on
 * but high enough never to refuse: every send takes a token from Redis first, so it meets the
 * outage on every request. Started before the describe's tests and stopped after them (Redis let
 * go first, should a test have left it frozen); the fields are set once `beforeAll` has run.
 */
function outageNodes(roles: ReadonlyArray<'api' | 'gateway' | 'worker'>): OutageNodes {
  const cluster = { adminToken: `admin-${ulid()}`, nodes: [] } as unknown as OutageNodes;
  beforeAll(async () => {
    cluster.database = await createTestDatabase('roost_e2e');
    cluster.redis = await RedisServer.start();
    const env = {
      DATABASE_URL: cluster.database.url,
      REDIS_URL: cluster.redis.url,
      ROOST_REDIS_PREFIX: `roost-e2e:${ulid()}:`,
      ROOST_ADMIN_TOKEN: cluster.adminToken,
      ROOST_LOG_LEVEL: 'info',
      ROOST_HOST: '127.0.0.1',
      ROOST_RATE_LIMIT_PER_S: '10000',
      ROOST_RATE_LIMIT_BURST: '10000',
      ROOST_WS_SWEEP_INTERVAL_MS: '1000',
    };
    cluster.nodes = await startAll(
      roles.map((role, i) => ({
        name: `${role}-${i}`,
        env: { ...env, ROOST_ROLE: role },
        recordStdout: true,
        keepLines: 300,
        startTimeoutMs: 90_000,
      })),
    );
  });
  afterAll(async () => {
    cluster.redis?.resume();
    await stopAll(cluster.nodes);
    await cluster.redis?.kill();
    await cluster.database?.drop();
  });
  return cluster;
}

describe('a Redis outage under load: api and gateway stay ready and keep serving, the worker is unready, logs say it once', () => {
  const cluster = outageNodes(['api', 'api', 'gateway', 'worker']);

  it('Redis killed for 25 s: every kubelet probe of api/gateway passes, worker 503, every 202 delivered, one log line each way', async () => {
    const { adminToken, redis, nodes } = cluster;
    const [api0, api1, gateway, worker] = nodes;
    const served = [api0, api1, gateway];
    const client = new TestClient(api0.url);
    const alice = await createAgent(client, adminToken, '@ro.alice');
    const bob = await createAgent(client, adminToken, '@ro.bob');
    for (const node of nodes) {
      const ready = await until(
        `${node.name} ready`,
        () => readyz(node),
        (r) => r.status === 200 && r.body?.checks?.redis === true,
      );
      expect(ready.body).toEqual({ ok: true, checks: { postgres: true, redis: true } });
    }
    const socket: Listener = await connect(gateway.url, { token: bob });

    // Steady load through both apis for the whole run.
    const sent: Array<{ id: string; status: number; at: number }> = [];
    let loading = true;
    const load = (async () => {
      for (let n = 0; loading; n++) {
        const api = n % 2 === 0 ? api0 : api1;
        const result = await send(api.url, alice, '@ro.bob', n);
        sent.push({ ...result, at: Date.now() });
        await sleep(20);
      }
    })();
    // The kubelet: every PROBE_PERIOD_MS each api/gateway is probed; FAILURE_THRESHOLD consecutive
    // failures would take it out of its Service.
    const probes = new Map<string, number[]>(served.map((node) => [node.name, []]));
    let probing = true;
    const kubelet = (async () => {
      while (probing) {
        await Promise.all(served.map(async (node) => probes.get(node.name)!.push((await readyz(node)).status)));
        await sleep(PROBE_PERIOD_MS);
      }
    })();

    await sleep(2_000);
    const killedAt = Date.now();
    await redis.kill();
    // While Redis is down: api/gateway ready with redis false; the worker (job queue) is not.
    const down = await until(
      'worker unready',
      () => readyz(worker),
      (r) => r.status === 503,
    );
    expect(down.body).toEqual({ ok: false, checks: { postgres: true, redis: false } });
    for (const node of served) {
      expect(await readyz(node)).toEqual({ status: 200, body: { ok: true, checks: { postgres: true, redis: false } } });
      expect(
        await until(
          `${node.name} redis gauge`,
          () => metric(node, 'roost_dependency_up{dependency="redis"}'),
          (v) => v === 0,
        ),
      ).toBe(0);
      expect(await metric(node, 'roost_dependency_up{dependency="postgres"}')).toBe(1);
    }
    // Stream length and job counts cannot be read: their series are gone, not stale.
    expect(await metric(worker, 'roost_jobs{queue="roost-jobs",state="waiting"}')).toBeUndefined();
    expect(await metric(api0, 'roost_stream_length{partition="0"}')).toBeUndefined();
    await sleep(Math.max(0, killedAt + OUTAGE_MS - Date.now()));
    const duringOutage = sent.filter((s) => s.at > killedAt).length;

    await redis.start();
    const restartedAt = Date.now();
    await until(
      'worker ready again',
      () => readyz(worker),
      (r) => r.status === 200 && r.body?.checks?.redis === true,
    );
    for (const node of served)
      await until(
        `${node.name} redis back`,
        () => readyz(node),
        (r) => r.body?.checks?.redis === true,
      );
    await sleep(2_000); // load after recovery too
    loading = false;
    probing = false;
    await Promise.all([load, kubelet]);

    // No api or gateway probe failed, so no node ever neared the failure threshold.
    for (const [name, statuses] of probes) {
      expect({ name, failures: statuses.filter((s) => s !== 200).length }).toEqual({ name, failures: 0 });
      expect(statuses.length).toBeGreaterThanOrEqual(Math.floor(OUTAGE_MS / PROBE_PERIOD_MS));
    }
    expect(FAILURE_THRESHOLD).toBe(2); // the chart's setting this simulates
    // Every send was a 202 (Postgres is the acknowledgement), before, during and after the outage.
    expect(duringOutage).toBeGreaterThan(20);
    expect(sent.filter((s) => s.status !== 202)).toEqual([]);
    // Every 202 reaches the recipient's socket: late, but it arrives.
    await socket.until(
      () => sent.every((s) => socket.ids.includes(s.id)),
      30_000,
      'every accepted envelope on the socket',
    );
    expect(new Set(socket.ids).size).toBe(socket.ids.length);
    socket.close();
    if (process.env.ROOST_TEST_VERBOSE) {
      console.log({
        sent: sent.length,
        duringOutage,
        probes: Object.fromEntries(probes),
        recoveredMs: Date.now() - restartedAt,
      });
    }

    // One line when Redis went away and one when it came back, per component, not per request.
    for (const node of nodes) {
      const lines = [...logLines(node, /^redis unreachable/), ...logLines(node, /^redis reachable again/)];
      expect({ node: node.name, lines: lines.length === 2 ? 2 : lines }).toEqual({ node: node.name, lines: 2 });
    }
    for (const api of [api0, api1]) {
      expect([
        api.name,
        logLines(api, /^Redis unavailable .*; agent requests are limited per node until it returns$/, 'rate-limit')
          .length,
        logLines(api, /^Redis is back; limits are shared again$/, 'rate-limit').length,
      ]).toEqual([api.name, 1, 1]);
    }
    expect(logLines(worker, /^job queue: Redis unreachable/)).toHaveLength(1);
    expect(logLines(worker, /^job queue: Redis reachable again/)).toHaveLength(1);
    // Nothing else repeats: every warning or error line of the run, outage included, is a handful.
    for (const node of nodes) {
      const warnings = node.stdout.filter(
        (line) => /"level":"(warn|error|fatal)"/.test(line) && !line.includes('"msg":"request"'),
      );
      expect({ node: node.name, warnings: warnings.length <= 6 ? 'few' : warnings }).toEqual({
        node: node.name,
        warnings: 'few',
      });
    }
    // The gauges are back.
    expect(await metric(api0, 'roost_dependency_up{dependency="redis"}')).toBe(1);
    expect(
      await until(
        'job counts back',
        () => metric(worker, 'roost_jobs{queue="roost-jobs",state="waiting"}'),
        (v) => v !== undefined,
      ),
    ).toBeGreaterThanOrEqual(0);
  });
});

describe('ROOST_ROLE=all with REDIS_URL at a dead Redis', () => {
  let database: { url: string; drop: () => Promise<void> };
  let redis: RedisServer | undefined;
  let node: TestProcess | undefined;

  beforeAll(async () => {
    database = await createTestDatabase('roost_e2e');
  });

  afterAll(async () => {
    await stopAll([node]);
    await redis?.kill();
    await database?.drop();
  });

  it('starts and serves (202, delivery over the WebSocket by backfill), then recovers when Redis comes up', async () => {
    const port = await freePort(); // nothing listens here yet
    const adminToken = `admin-${ulid()}`;
    node = await TestProcess.start({
      name: 'all (dead redis)',
      recordStdout: true,
      keepLines: 300,
      env: {
        ROOST_ROLE: 'all',
        DATABASE_URL: database.url,
        REDIS_URL: `redis://127.0.0.1:${port}`,
        ROOST_REDIS_PREFIX: `roost-e2e:${ulid()}:`,
        ROOST_ADMIN_TOKEN: adminToken,
        ROOST_LOG_LEVEL: 'info',
        ROOST_HOST: '127.0.0.1',
        ROOST_WS_SWEEP_INTERVAL_MS: '1000',
      },
    });
    expect((await fetch(`${node.url}/healthz`)).status).toBe(200);
    expect(await readyz(node)).toEqual({ status: 200, body: { ok: true, checks: { postgres: true, redis: false } } });

    const client = new TestClient(node.url);
    const alice = await createAgent(client, adminToken, '@dead.alice');
    const bob = await createAgent(client, adminToken, '@dead.bob');
    const socket = await connect(node.url, { token: bob });
    const first = await send(node.url, alice, '@dead.bob', 1);
    expect(first.status).toBe(202);
    await socket.until(() => socket.ids.includes(first.id), 15_000, 'the envelope sent while Redis is down');

    // The outage is logged (once the start-up grace for connecting is over), once.
    await until(
      'the outage logged',
      async () => logLines(node!, /^redis unreachable/).length,
      (n) => n > 0,
      20_000,
    );
    // Redis comes up: the bus, the job queue and the limiter connect by themselves.
    redis = await RedisServer.startOn(port);
    await until(
      'redis back',
      () => readyz(node!),
      (r) => r.body?.checks?.redis === true,
    );
    expect(
      await until(
        'redis gauge',
        () => metric(node!, 'roost_dependency_up{dependency="redis"}'),
        (v) => v === 1,
      ),
    ).toBe(1);
    await until(
      'job queue connected',
      async () => logLines(node!, /^job queue: Redis reachable again/).length,
      (n) => n === 1,
    );
    const second = await send(node.url, alice, '@dead.bob', 2);
    expect(second.status).toBe(202);
    await socket.until(() => socket.ids.includes(second.id), 15_000, 'the envelope sent after Redis came up');
    expect(socket.ids).toEqual([first.id, second.id]);
    socket.close();
    // Its job schedulers were upserted once Redis answered.
    const look = new Redis(redis.url);
    try {
      await until(
        'job schedulers in Redis',
        async () => (await look.keys('roost-e2e:*bull:roost-jobs:repeat*')).length,
        (n) => n > 0,
        15_000,
      );
    } finally {
      look.disconnect();
    }
    expect(logLines(node, /^redis unreachable/)).toHaveLength(1);
    expect(logLines(node, /^redis reachable again/)).toHaveLength(1);
  });
});

/** Every `periodMs` until `running()` is false, each node's `/readyz` status and how long it took. */
function probeEvery(
  nodes: TestProcess[],
  periodMs: number,
  running: () => boolean,
): { done: Promise<void>; answers: Map<string, Array<{ status: number; ms: number }>> } {
  const answers = new Map<string, Array<{ status: number; ms: number }>>(nodes.map((node) => [node.name, []]));
  const done = (async () => {
    while (running()) {
      await Promise.all(
        nodes.map(async (node) => {
          const started = Date.now();
          const { status } = await readyz(node);
          answers.get(node.name)!.push({ status, ms: Date.now() - started });
        }),
      );
      await sleep(periodMs);
    }
  })();
  return { done, answers };
}

describe('a frozen Redis (SIGSTOP: connections open, nothing answers) under load', () => {
  const cluster = outageNodes(['api', 'gateway']);

  it('sends stay 202 without waiting on it, probes pass, handshakes and bad tokens are answered, every 202 arrives after', async () => {
    const { adminToken, redis, nodes } = cluster;
    const FREEZE_MS = 8_000;
    const [api, gateway] = nodes;
    const client = new TestClient(api.url);
    const alice = await createAgent(client, adminToken, '@fz.alice');
    const bob = await createAgent(client, adminToken, '@fz.bob');
    for (const node of nodes)
      await until(
        `${node.name} ready`,
        () => readyz(node),
        (r) => r.body?.checks?.redis === true,
      );
    const socket: Listener = await connect(gateway.url, { token: bob });

    const sent: Array<{ id: string; status: number; at: number; ms: number }> = [];
    let loading = true;
    const load = (async () => {
      for (let n = 0; loading; n++) {
        const started = Date.now();
        const result = await send(api.url, alice, '@fz.bob', n);
        sent.push({ ...result, at: started, ms: Date.now() - started });
        await sleep(20);
      }
    })();
    const probes = probeEvery(nodes, 1_000, () => loading);

    await sleep(1_500);
    const errorsBefore = (await metric(api, 'roost_redis_errors_total{component="rate_limit"}')) ?? 0;
    const frozenAt = Date.now();
    redis.pause();
    await sleep(2_000);
    // Meanwhile a new socket of the agent (its lease is in Redis) and a bad token (its failure is
    // counted in Redis) are answered, the per-gateway and per-node limits standing in.
    const handshakeStarted = Date.now();
    const second = await connect(gateway.url, { token: bob });
    const handshakeMs = Date.now() - handshakeStarted;
    second.close();
    const badStarted = Date.now();
    const bad = await client.get('/mailbox', `bad-${ulid()}`);
    const badMs = Date.now() - badStarted;
    await sleep(Math.max(0, frozenAt + FREEZE_MS - Date.now()));
    const errorsFrozen = (await metric(api, 'roost_redis_errors_total{component="rate_limit"}')) ?? 0;
    const resumedAt = Date.now();
    redis.resume();
    await until(
      'api redis back',
      () => readyz(api),
      (r) => r.body?.checks?.redis === true,
    );
    await sleep(2_000);
    loading = false;
    await Promise.all([load, probes.done]);

    const during = sent.filter((s) => s.at >= frozenAt && s.at < resumedAt);
    const slow = during.filter((s) => s.ms > 300);
    if (process.env.ROOST_TEST_VERBOSE) {
      console.log({
        sent: sent.length,
        during: during.length,
        slowest: during
          .map((s) => s.ms)
          .sort((a, b) => b - a)
          .slice(0, 10),
        handshakeMs,
        badMs,
        rateLimitErrors: errorsFrozen - errorsBefore,
        probes: Object.fromEntries(probes.answers),
      });
    }
    expect(sent.filter((s) => s.status !== 202)).toEqual([]);
    // The first send to meet the freeze waits out the limiter's command timeout (500 ms); after
    // that the limiter knows Redis is not answering and no send waits on it until it answers again.
    expect(during.length).toBeGreaterThan(50);
    expect(slow.length).toBeLessThanOrEqual(2);
    // The failures are still counted while no request asks Redis: the failed call, then each failed
    // probe (one every 1.5 s: a second apart, each waiting its 500 ms timeout), so an alert on the
    // counter's rate (RoostRedisErrors) holds for the whole outage.
    expect(errorsFrozen - errorsBefore).toBeGreaterThanOrEqual(4);
    expect(handshakeMs).toBeLessThan(1_500);
    expect(bad.status).toBe(401);
    expect(badMs).toBeLessThan(1_500);
    // Every probe passed within the chart's 3 s probe timeout (`readyz` gives up then: status 0).
    // During the freeze a probe takes the readiness check's 2 s bound on the Redis ping.
    for (const [name, answers] of probes.answers) {
      expect({ name, failed: answers.filter((a) => a.status !== 200) }).toEqual({ name, failed: [] });
    }
    // Every 202 reaches the socket once Redis answers again (or by backfill from Postgres).
    await socket.until(
      () => sent.every((s) => socket.ids.includes(s.id)),
      30_000,
      'every accepted envelope on the socket',
    );
    expect(new Set(socket.ids).size).toBe(socket.ids.length);
    socket.close();
    // Each limiter said once that it went on alone, and once that it shares its limits again.
    for (const [node, context] of [
      [api, 'rate-limit'],
      [api, 'auth-fail-limit'],
      [gateway, 'ws-limit'],
    ] as const) {
      expect([
        context,
        logLines(node, /^Redis unavailable \(Command timed out\); .* until it returns$/, context).length,
        logLines(node, /^Redis is back; limits are shared again$/, context).length,
      ]).toEqual([context, 1, 1]);
    }
  });
});
