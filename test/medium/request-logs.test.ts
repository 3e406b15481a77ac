import { Writable } from 'node:stream';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { loadConfig } from '#config';
import { ulid } from '#domain';
import { createLogger } from '#http';
import { AcceptService, AuthService } from '#core';
import { MessagesService } from '../../apps/api/src/messages/messages.service';
import { buildRoostApp } from '../../apps/roost/src/bootstrap';
import { TestClient } from '../support/client';
import { createTestDatabase } from '../support/database';
import { refusal } from '../support/ws';

/**
 * The request context on log lines, in process: the access line of each request carries its
 * req_id (the caller's `X-Request-Id`, else a generated one), the sender's handle and the envelope
 * id; a failure's error line carries the same req_id. Two requests in flight at once keep their
 * own contexts (the context lives beside the request, not in process-wide state).
 */
describe('request log context', () => {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line.trim()) lines.push(JSON.parse(line));
      done();
    },
  });
  let app: NestFastifyApplication;
  let drop: () => Promise<void>;
  let client: TestClient;
  const adminToken = `admin-${ulid()}`;

  beforeAll(async () => {
    const database = await createTestDatabase();
    drop = database.drop;
    const config = loadConfig({
      DATABASE_URL: database.url,
      ROOST_ADMIN_TOKEN: adminToken,
      ROOST_LOG_LEVEL: 'info',
      ROOST_RATE_LIMIT_PER_S: '0',
      PORT: '0',
      ROOST_METRICS_PORT: '0',
    });
    app = (await buildRoostApp(config, createLogger(config, sink))).app;
    await app.listen({ port: 0, host: '127.0.0.1' });
    client = new TestClient(`http://127.0.0.1:${(app.getHttpServer().address() as { port: number }).port}`);
  });

  afterAll(async () => {
    await app?.close();
    await drop?.();
  });

  const agent = async (handle: string) => {
    const reply = await client.post('/_admin/agents', { handle, policy: 'open' }, adminToken);
    expect(reply.status).toBe(201);
    return reply.body.token as string;
  };
  const accessLine = (reqId: string) => lines.find((line) => line.msg === 'request' && line.req_id === reqId);

  it('each access line carries its own req_id, agent and envelope id, also for concurrent requests', async () => {
    const alice = await agent('@logs.alice');
    const bob = await agent('@logs.bob');
    await agent('@logs.inbox');
    const sends = Array.from({ length: 12 }, (_, i) => ({
      reqId: `concurrent-${i}`,
      token: i % 2 === 0 ? alice : bob,
      handle: i % 2 === 0 ? '@logs.alice' : '@logs.bob',
      id: ulid(),
    }));
    const replies = await Promise.all(
      sends.map((send) =>
        client.request('POST', '/messages', {
          token: send.token,
          headers: { 'x-request-id': send.reqId },
          body: {
            id: send.id,
            to: ['@logs.inbox'],
            date_ms: Date.now(),
            content_parts: [{ type: 'text', text: send.reqId }],
          },
        }),
      ),
    );
    expect(replies.map((reply) => reply.status)).toEqual(sends.map(() => 202));
    for (const send of sends) {
      expect(accessLine(send.reqId)).toMatchObject({
        route: '/messages',
        method: 'POST',
        status: 202,
        agent: send.handle,
        envelope_id: send.id,
      });
    }
    // A request without X-Request-Id gets a generated one; an unauthenticated one names no agent.
    expect((await client.get('/mailbox', 'not-a-token')).status).toBe(401);
    const refused = lines.filter((line) => line.msg === 'request' && line.status === 401);
    expect(refused.length).toBe(1);
    expect(refused[0].req_id).toMatch(/^[0-9a-f]{8}-[0-9a-z]+$/);
    expect(refused[0].agent).toBeUndefined();
  });

  it("a failure's error line carries the request's req_id and agent, and the client gets the ASMTP error body", async () => {
    const carol = await agent('@logs.carol');
    const fetch = jest.spyOn(app.get(MessagesService), 'fetch');
    try {
      fetch.mockRejectedValueOnce(new Error('planted failure'));
      const failed = await client.request('GET', `/messages/${ulid()}`, {
        token: carol,
        headers: { 'x-request-id': 'fails-500' },
      });
      expect(failed.status).toBe(500);
      expect(failed.body).toEqual({ error: { code: 'INTERNAL_ERROR', message: 'internal error' } });
      fetch.mockRejectedValueOnce(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }));
      const unavailable = await client.request('GET', `/messages/${ulid()}`, {
        token: carol,
        headers: { 'x-request-id': 'fails-503' },
      });
      expect(unavailable.status).toBe(503);
    } finally {
      fetch.mockRestore();
    }
    const error = lines.find((line) => line.level === 'error' && line.req_id === 'fails-500');
    expect(error).toMatchObject({ context: 'http', agent: '@logs.carol', msg: 'internal error' });
    expect(String(error?.stack)).toContain('planted failure');
    expect(lines.find((line) => line.level === 'warn' && line.req_id === 'fails-503')).toMatchObject({
      agent: '@logs.carol',
    });
    expect(accessLine('fails-500')).toMatchObject({ status: 500, agent: '@logs.carol' });
  });

  it('POST /messages (a plain Fastify route, not a Nest one) fails through the same filter: ASMTP body, error line, access line', async () => {
    const erin = await agent('@logs.erin');
    await agent('@logs.frank');
    const accept = jest.spyOn(app.get(AcceptService), 'accept');
    const send = (reqId: string, id: string) =>
      client.request('POST', '/messages', {
        token: erin,
        headers: { 'x-request-id': reqId },
        body: { id, to: ['@logs.frank'], date_ms: Date.now(), content_parts: [{ type: 'text', text: 'hi' }] },
      });
    const id = ulid();
    try {
      accept.mockRejectedValueOnce(new Error('planted send failure'));
      const failed = await send('send-500', id);
      expect(failed.status).toBe(500);
      expect(failed.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(failed.body).toEqual({ error: { code: 'INTERNAL_ERROR', message: 'internal error' } });
      accept.mockRejectedValueOnce(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }));
      const unavailable = await send('send-503', ulid());
      expect(unavailable.status).toBe(503);
      expect(unavailable.body).toEqual({
        error: { code: 'UNAVAILABLE', message: 'a dependency is unavailable, retry later' },
      });
    } finally {
      accept.mockRestore();
    }
    const error = lines.find((line) => line.level === 'error' && line.req_id === 'send-500');
    expect(error).toMatchObject({ context: 'http', agent: '@logs.erin', envelope_id: id, msg: 'internal error' });
    expect(String(error?.stack)).toContain('planted send failure');
    expect(accessLine('send-500')).toMatchObject({
      route: '/messages',
      status: 500,
      agent: '@logs.erin',
      envelope_id: id,
    });
    expect(accessLine('send-503')).toMatchObject({ route: '/messages', status: 503, agent: '@logs.erin' });
    // And the route still answers 202 with the ASMTP body once nothing is planted.
    const ok = await send('send-202', ulid());
    expect(ok.status).toBe(202);
    expect(ok.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(ok.body).toMatchObject({ recipients: [{ handle: '@logs.frank' }] });
  });

  it('an unexpected error during a WebSocket upgrade answers 500 and logs its stack with the request id', async () => {
    const dave = await agent('@logs.dave');
    const base = `http://127.0.0.1:${(app.getHttpServer().address() as { port: number }).port}`;
    const agentFor = jest.spyOn(app.get(AuthService), 'agentFor');
    try {
      agentFor.mockRejectedValueOnce(new Error('planted upgrade failure'));
      const refused = await refusal(base, { token: dave, headers: { 'x-request-id': 'upgrade-500' } });
      expect(refused.status).toBe(500);
      expect(refused.body).toEqual({ error: { code: 'INTERNAL_ERROR', message: 'internal error' } });
    } finally {
      agentFor.mockRestore();
    }
    const error = lines.find((line) => line.level === 'error' && line.req_id === 'upgrade-500');
    expect(error).toMatchObject({ context: 'gateway', msg: 'internal error during a WebSocket upgrade' });
    expect(String(error?.stack)).toContain('planted upgrade failure');
    expect(String(error?.stack)).toMatch(/\n\s+at /); // a stack, not only the message
    // A refusal that is the client's doing (a bad token) is not an error line.
    expect((await refusal(base, { token: 'not-a-token', headers: { 'x-request-id': 'upgrade-401' } })).status).toBe(
      401,
    );
    expect(lines.find((line) => line.level === 'error' && line.req_id === 'upgrade-401')).toBeUndefined();
  });
});
