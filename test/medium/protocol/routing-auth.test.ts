import { ulid } from '#domain';
import type { Reply } from '../../support/client';
import { envelope, startOperator, type TestOperator } from '../../support/operator';

/** ASMTP.md §10 items 1–8: health, routing, the error body, bearer authentication. */
describe('routing and authentication (ASMTP.md §10 #1–8)', () => {
  let op: TestOperator;
  /** Before the operator starts: its uptime can never exceed the time since. */
  let beforeStart = 0;
  beforeAll(async () => {
    beforeStart = Date.now();
    op = await startOperator();
  });
  afterAll(async () => op?.close());

  /** Every agent route of ASMTP.md §3.1, with a body where the route takes one. */
  const agentRoutes = (): Array<{ method: string; path: string; body?: unknown }> => [
    { method: 'POST', path: '/messages', body: envelope('@nobody.here') },
    { method: 'GET', path: `/messages/${ulid()}` },
    { method: 'GET', path: `/messages?ids=${ulid()}` },
    { method: 'GET', path: '/mailbox' },
    { method: 'POST', path: '/mailbox/read', body: { ids: [ulid()] } },
    { method: 'POST', path: '/files', body: 'not multipart' },
    { method: 'GET', path: '/files/file_01JV3Z8W7Q4M2N6P8R0T2V4X6Y' },
    { method: 'GET', path: '/agents/me' },
    { method: 'PATCH', path: '/agents/me', body: { display_name: 'x' } },
    { method: 'GET', path: '/agents/me/allowlist' },
    { method: 'POST', path: '/agents/me/allowlist', body: { entries: ['@acme.*'] } },
    { method: 'DELETE', path: '/agents/me/allowlist/%40acme.%2A' },
    { method: 'GET', path: '/agents/me/blocks' },
    { method: 'POST', path: '/agents/me/blocks', body: { handle: '@x.y' } },
    { method: 'DELETE', path: '/agents/me/blocks/%40x.y' },
    { method: 'GET', path: '/agents/acme/bot' },
    { method: 'GET', path: '/agents/acme/bot/card' },
    { method: 'GET', path: '/search?q=ab' },
    { method: 'GET', path: '/search/agents?q=ab' },
    { method: 'GET', path: '/search/messages?q=ab' },
  ];

  /** Every admin route of ASMTP.md §1.4 and EXTENSIONS.md §5. */
  const adminRoutes = (handle: string, org: string): Array<{ method: string; path: string; body?: unknown }> => [
    { method: 'POST', path: '/_admin/agents', body: { handle: '@t8new.agent' } },
    { method: 'GET', path: '/_admin/agents' },
    { method: 'GET', path: `/_admin/agents/${encodeURIComponent(handle)}` },
    { method: 'PATCH', path: `/_admin/agents/${encodeURIComponent(handle)}`, body: { display_name: 'hijacked' } },
    { method: 'POST', path: `/_admin/agents/${encodeURIComponent(handle)}/rotate-token` },
    { method: 'DELETE', path: `/_admin/agents/${encodeURIComponent(handle)}` },
    { method: 'POST', path: '/_admin/orgs', body: { name: 't8neworg' } },
    { method: 'GET', path: '/_admin/orgs' },
    { method: 'GET', path: `/_admin/orgs/${org}` },
    { method: 'PATCH', path: `/_admin/orgs/${org}`, body: { max_agents: 0 } },
    { method: 'POST', path: `/_admin/orgs/${org}/rotate-token` },
    { method: 'DELETE', path: `/_admin/orgs/${org}` },
  ];

  const expectError = (reply: Reply, status: number, code: string, what: string) => {
    expect({ what, status: reply.status, code: reply.body?.error?.code }).toEqual({ what, status, code });
  };

  const inbox = async (token: string): Promise<string[]> => {
    const reply = await op.client.get('/mailbox', token);
    expect(reply.status).toBe(200);
    return reply.body.envelope_headers.map((h: { id: string }) => h.id);
  };

  it('#1 GET /healthz and GET /health return 200 {ok:true, network, version, uptime_ms} without auth', async () => {
    for (const path of ['/healthz', '/health', '/healthz?probe=1']) {
      const reply = await op.client.get(path);
      expect(reply.status).toBe(200);
      expect(reply.headers.get('content-type')).toMatch(/^application\/json/);
      expect(reply.body.ok).toBe(true);
      expect(typeof reply.body.network).toBe('string');
      expect(reply.body.network.length).toBeGreaterThan(0);
      expect(typeof reply.body.version).toBe('string');
      expect(Number.isInteger(reply.body.uptime_ms)).toBe(true);
      expect(reply.body.uptime_ms).toBeGreaterThanOrEqual(0);
      expect(reply.body.uptime_ms).toBeLessThanOrEqual(Date.now() - beforeStart);
    }
  });

  it('#1 uptime_ms counts the time between two health answers (a clock, not a constant)', async () => {
    const first = await op.client.get('/healthz');
    const firstAnswered = Date.now();
    await new Promise((resolve) => setTimeout(resolve, 20));
    const secondAsked = Date.now();
    const second = await op.client.get('/healthz');
    // The first was computed before firstAnswered, the second after secondAsked (one clock, one process).
    expect(second.body.uptime_ms - first.body.uptime_ms).toBeGreaterThanOrEqual(secondAsked - firstAnswered);
  });

  it('#1 GET /healthz answers even with a bogus bearer (no auth on health)', async () => {
    const reply = await op.client.request('GET', '/healthz', { headers: { authorization: 'Bearer nonsense' } });
    expect(reply.status).toBe(200);
    expect(reply.body.ok).toBe(true);
  });

  it('#2 an unknown path returns 404 with error.code NOT_FOUND, with or without a bearer', async () => {
    const token = await op.agent('@t2.alice');
    const cases: Array<[string, string, string | undefined]> = [
      ['GET', '/nope', undefined],
      ['GET', '/nope', token],
      ['POST', '/v1/messages', token],
      ['GET', '/messages/', token], // no trailing-slash tolerance (§3.0)
      ['GET', '/mailbox/', undefined],
      ['GET', '/_admin', undefined],
      ['DELETE', '/messages/01JV3Z8W7Q4M2N6P8R0T2V4X6Y/extra', token],
      ['GET', '/MAILBOX', token], // paths are case-sensitive
    ];
    for (const [method, path, bearer] of cases) {
      const reply = await op.client.request(method, path, { token: bearer });
      expectError(reply, 404, 'NOT_FOUND', `${method} ${path}`);
    }
  });

  it('#3 a known path with the wrong method returns 405 METHOD_NOT_ALLOWED (before authentication)', async () => {
    const token = await op.agent('@t3.alice');
    const cases: Array<[string, string]> = [
      ['DELETE', '/messages'],
      ['PUT', '/messages'],
      ['POST', `/messages/${ulid()}`],
      ['POST', '/mailbox'],
      ['GET', '/mailbox/read'],
      ['PUT', '/agents/me'],
      ['DELETE', '/agents/me'],
      ['PUT', '/files'],
      ['DELETE', '/_admin/agents'],
      ['PUT', '/_admin/agents/%40t3.alice'],
      ['GET', '/_admin/agents/%40t3.alice/rotate-token'],
      ['PUT', '/_admin/orgs'],
    ];
    for (const [method, path] of cases) {
      for (const bearer of [undefined, token]) {
        const reply = await op.client.request(method, path, { token: bearer });
        expectError(reply, 405, 'METHOD_NOT_ALLOWED', `${method} ${path} bearer=${bearer !== undefined}`);
        expect(reply.headers.get('allow')).toBeNull();
      }
    }
  });

  it('#3 other methods on the health paths are 404, not 405 (ASMTP.md §3.10)', async () => {
    for (const path of ['/healthz', '/health']) {
      expectError(await op.client.request('POST', path), 404, 'NOT_FOUND', `POST ${path}`);
    }
  });

  it('#4 every error response body is exactly {"error":{"code":string,"message":string}}', async () => {
    const alice = await op.agent('@t4.alice');
    await op.agent('@t4.bob');
    const first = envelope('@t4.bob');
    expect((await op.client.post('/messages', first, alice)).status).toBe(202);
    const replies: Reply[] = [
      await op.client.request('POST', '/messages', { token: alice, body: '{not json' }), // 400 INVALID_JSON
      await op.client.post('/messages', { ...envelope('@t4.bob'), id: 'lower' }, alice), // 400 INVALID_ENVELOPE_ID
      await op.client.get('/mailbox?limit=0', alice), // 400 INVALID_QUERY
      await op.client.get('/mailbox'), // 401
      await op.client.get('/mailbox', 'unknown-token'), // 401
      await op.client.get('/_admin/agents', alice), // 401 admin
      await op.client.get('/nope'), // 404 route
      await op.client.post('/messages', envelope('@t4.nobody'), alice), // 404 non-enumerating
      await op.client.get('/_admin/agents/%40t4.nobody', op.adminToken), // 404 admin
      await op.client.request('PUT', '/mailbox', { token: alice }), // 405
      await op.client.post('/messages', { ...first, subject: 'changed' }, alice), // 409 RETRY_MISMATCH
      await op.client.post('/_admin/agents', { handle: '@t4.bob' }, op.adminToken), // 409 AGENT_EXISTS
      await op.client.request('POST', '/messages', { token: alice, body: 'x'.repeat(1024 * 1024 + 1) }), // 413
    ];
    expect(replies.map((r) => r.status)).toEqual([400, 400, 400, 401, 401, 401, 404, 404, 404, 405, 409, 409, 413]);
    for (const reply of replies) {
      expect(reply.headers.get('content-type')).toMatch(/^application\/json/);
      const body = JSON.parse(reply.text) as Record<string, unknown>;
      expect(Object.keys(body)).toEqual(['error']);
      const error = body.error as Record<string, unknown>;
      expect(Object.keys(error).sort()).toEqual(['code', 'message']);
      expect(typeof error.code).toBe('string');
      expect(error.code).toMatch(/^[A-Z_]+$/);
      expect(typeof error.message).toBe('string');
    }
  });

  it('#5 agent routes without Authorization return 401 UNAUTHORIZED', async () => {
    for (const route of agentRoutes()) {
      const reply = await op.client.request(route.method, route.path, { body: route.body });
      expectError(reply, 401, 'UNAUTHORIZED', `${route.method} ${route.path}`);
      expect(reply.headers.get('www-authenticate')).toBeNull();
    }
  });

  it('#5 a malformed Authorization header counts as no bearer (401) and the send stores nothing', async () => {
    const alice = await op.agent('@t5.alice');
    const bob = await op.agent('@t5.bob');
    const malformed = [
      '',
      alice,
      `Basic ${alice}`,
      `Token ${alice}`,
      'Bearer',
      'Bearer    ',
      `Bearer:${alice}`,
      `${alice} Bearer`,
    ];
    for (const authorization of malformed) {
      const reply = await op.client.request('POST', '/messages', {
        headers: { authorization },
        body: envelope('@t5.bob'),
      });
      expectError(reply, 401, 'UNAUTHORIZED', `authorization=${JSON.stringify(authorization)}`);
    }
    expect(await inbox(bob)).toEqual([]);
  });

  it('#5 authentication comes before body parsing: an unparsable body without a bearer is 401', async () => {
    const reply = await op.client.request('POST', '/messages', { body: '{not json' });
    expectError(reply, 401, 'UNAUTHORIZED', 'POST /messages with bad JSON');
  });

  it('#6 agent routes with an unknown bearer return 401 UNAUTHORIZED', async () => {
    const unknown = `unknown-${ulid()}`;
    for (const route of agentRoutes()) {
      const reply = await op.client.request(route.method, route.path, { token: unknown, body: route.body });
      expectError(reply, 401, 'UNAUTHORIZED', `${route.method} ${route.path}`);
    }
  });

  it('#6 the admin token is not an agent token (401 on agent routes) and an unknown bearer stores nothing', async () => {
    const bob = await op.agent('@t6.bob');
    expectError(await op.client.get('/agents/me', op.adminToken), 401, 'UNAUTHORIZED', 'admin token on /agents/me');
    expectError(
      await op.client.post('/messages', envelope('@t6.bob'), op.adminToken),
      401,
      'UNAUTHORIZED',
      'admin send',
    );
    expectError(
      await op.client.post('/messages', envelope('@t6.bob'), `${bob}x`),
      401,
      'UNAUTHORIZED',
      'near-miss token',
    );
    expect(await inbox(bob)).toEqual([]);
  });

  it('#7 Authorization: bearer <t> (lower-case scheme) is accepted', async () => {
    const alice = await op.agent('@t7.alice');
    const bob = await op.agent('@t7.bob');
    for (const authorization of [`bearer ${alice}`, `BEARER ${alice}`, `  bEaReR   ${alice}  `, `bearer\t${alice}`]) {
      const me = await op.client.request('GET', '/agents/me', { headers: { authorization } });
      expect({ authorization, status: me.status }).toEqual({ authorization, status: 200 });
      expect(me.body.canonical_handle).toBe('@t7.alice');
    }
    const sent = await op.client.request('POST', '/messages', {
      headers: { authorization: `bearer ${alice}` },
      body: envelope('@t7.bob'),
    });
    expect(sent.status).toBe(202);
    expect(await inbox(bob)).toEqual([sent.body.id]);
    const admin = await op.client.request('GET', '/_admin/agents', {
      headers: { authorization: `bearer ${op.adminToken}` },
    });
    expect(admin.status).toBe(200);
  });

  it('#8 admin routes reject agent tokens and missing or wrong admin tokens with 401, changing nothing', async () => {
    const agentToken = await op.agent('@t8.alice', { display_name: 'Alice' });
    const org = await op.client.post('/_admin/orgs', { name: 't8org' }, op.adminToken);
    expect(org.status).toBe(201);
    const adminHash = op.config.adminTokenHash!;
    const credentials: Array<[string, Record<string, string>]> = [
      ['none', {}],
      ['agent token', { authorization: `Bearer ${agentToken}` }],
      ['wrong admin token', { authorization: `Bearer ${op.adminToken}x` }],
      ['admin token hash', { authorization: `Bearer ${adminHash}` }],
      ['basic scheme', { authorization: `Basic ${op.adminToken}` }],
      ['empty bearer', { authorization: 'Bearer ' }],
    ];
    for (const [label, headers] of credentials) {
      for (const route of adminRoutes('@t8.alice', 't8org')) {
        const reply = await op.client.request(route.method, route.path, { headers, body: route.body });
        expectError(reply, 401, 'UNAUTHORIZED', `${label}: ${route.method} ${route.path}`);
      }
    }
    // Auth is checked before the body is read.
    expectError(
      await op.client.request('POST', '/_admin/agents', {
        headers: { authorization: `Bearer ${agentToken}` },
        body: '{bad',
      }),
      401,
      'UNAUTHORIZED',
      'bad body with agent token',
    );
    // Nothing changed: the agent, its token and the organization are as before; nothing was created.
    const shown = await op.client.get('/_admin/agents/%40t8.alice', op.adminToken);
    expect(shown.status).toBe(200);
    expect(shown.body.display_name).toBe('Alice');
    expect((await op.client.get('/agents/me', agentToken)).status).toBe(200);
    expect((await op.client.get('/_admin/agents/%40t8new.agent', op.adminToken)).status).toBe(404);
    const orgShown = await op.client.get('/_admin/orgs/t8org', op.adminToken);
    expect(orgShown.status).toBe(200);
    expect(orgShown.body.max_agents).toBeNull();
    expect((await op.client.get('/_admin/orgs/t8neworg', op.adminToken)).status).toBe(404);
    // The organization's admin token still works, so rotate-token did not run.
    expect((await op.client.get('/_admin/agents', org.body.admin_token)).status).toBe(200);
  });
});
