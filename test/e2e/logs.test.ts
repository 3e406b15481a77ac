import { ulid } from '#domain';
import { TestClient } from '../support/client';
import { createTestDatabase } from '../support/database';
import { TestProcess } from '../support/processes';
import { testRedisUrl } from '../support/services';
import { connect } from '../support/ws';

/**
 * The JSON logs of a real operator process at ROOST_LOG_LEVEL=debug (stdout), after sends,
 * failing requests, fetches, a schedule, a receipt, sockets and a graceful stop: every stdout line
 * is a JSON object with level, time and role; every request line carries a req_id (the caller's
 * X-Request-Id when valid); and none of the planted secrets ever appears on stdout or stderr:
 * agent, org and admin tokens, a bad token presented to the server, a fake AWS access key in a
 * subject, a body, a query string and an unparsable body, nor a marker from body content.
 */

const LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'];

describe('logs: JSON lines with request ids, never a token, a secret or body content', () => {
  let database: { url: string; drop: () => Promise<void> };
  let node: TestProcess;
  const adminToken = `admin-${ulid()}`;

  beforeAll(async () => {
    database = await createTestDatabase('roost_e2e');
    node = await TestProcess.start({
      name: 'roost (debug logs)',
      env: {
        DATABASE_URL: database.url,
        REDIS_URL: testRedisUrl(),
        ROOST_REDIS_PREFIX: `roost-e2e:${ulid()}:`,
        ROOST_ADMIN_TOKEN: adminToken,
        ROOST_LOG_LEVEL: 'debug',
        ROOST_HOST: '127.0.0.1',
        ROOST_RATE_LIMIT_PER_S: '0',
        ROOST_SCHEDULE_TICK_MS: '200',
      },
      keepLines: 1_000_000,
      recordStdout: true,
    });
  });

  afterAll(async () => {
    await node?.stop();
    await database?.drop();
  });

  it('after traffic, failures and a SIGTERM, stdout is JSON lines with level, time, role and req_id, and no secret appears anywhere', async () => {
    const client = new TestClient(node.url);
    const secrets: Record<string, string> = { adminToken };
    const key = `AKIA${ulid()
      .slice(10)
      .replace(/[^A-Z0-9]/g, 'Q')}`;
    secrets.awsKey = key;
    const marker = `body-marker-${ulid()}`;
    secrets.bodyMarker = marker;
    const badToken = `roost_${ulid()}${ulid()}`;
    secrets.badToken = badToken;

    const agent = async (handle: string, fields: Record<string, unknown> = {}) => {
      const reply = await client.post('/_admin/agents', { handle, policy: 'open', ...fields }, adminToken);
      expect(reply.status).toBe(201);
      secrets[handle] = reply.body.token;
      return reply.body.token as string;
    };
    const org = await client.post('/_admin/orgs', { name: 'lg' }, adminToken);
    expect(org.status).toBe(201);
    if (typeof org.body.token === 'string') secrets.orgToken = org.body.token;
    const alice = await agent('@lg.alice');
    const bob = await agent('@lg.bob');
    const strict = await agent('@lg.strict', { content_guard: 'block' });

    const leaky = (to: string[], fields: Record<string, unknown> = {}) => ({
      id: ulid(),
      to,
      date_ms: Date.now(),
      subject: `deploy creds ${key}`,
      content_parts: [{ type: 'text', text: `${marker}\naws_access_key_id = ${key}` }],
      ...fields,
    });

    // Sends: warned, blocked, overridden (a debug line), a replay.
    const sent = leaky(['@lg.bob']);
    const warned = await client.request('POST', '/messages', {
      token: alice,
      body: sent,
      headers: { 'x-request-id': 'caller-req-42' },
    });
    expect(warned.status).toBe(202);
    expect((await client.post('/messages', sent, alice)).status).toBe(202);
    expect((await client.post('/messages', leaky(['@lg.bob']), strict)).status).toBe(422);
    expect((await client.post('/messages', leaky(['@lg.bob'], { allow_warnings: ['secret'] }), strict)).status).toBe(
      202,
    );

    // Failures: bad token, unparsable body, unknown recipient, invalid cursor, other's envelope,
    // admin route with an agent token, unknown route, wrong method.
    expect((await client.post('/messages', leaky(['@lg.bob']), badToken)).status).toBe(401);
    expect(
      (await client.request('POST', '/messages', { token: alice, body: `{"subject":"${key}", ${marker}` })).status,
    ).toBe(400);
    expect((await client.post('/messages', leaky(['@lg.nobody']), alice)).status).toBe(404);
    expect((await client.get(`/mailbox?after_created_at=1&after_envelope_id=${key}`, bob)).status).toBe(400);
    expect((await client.get(`/messages/${sent.id}`, strict)).status).toBe(404);
    expect((await client.get('/_admin/agents', alice)).status).toBe(401);
    expect((await client.get(`/nowhere/${key}?token=${alice}`, alice)).status).toBe(404);
    expect((await client.request('PUT', '/messages', { token: alice })).status).toBe(405);

    // Fetches: listing, body, search for the key, a receipt, a schedule carrying the key.
    expect((await client.get('/mailbox', bob)).status).toBe(200);
    const body = await client.get(`/messages/${sent.id}`, bob);
    expect(body.status).toBe(200);
    expect(body.text).toContain(key); // it is stored and served, just never logged
    expect((await client.get(`/search/messages?q=${key}`, bob)).status).toBe(200);
    expect(
      (await client.post(`/messages/${sent.id}/receipts`, { status: 'accepted', note: `${marker} ${key}` }, bob))
        .status,
    ).toBe(201);
    const schedule = await client.post(
      '/schedules',
      {
        envelope: { to: ['@lg.bob'], subject: key, content_parts: [{ type: 'text', text: marker }] },
        start_at: Date.now() + 300,
      },
      alice,
    );
    expect(schedule.status).toBe(201);

    // Sockets: token in the query string (accepted) and a bad one (refused).
    const socket = await connect(node.url, { token: bob, tokenInQuery: true });
    await connect(node.url, { token: badToken, tokenInQuery: true }).then(
      (refusedSocket) => {
        refusedSocket.close();
        throw new Error('a bad token was accepted');
      },
      (error: { status?: number }) => expect(error.status).toBe(401),
    );
    // Let the schedule fire and the socket see it, then stop the process gracefully.
    const deadline = Date.now() + 10_000;
    while ((await client.get('/mailbox', bob)).body.envelope_headers.length < 3 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 100));
    socket.close();
    const exit = await node.stop(15_000);
    expect(exit).toEqual({ code: 0, signal: null });

    // Every stdout line is one JSON object with level, time and role.
    const lines = node.stdout;
    expect(lines.length).toBeGreaterThan(30);
    const records = lines.map((line, i) => {
      let record: Record<string, unknown>;
      try {
        record = JSON.parse(line);
      } catch {
        throw new Error(`stdout line ${i} is not JSON: ${line}`);
      }
      expect(typeof record).toBe('object');
      return record;
    });
    for (const record of records) {
      expect({ level: LEVELS.includes(record.level as string), time: typeof record.time, role: record.role }).toEqual({
        level: true,
        time: 'string',
        role: 'all',
      });
      expect(Number.isNaN(Date.parse(record.time as string))).toBe(false);
    }
    // Debug is on: Nest's own lines come through at debug.
    expect(records.some((r) => r.level === 'debug')).toBe(true);

    // Request lines: one per request, each with a req_id; the caller's id is kept.
    const requests = records.filter((r) => r.msg === 'request');
    expect(requests.length).toBeGreaterThan(20);
    for (const r of requests) {
      expect({
        req_id: typeof r.req_id,
        method: typeof r.method,
        route: typeof r.route,
        status: typeof r.status,
      }).toEqual({
        req_id: 'string',
        method: 'string',
        route: 'string',
        status: 'number',
      });
    }
    const send = requests.find((r) => r.req_id === 'caller-req-42');
    expect(send).toMatchObject({
      method: 'POST',
      route: '/messages',
      status: 202,
      agent: '@lg.alice',
      envelope_id: sent.id,
    });
    const statuses = new Set(requests.map((r) => r.status));
    for (const status of [200, 201, 202, 400, 401, 404, 405, 422]) expect(statuses).toContain(status);
    expect(new Set(requests.map((r) => r.req_id)).size).toBe(requests.length);
    // Generated ids carry a random per-process tag, so two nodes never mint the same one.
    const generated = requests.filter((r) => r !== send).map((r) => r.req_id as string);
    for (const id of generated) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-z]+$/);
    expect(new Set(generated.map((id) => id.split('-')[0])).size).toBe(1);
    expect(records.some((r) => r.msg === 'draining')).toBe(true);
    expect(records.some((r) => r.msg === 'stopped')).toBe(true);

    // No secret anywhere, stdout or stderr.
    const everything = node.output.join('\n');
    expect(everything.length).toBeGreaterThan(0);
    const leaked = Object.entries(secrets).filter(([, secret]) => everything.includes(secret));
    expect(leaked.map(([name]) => name)).toEqual([]);
    expect(everything).not.toMatch(/AKIA[0-9A-Z]{16}/);
    expect(everything).not.toMatch(/[Bb]earer /);
  });
});
