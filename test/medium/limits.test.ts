import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import Redis from 'ioredis';
import pg from 'pg';
import { AuthService, UNKNOWN_TOKEN_WINDOW_MS } from '#core';
import { AgentsRepository, OrgsRepository } from '#db';
import { ulid } from '#domain';
import { SocketLeases } from '../../apps/gateway/src/socket-leases';
import { envelope, startOperator, twoNodes, type TestOperator } from '../support/operator';
import { testRedisUrl } from '../support/services';
import { connect, refusal, type Listener, type Refusal } from '../support/ws';
import type { Reply } from '../support/client';
import { RedisServer } from '../e2e/cluster';

/**
 * Every limit of EXTENSIONS.md §7 answers `429 RATE_LIMITED` with `Retry-After` and the ASMTP error
 * body, is shared by the nodes of one deployment through Redis, and moves its metrics.
 */

/** Figures for the report, printed when ROOST_LIMITS_FIGURES is set. */
const figure = (text: string) => {
  if (process.env.ROOST_LIMITS_FIGURES) process.stderr.write(`limits figure: ${text}\n`);
};

const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

async function metric(op: TestOperator, name: string, labels = ''): Promise<number> {
  const text = (await op.client.get('/metrics')).text;
  const line = text.split('\n').find((candidate) => candidate.startsWith(`${name}${labels ? `{${labels}}` : ''} `));
  return line === undefined ? 0 : Number(line.split(' ')[1]);
}

function expectRateLimited(reply: Pick<Reply, 'status' | 'body'> & { retryAfter: string | null | undefined }): void {
  expect(reply.status).toBe(429);
  expect(reply.body).toEqual({ error: { code: 'RATE_LIMITED', message: expect.any(String) } });
  expect(reply.retryAfter).toMatch(/^[1-9]\d*$/);
}

const restLimited = (reply: Reply) => expectRateLimited({ ...reply, retryAfter: reply.headers.get('retry-after') });
const wsLimited = (refused: Refusal) =>
  expectRateLimited({ ...refused, retryAfter: refused.headers['retry-after'] as string | undefined });

describe('per-agent REST rate limit, shared by two api nodes through Redis', () => {
  let a: TestOperator;
  let b: TestOperator;

  beforeAll(async () => {
    [a, b] = await twoNodes({ ROOST_RATE_LIMIT_PER_S: '1', ROOST_RATE_LIMIT_BURST: '10' });
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  it('past the burst, requests on either node get 429 RATE_LIMITED with Retry-After; other agents are untouched', async () => {
    const alice = await a.agent('@rl.alice');
    const bob = await a.agent('@rl.bob');
    const before =
      (await metric(a, 'roost_rate_limited_total', 'limit="agent"')) +
      (await metric(b, 'roost_rate_limited_total', 'limit="agent"'));
    const started = Date.now();
    const replies: Reply[] = [];
    for (let i = 0; i < 40; i++) replies.push(await (i % 2 === 0 ? a : b).client.get('/mailbox', alice));
    const seconds = (Date.now() - started) / 1000;
    const ok = replies.filter((reply) => reply.status === 200).length;
    const limited = replies.filter((reply) => reply.status === 429);
    figure(
      `agent limit 1/s burst 10, 40 GET /mailbox over two nodes in ${seconds.toFixed(1)} s: ${ok} → 200, ${limited.length} → 429`,
    );
    // One bucket for both nodes: the burst plus what refilled meanwhile, not a burst per node.
    expect(ok).toBeGreaterThanOrEqual(10);
    expect(ok).toBeLessThanOrEqual(10 + Math.ceil(seconds) + 1);
    expect(ok).toBeLessThan(20);
    expect(ok + limited.length).toBe(40);
    limited.forEach(restLimited);
    // Both nodes refused some: each saw the bucket the other drained.
    expect(replies.filter((reply, i) => reply.status === 429 && i % 2 === 0).length).toBeGreaterThan(0);
    expect(replies.filter((reply, i) => reply.status === 429 && i % 2 === 1).length).toBeGreaterThan(0);
    const after =
      (await metric(a, 'roost_rate_limited_total', 'limit="agent"')) +
      (await metric(b, 'roost_rate_limited_total', 'limit="agent"'));
    expect(after - before).toBe(limited.length);
    // A refused request changed nothing, and another agent has its own bucket.
    expect((await a.client.get('/mailbox', bob)).status).toBe(200);
  });
});

describe('failed authentications, limited per client address', () => {
  let a: TestOperator;
  let b: TestOperator;
  let untrusting: TestOperator;

  beforeAll(async () => {
    // The test client connects from 127.0.0.1, which these nodes treat as their load balancer.
    [a, b] = await twoNodes({ ROOST_AUTH_FAIL_LIMIT_PER_S: '1', ROOST_TRUSTED_PROXIES: '127.0.0.1/32, ::1' });
    untrusting = await startOperator({ backend: 'postgres', redis: true, env: { ROOST_AUTH_FAIL_LIMIT_PER_S: '1' } });
  });
  afterAll(async () => {
    await untrusting?.close();
    await b?.close();
    await a?.close();
  });

  const from = (address: string) => ({ 'x-forwarded-for': address });

  it('past 5 failures (burst 5×) an address gets 429 on either node, for any token, REST and handshake alike', async () => {
    const good = await a.agent('@af.good');
    const before =
      (await metric(a, 'roost_rate_limited_total', 'limit="auth_fail"')) +
      (await metric(b, 'roost_rate_limited_total', 'limit="auth_fail"'));
    const handshakesBefore = await metric(b, 'roost_ws_handshakes_total', 'outcome="rate_limited"');
    const started = Date.now();
    const replies: Reply[] = [];
    for (let i = 0; i < 20; i++) {
      const op = i % 2 === 0 ? a : b;
      replies.push(
        await op.client.request('GET', '/mailbox', { token: `bad-${ulid()}`, headers: from('203.0.113.10') }),
      );
    }
    const seconds = (Date.now() - started) / 1000;
    const unauthorized = replies.filter((reply) => reply.status === 401).length;
    const limited = replies.filter((reply) => reply.status === 429);
    figure(
      `auth-fail limit 1/s burst 5, 20 bad tokens from one address over two nodes in ${seconds.toFixed(1)} s: ${unauthorized} → 401, ${limited.length} → 429`,
    );
    expect(replies.slice(0, 5).map((reply) => reply.status)).toEqual([401, 401, 401, 401, 401]);
    expect(unauthorized).toBeLessThanOrEqual(5 + Math.ceil(seconds) + 1);
    expect(unauthorized + limited.length).toBe(20);
    limited.forEach(restLimited);
    // Refused too while the address is over its limit: a good token, no token, the handshake.
    restLimited(await b.client.request('GET', '/mailbox', { token: good, headers: from('203.0.113.10') }));
    restLimited(await a.client.request('GET', '/mailbox', { headers: from('203.0.113.10') }));
    wsLimited(await refusal(b.url, { token: `bad-${ulid()}`, headers: from('203.0.113.10') }));
    expect(await metric(b, 'roost_ws_handshakes_total', 'outcome="rate_limited"')).toBe(handshakesBefore + 1);
    const after =
      (await metric(a, 'roost_rate_limited_total', 'limit="auth_fail"')) +
      (await metric(b, 'roost_rate_limited_total', 'limit="auth_fail"'));
    expect(after - before).toBe(limited.length + 3);
    // Another address is not affected, and a good token from it works.
    expect((await a.client.request('GET', '/mailbox', { token: good, headers: from('203.0.113.11') })).status).toBe(
      200,
    );
    expect(
      (await a.client.request('GET', '/mailbox', { token: `bad-${ulid()}`, headers: from('203.0.113.11') })).status,
    ).toBe(401);
  });

  it('the handshake: bad tokens count, and past the limit it is refused 429 before any upgrade', async () => {
    const address = from('203.0.113.20');
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++)
      statuses.push((await refusal(a.url, { token: `bad-${ulid()}`, headers: address })).status);
    expect(statuses.slice(0, 5)).toEqual([401, 401, 401, 401, 401]);
    expect(statuses.slice(5)).toContain(429);
    expect(await metric(a, 'roost_ws_handshakes_total', 'outcome="unauthorized"')).toBeGreaterThanOrEqual(5);
  });

  it('admin routes: wrong admin tokens count against the address', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) {
      statuses.push(
        (
          await b.client.request('GET', '/_admin/agents', {
            token: `wrong-admin-${ulid()}`,
            headers: from('203.0.113.30'),
          })
        ).status,
      );
    }
    expect(statuses.slice(0, 5)).toEqual([401, 401, 401, 401, 401]);
    expect(statuses.slice(5)).toContain(429);
  });

  it('X-Forwarded-For from a peer that is not a trusted proxy is ignored: changing it does not evade the limit', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 10; i++) {
      statuses.push(
        (
          await untrusting.client.request('GET', '/mailbox', {
            token: `bad-${ulid()}`,
            headers: from(`198.51.100.${i}`),
          })
        ).status,
      );
    }
    expect(statuses.slice(0, 5)).toEqual([401, 401, 401, 401, 401]);
    expect(statuses.filter((status) => status === 429).length).toBeGreaterThanOrEqual(3);
  });
});

describe('unknown tokens do not reach Postgres twice within the window', () => {
  let a: TestOperator;
  let b: TestOperator;
  let db: pg.Client;

  beforeAll(async () => {
    [a, b] = await twoNodes({ ROOST_AUTH_FAIL_LIMIT_PER_S: '0' });
    db = new pg.Client({ connectionString: a.config.databaseUrl! });
    await db.connect();
  });
  afterAll(async () => {
    await db?.end();
    await b?.close();
    await a?.close();
  });

  it('a bad agent token repeated 50 times costs one lookup; the cache hits are counted', async () => {
    const lookups = jest.spyOn(a.app.get(AgentsRepository), 'findSendersAndRecipients');
    const hits = await metric(a, 'roost_auth_unknown_token_hits_total');
    const bad = `bad-${ulid()}`;
    const statuses: number[] = [];
    for (let i = 0; i < 50; i++) statuses.push((await a.client.get('/mailbox', bad)).status);
    expect(new Set(statuses)).toEqual(new Set([401]));
    figure(`negative cache: one bad token × 50 → ${lookups.mock.calls.length} database lookup(s)`);
    expect(lookups.mock.calls.length).toBe(1);
    expect(await metric(a, 'roost_auth_unknown_token_hits_total')).toBe(hits + 49);
    // The handshake shares the cache.
    expect((await refusal(a.url, { token: bad })).status).toBe(401);
    expect(lookups.mock.calls.length).toBe(1);
    lookups.mockRestore();
  });

  it('a bad org admin token repeated costs one lookup', async () => {
    const lookups = jest.spyOn(a.app.get(OrgsRepository), 'findByTokenHash');
    const bad = `bad-admin-${ulid()}`;
    for (let i = 0; i < 20; i++) expect((await a.client.get('/_admin/agents', bad)).status).toBe(401);
    expect(lookups.mock.calls.length).toBe(1);
    lookups.mockRestore();
  });

  it('a token created or rotated just now works at once on every node; a rotated-out token is refused at once', async () => {
    // Both nodes have refused unknown tokens a moment ago (their caches are warm).
    for (const op of [a, b]) expect((await op.client.get('/mailbox', `bad-${ulid()}`)).status).toBe(401);
    const created = await a.agent('@nc.carol');
    expect((await a.client.get('/mailbox', created)).status).toBe(200);
    expect((await b.client.get('/mailbox', created)).status).toBe(200);
    const rotated = await b.client.post('/_admin/agents/@nc.carol/rotate-token', {}, a.adminToken);
    expect(rotated.status).toBe(200);
    const fresh = rotated.body.token as string;
    for (const op of [a, b]) {
      expect((await op.client.get('/mailbox', fresh)).status).toBe(200);
      expect((await op.client.get('/mailbox', created)).status).toBe(401);
    }
    const org = await a.client.post('/_admin/orgs', { name: 'ncorg' }, a.adminToken);
    expect(org.status).toBe(201);
    expect((await b.client.get('/_admin/agents', org.body.admin_token as string)).status).toBe(200);
  });

  it('a token that appears in the database by other means (a restore) is refused for at most the window', async () => {
    const dave = await a.agent('@nc.dave');
    const restored = `restored-${ulid()}`;
    expect((await a.client.get('/mailbox', restored)).status).toBe(401);
    await db.query('update agents set token_hash = $1 where handle = $2', [sha256(restored), '@nc.dave']);
    expect((await a.client.get('/mailbox', dave)).status).toBe(401);
    // Still cached on the node that saw it; another node never did.
    expect((await a.client.get('/mailbox', restored)).status).toBe(401);
    expect((await b.client.get('/mailbox', restored)).status).toBe(200);
    await sleep(UNKNOWN_TOKEN_WINDOW_MS + 100);
    expect((await a.client.get('/mailbox', restored)).status).toBe(200);
    // Minting drops the node's own entry at once (the hook the admin service calls).
    const another = `restored-${ulid()}`;
    expect((await a.client.get('/mailbox', another)).status).toBe(401);
    await db.query('update agents set token_hash = $1 where handle = $2', [sha256(another), '@nc.dave']);
    a.app.get(AuthService).tokenIssued(sha256(another));
    expect((await a.client.get('/mailbox', another)).status).toBe(200);
  });
});

describe('open sockets per agent, across gateways', () => {
  let a: TestOperator;
  let b: TestOperator;
  let redis: Redis;
  const open: Listener[] = [];

  beforeAll(async () => {
    [a, b] = await twoNodes({ ROOST_WS_MAX_PER_AGENT: '2' });
    redis = new Redis(testRedisUrl());
  });
  afterAll(async () => {
    for (const listener of open) listener.close();
    redis?.disconnect();
    await b?.close();
    await a?.close();
  });

  const leaseKey = (op: TestOperator, agentId: number) => op.app.get(SocketLeases).keyOf(agentId);
  const agentId = async (op: TestOperator, handle: string) =>
    (await op.app.get(AgentsRepository).findByHandle(handle))!.id;

  it('the third socket of an agent holding two (one per gateway) is refused 429 with Retry-After, leaving nothing behind', async () => {
    const token = await a.agent('@ws.erin');
    const other = await a.agent('@ws.frank');
    const key = leaseKey(a, await agentId(a, '@ws.erin'));
    const acceptedBefore = await metric(a, 'roost_ws_handshakes_total', 'outcome="accepted"');
    open.push(await connect(a.url, { token }), await connect(b.url, { token }));
    expect(await metric(a, 'roost_ws_handshakes_total', 'outcome="accepted"')).toBe(acceptedBefore + 1);
    expect(await redis.zcard(key)).toBe(2);
    const connectionsBefore = await metric(a, 'roost_ws_connections');
    const limitedBefore = await metric(a, 'roost_rate_limited_total', 'limit="ws"');
    const handshakesBefore = await metric(a, 'roost_ws_handshakes_total', 'outcome="rate_limited"');
    const attempts = 10;
    let refused = 0;
    for (let i = 0; i < attempts; i++) {
      const refusedOne = await refusal(i % 2 === 0 ? a.url : b.url, { token });
      wsLimited(refusedOne);
      refused++;
    }
    figure(`socket cap 2 per agent across two gateways: 2 open, ${attempts} more handshakes → ${refused} refused 429`);
    expect(await metric(a, 'roost_rate_limited_total', 'limit="ws"')).toBe(limitedBefore + attempts / 2);
    expect(await metric(a, 'roost_ws_handshakes_total', 'outcome="rate_limited"')).toBe(
      handshakesBefore + attempts / 2,
    );
    expect(await metric(a, 'roost_ws_connections')).toBe(connectionsBefore);
    expect(await redis.zcard(key)).toBe(2);
    // Another agent is not affected.
    open.push(await connect(b.url, { token: other }));
    // A handshake refused for another reason (bad cursor) holds no slot either.
    const bad = await refusal(a.url, { token, query: { after_created_at: '1' } });
    expect(bad.status).toBe(400);
    expect(await redis.zcard(key)).toBe(2);
    // Closing one socket frees its slot at once.
    open[1].close();
    await waitFor(async () => (await redis.zcard(key)) === 1, 'the closed socket’s lease to go');
    open.push(await connect(a.url, { token }));
    expect(await redis.zcard(key)).toBe(2);
  });

  it('50 concurrent handshakes of one agent over two gateways: exactly the cap is accepted (the count is atomic)', async () => {
    const token = await a.agent('@ws.ivy');
    const outcomes = await Promise.allSettled(
      Array.from({ length: 50 }, (_, i) => connect(i % 2 === 0 ? a.url : b.url, { token })),
    );
    const accepted = outcomes.filter(
      (outcome): outcome is PromiseFulfilledResult<Listener> => outcome.status === 'fulfilled',
    );
    const refused = outcomes.filter((outcome): outcome is PromiseRejectedResult => outcome.status === 'rejected');
    figure(`50 concurrent handshakes, cap 2, two gateways: ${accepted.length} accepted, ${refused.length} refused 429`);
    expect(accepted).toHaveLength(2);
    refused.forEach((outcome) => wsLimited(outcome.reason as Refusal));
    open.push(...accepted.map((outcome) => outcome.value));
  });

  it('a lease its gateway stopped renewing (the gateway died) stops counting when it expires', async () => {
    const token = await a.agent('@ws.gina');
    const key = leaseKey(a, await agentId(a, '@ws.gina'));
    open.push(await connect(a.url, { token }));
    const [seconds, micros] = await redis.time();
    await redis.zadd(key, Number(seconds) * 1000 + Math.floor(Number(micros) / 1000) + 1_500, 'dead-gateway:1');
    wsLimited(await refusal(b.url, { token }));
    await sleep(1_600);
    open.push(await connect(b.url, { token }));
    expect(await redis.zscore(key, 'dead-gateway:1')).toBeNull();
  });

  it('a gateway shutting down frees its leases, so its clients can reconnect elsewhere at once', async () => {
    const token = await a.agent('@ws.hank');
    const key = leaseKey(a, await agentId(a, '@ws.hank'));
    const c = await startOperator({
      backend: 'postgres',
      databaseUrl: a.config.databaseUrl!,
      env: {
        ROOST_WS_MAX_PER_AGENT: '2',
        ROOST_ADMIN_TOKEN: a.adminToken,
        REDIS_URL: testRedisUrl(),
        ROOST_REDIS_PREFIX: a.config.redisPrefix,
      },
    });
    const onC = [await connect(c.url, { token }), await connect(c.url, { token })];
    wsLimited(await refusal(a.url, { token }));
    await c.app.close();
    await Promise.all(onC.map((listener) => listener.untilClosed()));
    expect(await redis.zcard(key)).toBe(0);
    open.push(await connect(a.url, { token }), await connect(b.url, { token }));
  });
});

describe('resume replays: queued per gateway and paced per socket', () => {
  let op: TestOperator;

  beforeAll(async () => {
    op = await startOperator({
      backend: 'postgres',
      env: { ROOST_WS_REPLAY_CONCURRENCY: '4', ROOST_WS_REPLAY_FRAMES_PER_S: '100' },
    });
  });
  afterAll(async () => op?.close());

  const FROM_START = { after_created_at: '0', after_envelope_id: `01${'0'.repeat(24)}` };
  const completeAt = (listener: Listener) => listener.frames.findIndex((frame) => frame.op === 'replay.complete');

  it('an agent’s second replay waits for a slot (one agent holds at most a quarter of them) while another agent’s runs; nobody is refused', async () => {
    const sender = await op.agent('@rp.sender');
    const busy = await op.agent('@rp.busy');
    const quiet = await op.agent('@rp.quiet');
    for (let i = 0; i < 150; i += 10) {
      await Promise.all(Array.from({ length: 10 }, () => op.client.post('/messages', envelope('@rp.busy'), sender)));
    }
    for (let i = 0; i < 10; i++)
      expect((await op.client.post('/messages', envelope('@rp.quiet'), sender)).status).toBe(202);

    const events: string[] = [];
    const started = Date.now();
    const first = await connect(op.url, { token: busy, query: FROM_START });
    await first.until(() => first.frames.length > 0, 5_000, 'the first replay to start');
    const second = await connect(op.url, { token: busy, query: FROM_START });
    const other = await connect(op.url, { token: quiet, query: FROM_START });
    second.ws.once('message', () => events.push('second started'));
    await other.until(() => completeAt(other) >= 0, 10_000, 'the other agent’s replay');
    events.push('other complete');
    // The busy agent's second socket is still waiting for the first to finish.
    expect(second.frames).toHaveLength(0);
    expect(await metricOf(op, 'roost_ws_replays', 'state="waiting"')).toBe(1);
    expect(await metricOf(op, 'roost_ws_replays', 'state="active"')).toBe(1);
    await first.until(() => completeAt(first) >= 0, 10_000, 'the first replay');
    const firstSeconds = (Date.now() - started) / 1000;
    await second.until(() => completeAt(second) >= 0, 10_000, 'the second replay');
    expect(events[0]).toBe('other complete');
    expect(first.notifies).toHaveLength(150);
    expect(second.notifies).toHaveLength(150);
    expect(other.notifies).toHaveLength(10);
    // 150 frames at 100/s: the pace held (a lower bound, not a speed claim).
    figure(
      `replay pace 100 frames/s: 150 frames in ${firstSeconds.toFixed(2)} s; concurrency 4 → second socket of one agent queued`,
    );
    expect(firstSeconds).toBeGreaterThanOrEqual(1.2);
    for (const listener of [first, second, other]) listener.close();
  });
});

describe('while Redis is down (a private redis-server, killed)', () => {
  let server: RedisServer;
  let op: TestOperator;

  beforeAll(async () => {
    server = await RedisServer.start();
    op = await startOperator({
      backend: 'postgres',
      env: {
        REDIS_URL: server.url,
        ROOST_REDIS_PREFIX: `roost-test:${ulid()}:`,
        ROOST_RATE_LIMIT_PER_S: '1',
        ROOST_RATE_LIMIT_BURST: '3',
        ROOST_AUTH_FAIL_LIMIT_PER_S: '1',
        ROOST_WS_MAX_PER_AGENT: '2',
      },
    });
  });
  afterAll(async () => {
    // Back up, then close at once while the clients are still reconnecting: the frame bus's close
    // settles in that state too (test/medium/redis-bus-close.test.ts).
    if (server) await server.start().catch(() => undefined);
    await op?.close();
    await server?.kill();
  });

  it('the agent limit and auth failures are kept per node, sockets capped per gateway, and the errors are counted', async () => {
    const ivan = await op.agent('@rd.ivan');
    // Shared limits work while Redis is up.
    const up: number[] = [];
    for (let i = 0; i < 6; i++) up.push((await op.client.get('/mailbox', ivan)).status);
    expect(up.filter((status) => status === 429).length).toBeGreaterThan(0);

    await server.kill();
    const errorsBefore = await metric(op, 'roost_redis_errors_total', 'component="rate_limit"');
    const started = Date.now();
    const down: Reply[] = [];
    for (let i = 0; i < 20; i++) down.push(await op.client.get('/mailbox', ivan));
    const seconds = (Date.now() - started) / 1000;
    const ok = down.filter((reply) => reply.status === 200).length;
    figure(`Redis down, agent limit 1/s burst 3: 20 requests → ${ok} × 200, ${20 - ok} × 429 (this node's bucket)`);
    // This node's own bucket, full when Redis went: the burst, then what refilled meanwhile.
    expect(down.slice(0, 3).map((reply) => reply.status)).toEqual([200, 200, 200]);
    expect(ok).toBeLessThanOrEqual(3 + Math.ceil(seconds) + 1);
    down.filter((reply) => reply.status !== 200).forEach(restLimited);
    expect(await metric(op, 'roost_redis_errors_total', 'component="rate_limit"')).toBeGreaterThan(errorsBefore);

    const failures: number[] = [];
    for (let i = 0; i < 8; i++) failures.push((await op.client.get('/mailbox', `bad-${ulid()}`)).status);
    figure(
      `Redis down, auth-fail limit 1/s burst 5: 8 bad tokens → ${failures.filter((s) => s === 401).length} × 401, ${failures.filter((s) => s === 429).length} × 429 (per node)`,
    );
    expect(failures.slice(0, 5)).toEqual([401, 401, 401, 401, 401]);
    expect(failures.slice(5)).toContain(429);
    expect(await metric(op, 'roost_redis_errors_total', 'component="auth_fail_limit"')).toBeGreaterThan(0);
    await sleep(1_100 * 5); // let the address's local bucket refill before the handshakes below

    const sockets = [await connect(op.url, { token: ivan }), await connect(op.url, { token: ivan })];
    wsLimited(await refusal(op.url, { token: ivan }));
    expect(await metric(op, 'roost_redis_errors_total', 'component="ws_limit"')).toBeGreaterThan(0);
    sockets[0].close();
    await waitFor(async () => (await metric(op, 'roost_ws_connections')) === 1, 'the closed socket to go');
    const again = await connect(op.url, { token: ivan });
    for (const listener of [sockets[1], again]) listener.close();
  });
});

const metricOf = metric;

async function waitFor(check: () => Promise<boolean>, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}
