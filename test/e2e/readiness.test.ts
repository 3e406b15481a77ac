import { createServer, connect as tcpConnect, type Server, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { ulid } from '#domain';
import { TestClient } from '../support/client';
import { createTestDatabase } from '../support/database';
import { freePort, readyz, startAll, stopAll, TestProcess, operatorEnv, type Ready } from '../support/processes';
import { connect, type Listener } from '../support/ws';
import { RedisServer } from './cluster';

/**
 * Readiness and shutdown of real operator processes (`node dist/apps/roost/src/main.js`):
 *
 * - `/readyz` follows Postgres (every role) and Redis (the worker only; api and gateway report it): each process reaches them through a loopback TCP proxy
 *   written here, and a dependency "stops" when its proxy drops every connection and refuses new
 *   ones, and "starts" when it listens again (the machine's services are never touched; Redis is a
 *   private `redis-server` behind its proxy). While Postgres is away `POST /messages` answers 503,
 *   never 500 nor 202, and nothing of those requests exists after it returns.
 * - SIGTERM under a steady stream of sends loses no `202`: every acknowledged id is in the
 *   recipient's mailbox (read through another process); everything else was a clean 503 or a
 *   connection error; the process exits 0 within ROOST_SHUTDOWN_TIMEOUT_MS.
 * - A gateway that gets SIGTERM closes its sockets with 1012 and exits 0.
 */

/** A loopback TCP proxy to `target` that can drop everything and refuse connections, then come back. */
class TcpProxy {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  /** Connections accepted since start (to prove traffic really goes through the proxy). */
  accepted = 0;

  private constructor(
    readonly port: number,
    private readonly target: { host: string; port: number },
  ) {}

  static async start(target: { host: string; port: number }): Promise<TcpProxy> {
    const proxy = new TcpProxy(await freePort(), target);
    await proxy.up();
    return proxy;
  }

  get running(): boolean {
    return this.server !== undefined;
  }

  /** Listen (again) on the same port. */
  async up(): Promise<void> {
    if (this.server) return;
    const server = createServer((client) => {
      this.accepted++;
      const upstream = tcpConnect(this.target.port, this.target.host);
      this.sockets.add(client);
      this.sockets.add(upstream);
      const drop = () => {
        client.destroy();
        upstream.destroy();
        this.sockets.delete(client);
        this.sockets.delete(upstream);
      };
      client.on('error', drop).on('close', drop);
      upstream.on('error', drop).on('close', drop);
      client.pipe(upstream);
      upstream.pipe(client);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.server = server;
  }

  /** Stop listening (new connections are refused) and cut every open connection. */
  async down(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const socket of this.sockets) socket.destroy();
    this.sockets.clear();
    await closed;
  }
}

/** Poll `/readyz` of every node until each answers `status`; returns the last answers. */
async function untilReady(nodes: TestProcess[], status: number, timeoutMs = 20_000): Promise<Ready[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const answers = await Promise.all(nodes.map(readyz));
    if (answers.every((a) => a.status === status)) return answers;
    if (Date.now() > deadline) {
      const dead = nodes
        .filter((node) => !node.running)
        .map((node) => `${node.name} exited:\n${node.output.slice(-30).join('\n')}`);
      throw new Error(
        `/readyz never became ${status}: ${JSON.stringify(answers.map((a, i) => ({ node: nodes[i].name, ...a })))}\n${dead.join('\n')}`,
      );
    }
    await sleep(100);
  }
}

interface Outcome {
  id: string;
  status: number; // 0 = no HTTP answer (connection error)
  sentAt: number;
  answeredAt: number;
  code?: string;
}

/** POST /messages with plain fetch (the test client would throw on a dropped connection). */
async function postMessage(url: string, token: string, to: string, n: number): Promise<Outcome> {
  const id = ulid();
  const sentAt = Date.now();
  try {
    const response = await fetch(`${url}/messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        id,
        to: [to],
        date_ms: sentAt,
        subject: `load ${n}`,
        content_parts: [{ type: 'text', text: `message ${n}` }],
      }),
      signal: AbortSignal.timeout(15_000),
    });
    const text = await response.text();
    let code: string | undefined;
    if (response.status !== 202) code = (JSON.parse(text) as { error?: { code?: string } }).error?.code;
    else expect((JSON.parse(text) as { id: string }).id).toBe(id);
    return { id, status: response.status, sentAt, answeredAt: Date.now(), code };
  } catch {
    return { id, status: 0, sentAt, answeredAt: Date.now() };
  }
}

/** Every `in` header id of an agent, through `client`. */
async function inboxIds(client: TestClient, token: string): Promise<string[]> {
  const ids: string[] = [];
  let query = '';
  for (;;) {
    const reply = await client.get(`/mailbox?order=asc&limit=1000${query}`, token);
    if (reply.status !== 200) throw new Error(`GET /mailbox: ${reply.status} ${reply.text}`);
    ids.push(...reply.body.envelope_headers.map((h: { id: string }) => h.id));
    const cursor = reply.body.next_cursor;
    if (cursor === null) return ids;
    query = `&after_created_at=${cursor.created_at}&after_envelope_id=${cursor.envelope_id}`;
  }
}

async function createAgent(client: TestClient, adminToken: string, handle: string): Promise<string> {
  const reply = await client.post('/_admin/agents', { handle, policy: 'open' }, adminToken);
  if (reply.status !== 201) throw new Error(`creating ${handle}: ${reply.status} ${reply.text}`);
  return reply.body.token as string;
}

describe('/readyz follows Postgres (and Redis for the worker); POST /messages during a Postgres outage', () => {
  let database: { url: string; drop: () => Promise<void> };
  let redis: RedisServer;
  let pgProxy: TcpProxy;
  let redisProxy: TcpProxy;
  let proxied: TestProcess[] = [];
  let direct: TestProcess | undefined;
  let sql: pg.Client;
  const adminToken = `admin-${ulid()}`;

  beforeAll(async () => {
    database = await createTestDatabase('roost_e2e');
    redis = await RedisServer.start();
    const dbUrl = new URL(database.url);
    pgProxy = await TcpProxy.start({ host: dbUrl.hostname, port: Number(dbUrl.port || 5432) });
    redisProxy = await TcpProxy.start({ host: '127.0.0.1', port: redis.port });
    const viaProxy = new URL(database.url);
    viaProxy.hostname = '127.0.0.1';
    viaProxy.port = String(pgProxy.port);
    const common = {
      ROOST_ADMIN_TOKEN: adminToken,
      ROOST_LOG_LEVEL: 'warn',
      ROOST_HOST: '127.0.0.1',
      ROOST_REDIS_PREFIX: `roost-e2e:${ulid()}:`,
      ROOST_RATE_LIMIT_PER_S: '0',
    };
    const env = { ...common, DATABASE_URL: viaProxy.toString(), REDIS_URL: `redis://127.0.0.1:${redisProxy.port}` };
    proxied = await startAll(
      (['api', 'gateway', 'worker'] as const).map((role) => ({
        name: `${role} (proxied)`,
        env: { ...env, ROOST_ROLE: role },
      })),
    );
    // A second api straight to Postgres and Redis: how the test looks at state during and after.
    direct = await TestProcess.start({
      name: 'api (direct)',
      env: { ...common, ROOST_ROLE: 'api', DATABASE_URL: database.url, REDIS_URL: redis.url },
    });
    sql = new pg.Client({ connectionString: database.url });
    await sql.connect();
  });

  afterAll(async () => {
    await sql?.end();
    await stopAll([...proxied, direct]);
    await pgProxy?.down();
    await redisProxy?.down();
    await redis?.kill();
    await database?.drop();
  });

  it('503 while Postgres is down (checks.postgres false), 200 once it is back; sends answer 503 and leave nothing behind', async () => {
    const [api] = proxied;
    const client = new TestClient(api.url);
    const checker = new TestClient(direct!.url);
    const alice = await createAgent(checker, adminToken, '@rz.alice');
    const bob = await createAgent(checker, adminToken, '@rz.bob');

    const up = await untilReady(proxied, 200);
    for (const answer of up) expect(answer.body).toEqual({ ok: true, checks: { postgres: true, redis: true } });
    // The proxied api really works, through the proxy.
    const before = await postMessage(api.url, alice, '@rz.bob', 0);
    expect(before.status).toBe(202);
    expect(pgProxy.accepted).toBeGreaterThan(0);

    // Cut Postgres under load: sends in flight through the proxied api (their transactions hold
    // pool clients), the worker ticking. Each of those answers 202 or 503, and every process lives.
    const cut = await createAgent(checker, adminToken, '@rz.cut');
    const underCut: Outcome[] = [];
    let stopAt = Number.POSITIVE_INFINITY;
    let n = 100;
    const loops = Promise.all(
      Array.from({ length: 8 }, async () => {
        while (Date.now() < stopAt) underCut.push(await postMessage(api.url, alice, '@rz.cut', n++));
      }),
    );
    const flowing = Date.now() + 20_000;
    while (underCut.filter((o) => o.status === 202).length < 10 && Date.now() < flowing) await sleep(20);
    await pgProxy.down();
    stopAt = Date.now() + 500;
    await loops;
    const down = await untilReady(proxied, 503);
    for (const answer of down) expect(answer.body).toEqual({ ok: false, checks: { postgres: false, redis: true } });
    // Alive all the same (a liveness probe must not restart a pod for a database outage).
    for (const node of proxied) expect((await fetch(`${node.url}/healthz`)).status).toBe(200);
    expect(proxied.map((node) => node.running)).toEqual([true, true, true]);
    expect(underCut.filter((o) => o.status === 202).length).toBeGreaterThanOrEqual(10);
    for (const o of underCut)
      expect(o.status === 202 ? [202] : [o.status, o.code]).toEqual(o.status === 202 ? [202] : [503, 'UNAVAILABLE']);

    const outage: Outcome[] = [];
    for (let n = 1; n <= 6; n++) outage.push(await postMessage(api.url, alice, '@rz.bob', n));
    outage.push(
      ...(await Promise.all(Array.from({ length: 6 }, (_, i) => postMessage(api.url, alice, '@rz.bob', 10 + i)))),
    );
    expect(outage.map((o) => [o.status, o.code])).toEqual(outage.map(() => [503, 'UNAVAILABLE']));
    const listing = await client.get('/mailbox', bob);
    expect([listing.status, listing.body?.error?.code]).toEqual([503, 'UNAVAILABLE']);

    await pgProxy.up();
    const back = await untilReady(proxied, 200);
    for (const answer of back) expect(answer.body).toEqual({ ok: true, checks: { postgres: true, redis: true } });

    // Nothing of the refused sends exists: no envelope row, no mailbox entry, no listing, no body.
    const ids = outage.map((o) => o.id);
    const rows = await sql.query(
      'SELECT (SELECT count(*) FROM envelopes WHERE id = ANY($1))::int AS envelopes, (SELECT count(*) FROM mailbox_entries WHERE envelope_id = ANY($1))::int AS entries',
      [ids],
    );
    expect(rows.rows[0]).toEqual({ envelopes: 0, entries: 0 });
    expect(await inboxIds(checker, bob)).toEqual([before.id]);
    for (const id of ids.slice(0, 3)) expect((await checker.get(`/messages/${id}`, alice)).status).toBe(404);
    // Sends cut mid-flight: every 202 is there; a 503 may still have committed (its answer was
    // lost with the connection) but then completely, never an envelope without its entry.
    const cutRows = await sql.query<{ id: string; entries: number }>(
      'SELECT e.id, (SELECT count(*) FROM mailbox_entries m WHERE m.envelope_id = e.id)::int AS entries FROM envelopes e WHERE e.id = ANY($1)',
      [underCut.map((o) => o.id)],
    );
    const stored = new Map(cutRows.rows.map((row) => [row.id, row.entries]));
    for (const o of underCut.filter((x) => x.status === 202)) expect(stored.has(o.id)).toBe(true);
    for (const entries of stored.values()) expect(entries).toBe(1);
    const orphans = await sql.query(
      'SELECT count(*)::int AS n FROM mailbox_entries m WHERE m.envelope_id = ANY($1) AND NOT EXISTS (SELECT 1 FROM envelopes e WHERE e.id = m.envelope_id)',
      [underCut.map((o) => o.id)],
    );
    expect(orphans.rows[0].n).toBe(0);
    expect((await inboxIds(checker, cut)).sort()).toEqual([...stored.keys()].sort());

    // A retry of a refused id after recovery is a first store, not a replay of something half-kept.
    const retry = await client.post(
      '/messages',
      { id: ids[0], to: ['@rz.bob'], date_ms: Date.now(), content_parts: [{ type: 'text', text: 'retried' }] },
      alice,
    );
    expect(retry.status).toBe(202);
    expect(await inboxIds(checker, bob)).toEqual([before.id, ids[0]]);
  });

  it('Redis down: api and gateway stay ready (checks.redis false), the worker answers 503; all 200 once it is back', async () => {
    const [api, gateway, worker] = proxied;
    const checker = new TestClient(direct!.url);
    const carol = await createAgent(checker, adminToken, '@rz.carol');
    const dave = await createAgent(checker, adminToken, '@rz.dave');
    await untilReady(proxied, 200);

    await redisProxy.down();
    // The worker's job queue is Redis: it cannot do its job. api and gateway can (Postgres only).
    const [down] = await untilReady([worker], 503);
    expect(down.body).toEqual({ ok: false, checks: { postgres: true, redis: false } });
    for (const node of [api, gateway]) {
      expect(await readyz(node)).toEqual({ status: 200, body: { ok: true, checks: { postgres: true, redis: false } } });
    }
    // Accepting needs Postgres only: the commit is the acknowledgement, the frame is best effort.
    const sent = await postMessage(api.url, carol, '@rz.dave', 1);
    expect(sent.status).toBe(202);

    await redisProxy.up();
    // api and gateway answered 200 throughout: wait until every node sees Redis again.
    const deadline = Date.now() + 20_000;
    let back = await Promise.all(proxied.map(readyz));
    while (!back.every((a) => a.status === 200 && a.body?.checks?.redis === true) && Date.now() < deadline) {
      await sleep(100);
      back = await Promise.all(proxied.map(readyz));
    }
    for (const answer of back) expect(answer.body).toEqual({ ok: true, checks: { postgres: true, redis: true } });
    expect(await inboxIds(checker, dave)).toEqual([sent.id]);
  });
});

describe('SIGTERM drains', () => {
  let database: { url: string; drop: () => Promise<void> };
  const adminToken = `admin-${ulid()}`;
  let env: Record<string, string>;
  const nodes: TestProcess[] = [];

  beforeAll(async () => {
    database = await createTestDatabase('roost_e2e');
    env = operatorEnv(database.url, adminToken, { ROOST_SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS) });
  });

  afterAll(async () => {
    await stopAll(nodes);
    await database?.drop();
  });

  const SHUTDOWN_TIMEOUT_MS = 5_000;

  /** SIGTERM (SIGKILL only past the drain timeout plus a margin); the exit and how long it took. */
  const terminate = (node: TestProcess) => {
    const since = Date.now();
    return node.stop(SHUTDOWN_TIMEOUT_MS + 3_000).then((exit) => ({ ...exit, afterMs: Date.now() - since }));
  };

  it('an api under a steady stream of sends: every 202 is durable, the rest are clean 503s or connection errors, exit 0 in time', async () => {
    const [victim, checker] = await startAll([
      { name: 'api (sigterm)', env: { ...env, ROOST_ROLE: 'api' } },
      { name: 'api (checker)', env: { ...env, ROOST_ROLE: 'api' } },
    ]);
    nodes.push(victim, checker);
    const checkerClient = new TestClient(checker.url);
    const alice = await createAgent(checkerClient, adminToken, '@st.alice');
    const bob = await createAgent(checkerClient, adminToken, '@st.bob');

    // 16 senders in a loop against the victim until it is gone (plus a grace period).
    const outcomes: Outcome[] = [];
    let signalledAt = 0;
    let stopAt = Number.POSITIVE_INFINITY;
    let n = 0;
    const sender = async () => {
      while (Date.now() < stopAt) {
        const outcome = await postMessage(victim.url, alice, '@st.bob', n++);
        outcomes.push(outcome);
        if (outcome.status !== 202) await sleep(20); // a refused sender backs off a little
      }
    };
    const senders = Promise.all(Array.from({ length: 16 }, sender));
    // Signal once the stream is flowing (at least 40 acknowledged), whatever the machine's load.
    const flowing = Date.now() + 30_000;
    while (outcomes.filter((o) => o.status === 202).length < 40 && Date.now() < flowing) await sleep(50);
    signalledAt = Date.now();
    const exit = await terminate(victim);
    stopAt = Date.now() + 300;
    await senders;

    expect({ code: exit.code, signal: exit.signal }).toEqual({ code: 0, signal: null });
    expect(exit.afterMs).toBeLessThan(SHUTDOWN_TIMEOUT_MS);

    const accepted = outcomes.filter((o) => o.status === 202);
    const inFlightAtSignal = accepted.filter((o) => o.sentAt < signalledAt && o.answeredAt >= signalledAt);
    const refused = outcomes.filter((o) => o.status !== 202 && o.status !== 0);
    const dropped = outcomes.filter((o) => o.status === 0);
    expect(accepted.length).toBeGreaterThanOrEqual(40);
    if (process.env.ROOST_TEST_VERBOSE) {
      console.log({
        accepted: accepted.length,
        inFlightAtSignal: inFlightAtSignal.length,
        refused: refused.length,
        dropped: dropped.length,
        exitMs: exit.afterMs,
      });
    }
    expect(inFlightAtSignal.length).toBeGreaterThan(0);
    // Once the process is gone every attempt is a connection error.
    expect(dropped.length).toBeGreaterThan(0);
    // A refusal is the clean "closing" answer with the ASMTP error body, never a 500 nor a 4xx.
    for (const o of refused) expect({ status: o.status, code: o.code }).toEqual({ status: 503, code: 'UNAVAILABLE' });

    // Every 202 is in bob's mailbox, read through the other process; nothing else is.
    const inbox = await inboxIds(checkerClient, bob);
    const acknowledged = new Set(accepted.map((o) => o.id));
    const missing = [...acknowledged].filter((id) => !inbox.includes(id));
    expect(missing).toEqual([]);
    // Sends that got no answer may or may not have committed (the answer was lost with the
    // socket); refused ones never did.
    const refusedIds = new Set(refused.map((o) => o.id));
    expect(inbox.filter((id) => refusedIds.has(id))).toEqual([]);
    const known = new Set(outcomes.map((o) => o.id));
    expect(inbox.filter((id) => !known.has(id))).toEqual([]);
    expect(new Set(inbox).size).toBe(inbox.length);
  });

  it('a gateway closes its sockets with 1012, takes no new ones, and exits 0 in time', async () => {
    const [api, gateway] = await startAll([
      { name: 'api', env: { ...env, ROOST_ROLE: 'api' } },
      { name: 'gateway (sigterm)', env: { ...env, ROOST_ROLE: 'gateway' } },
    ]);
    nodes.push(api, gateway);
    const client = new TestClient(api.url);
    const erin = await createAgent(client, adminToken, '@sg.erin');
    const frank = await createAgent(client, adminToken, '@sg.frank');
    const sockets: Listener[] = await Promise.all([
      connect(gateway.url, { token: erin }),
      connect(gateway.url, { token: erin }),
      connect(gateway.url, { token: frank }),
    ]);
    try {
      const stopping = terminate(gateway);
      await Promise.all(sockets.map((socket) => socket.untilClosed(SHUTDOWN_TIMEOUT_MS)));
      expect(sockets.map((socket) => socket.closeCode)).toEqual([1012, 1012, 1012]);
      // No new socket while it drains (refused or no listener any more).
      const late = await connect(gateway.url, { token: erin }).then(
        (listener) => {
          listener.close();
          return 'opened';
        },
        () => 'refused',
      );
      expect(late).toBe('refused');
      const exit = await stopping;
      expect({ code: exit.code, signal: exit.signal }).toEqual({ code: 0, signal: null });
      expect(exit.afterMs).toBeLessThan(SHUTDOWN_TIMEOUT_MS);
    } finally {
      for (const socket of sockets) socket.close();
    }
  });
});
