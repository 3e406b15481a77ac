import { eq, expectError, expectStatus, Failure, ok } from '../assert';
import type { Reply } from '../http';
import { ulid } from '#client';
import { envelope } from '../wire';
import { item } from './item';

/** ASMTP.md §10 items 1–8: health, routing, the error body, bearer authentication. */

/** The ASMTP wire routes every operator has (§3.1, "ASMTP" kind), with a body where one is taken. */
const coreRoutes = () => [
  { method: 'POST', path: '/messages', body: envelope('@nobody.here') },
  { method: 'GET', path: `/messages/${ulid()}` },
  { method: 'GET', path: `/messages?ids=${ulid()}` },
  { method: 'GET', path: '/mailbox' },
  { method: 'POST', path: '/mailbox/read', body: { ids: [ulid()] } },
];

item(1, 'GET /healthz and GET /health return 200 {ok:true, network, version, uptime_ms} without auth', async (t) => {
  for (const path of ['/healthz', '/health']) {
    const reply = await t.http.get(path);
    expectStatus(reply, 200, path);
    eq(reply.body.ok, true, `${path} ok`);
    ok(typeof reply.body.network === 'string', `${path}: network is not a string`);
    ok(typeof reply.body.version === 'string', `${path}: version is not a string`);
    ok(typeof reply.body.uptime_ms === 'number', `${path}: uptime_ms is not a number`);
  }
});

item(2, 'an unknown path returns 404 with error.code NOT_FOUND', async (t) => {
  const alice = await t.agent('alice');
  for (const [path, token] of [
    [`/no-such-route-${ulid()}`, undefined],
    [`/no-such-route-${ulid()}`, alice.token],
    ['/v0/messages', alice.token],
    ['/mailbox/x/y', alice.token],
  ] as const) {
    expectError(await t.http.get(path, token), 404, 'NOT_FOUND', `GET ${path}`);
  }
});

item(3, 'a known path with the wrong method returns 405 METHOD_NOT_ALLOWED', async (t) => {
  const alice = await t.agent('alice');
  for (const [method, path] of [
    ['DELETE', '/messages'],
    ['PUT', '/messages'],
    ['POST', `/messages/${ulid()}`],
    ['POST', '/mailbox'],
    ['DELETE', '/mailbox'],
    ['GET', '/mailbox/read'],
  ]) {
    for (const token of [undefined, alice.token]) {
      expectError(
        await t.http.request(method, path, { token }),
        405,
        'METHOD_NOT_ALLOWED',
        `${method} ${path}${token ? ' with a bearer' : ''}`,
      );
    }
  }
});

item(4, 'every error response body is {"error":{"code":string,"message":string}}', async (t) => {
  const { alice, bob: recipient } = await t.agents('alice', 'bob');
  const bob = recipient.handle;
  const first = envelope(bob);
  expectStatus(await t.send(alice, first), 202);
  const replies: Reply[] = [
    await t.http.request('POST', '/messages', { token: alice.token, body: '{not json' }),
    await t.send(alice, { ...envelope(bob), id: 'lower' }),
    await t.http.get('/mailbox?limit=0', alice.token),
    await t.http.get('/mailbox'),
    await t.http.get('/mailbox', `unknown-${ulid()}`),
    await t.http.get('/_admin/agents', alice.token),
    await t.http.get(`/no-such-route-${ulid()}`),
    await t.send(alice, envelope(`@${alice.owner}.nobody`)),
    await t.http.get(`/_admin/agents/${encodeURIComponent(`@${alice.owner}.nobody`)}`, t.adminToken),
    await t.http.request('PUT', '/mailbox', { token: alice.token }),
    await t.send(alice, { ...first, subject: 'changed' }),
    await t.http.post('/_admin/agents', { handle: bob }, t.adminToken),
  ];
  eq(
    replies.map((r) => r.status),
    [400, 400, 400, 401, 401, 401, 404, 404, 404, 405, 409, 409],
    'statuses',
  );
  for (const reply of replies) {
    const body = JSON.parse(reply.text) as Record<string, unknown>;
    const what = `${reply.method} ${reply.path} → ${reply.status}`;
    eq(Object.keys(body), ['error'], `${what} top-level keys`);
    const error = body.error as Record<string, unknown>;
    eq(Object.keys(error).sort(), ['code', 'message'], `${what} error keys`);
    ok(
      typeof error.code === 'string' && typeof error.message === 'string',
      `${what}: code and message must be strings`,
    );
  }
});

item(5, 'agent routes without Authorization return 401 UNAUTHORIZED', async (t) => {
  for (const route of coreRoutes()) {
    expectError(
      await t.http.request(route.method, route.path, { body: route.body }),
      401,
      'UNAUTHORIZED',
      `${route.method} ${route.path}`,
    );
  }
  for (const authorization of ['', 'Basic abc', 'Bearer', 'Token x']) {
    expectError(
      await t.http.request('GET', '/mailbox', { headers: { authorization } }),
      401,
      'UNAUTHORIZED',
      `Authorization ${JSON.stringify(authorization)}`,
    );
  }
});

item(6, 'agent routes with an unknown bearer return 401 UNAUTHORIZED', async (t) => {
  const unknown = `unknown-${ulid()}`;
  for (const route of coreRoutes()) {
    expectError(
      await t.http.request(route.method, route.path, { token: unknown, body: route.body }),
      401,
      'UNAUTHORIZED',
      `${route.method} ${route.path}`,
    );
  }
  expectError(await t.http.get('/mailbox', t.adminToken), 401, 'UNAUTHORIZED', 'the admin token is not an agent token');
});

item(7, 'Authorization: bearer <t> (lower-case scheme) is accepted', async (t) => {
  const { alice, bob } = await t.agents('alice', 'bob');
  for (const authorization of [`bearer ${alice.token}`, `BEARER ${alice.token}`, `  Bearer   ${alice.token}  `]) {
    expectStatus(
      await t.http.request('GET', '/mailbox', { headers: { authorization } }),
      200,
      `Authorization ${JSON.stringify(authorization.replace(alice.token, '<t>'))}`,
    );
  }
  const sent = await t.http.request('POST', '/messages', {
    headers: { authorization: `bearer ${alice.token}` },
    body: envelope(bob.handle),
  });
  expectStatus(sent, 202, 'send with a lower-case scheme');
  expectStatus(
    await t.http.request('GET', '/_admin/agents', { headers: { authorization: `bearer ${t.adminToken}` } }),
    200,
    'admin with a lower-case scheme',
  );
});

item(8, 'admin routes reject agent tokens and missing or wrong admin tokens with 401', async (t) => {
  const alice = await t.agent('alice', { fields: { display_name: 'Alice' } });
  const path = `/_admin/agents/${encodeURIComponent(alice.handle)}`;
  const fresh = `@${alice.owner}.newcomer`;
  const routes: Array<[string, string, unknown]> = [
    ['POST', '/_admin/agents', { handle: fresh }],
    ['GET', '/_admin/agents', undefined],
    ['GET', path, undefined],
    ['PATCH', path, { display_name: 'hijacked' }],
    ['POST', `${path}/rotate-token`, undefined],
    ['DELETE', path, undefined],
  ];
  const credentials: Array<[string, Record<string, string>]> = [
    ['no bearer', {}],
    ['an agent token', { authorization: `Bearer ${alice.token}` }],
    ['a wrong admin token', { authorization: `Bearer ${t.adminToken}x` }],
  ];
  for (const [label, headers] of credentials) {
    for (const [method, route, body] of routes) {
      expectError(
        await t.http.request(method, route, { headers, body }),
        401,
        'UNAUTHORIZED',
        `${label}: ${method} ${route}`,
      );
    }
  }
  // Nothing changed: the agent and its token are as before, nothing was created.
  const shown = await t.http.get(path, t.adminToken);
  expectStatus(shown, 200, 'the agent still exists');
  eq(shown.body.display_name, 'Alice', 'display_name unchanged');
  expectStatus(await t.http.get('/mailbox', alice.token), 200, 'the agent token still works');
  const created = await t.http.get(`/_admin/agents/${encodeURIComponent(fresh)}`, t.adminToken);
  if (created.status !== 404)
    throw new Failure(`an unauthorized POST /_admin/agents created ${fresh} (${created.status})`);
});
