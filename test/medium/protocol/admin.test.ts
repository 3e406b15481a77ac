import type { Reply } from '../../support/client';
import { envelope, startOperator, type TestOperator } from '../../support/operator';

/**
 * ASMTP.md §10 items 9–15 (admin provisioning, §1.4) and the organizations extension
 * (EXTENSIONS.md §5).
 */
describe('admin provisioning and organizations (ASMTP.md §10 #9–15, EXTENSIONS.md §5)', () => {
  let op: TestOperator;
  beforeAll(async () => {
    op = await startOperator();
  });
  afterAll(async () => op?.close());

  const path = (handle: string) => `/_admin/agents/${encodeURIComponent(handle)}`;
  const create = (body: Record<string, unknown>, token = op.adminToken) =>
    op.client.post('/_admin/agents', body, token);
  const show = (handle: string, token = op.adminToken) => op.client.get(path(handle), token);

  const expectError = (reply: Reply, status: number, code: string, what = '') => {
    expect({ what, status: reply.status, code: reply.body?.error?.code }).toEqual({ what, status, code });
  };

  const createOrg = async (name: string, fields: Record<string, unknown> = {}): Promise<string> => {
    const reply = await op.client.post('/_admin/orgs', { name, ...fields }, op.adminToken);
    expect(reply.status).toBe(201);
    return reply.body.admin_token as string;
  };

  it('#9 POST /_admin/agents {handle} returns 201 with token and the documented defaults', async () => {
    const reply = await create({ handle: '@t9.alice' });
    expect(reply.status).toBe(201);
    expect(reply.body).toEqual({
      handle: '@t9.alice',
      token: expect.any(String),
      policy: 'allowlist',
      allowlist: [],
      display_name: '@t9.alice',
      description: null,
      card_body: null,
      visibility: 'private',
    });
    expect(Object.keys(reply.body)).toEqual([
      'handle',
      'token',
      'policy',
      'allowlist',
      'display_name',
      'description',
      'card_body',
      'visibility',
    ]);
    expect(reply.body.token.length).toBeGreaterThanOrEqual(32);
    // The token is a working agent bearer for exactly this agent.
    const me = await op.client.get('/agents/me', reply.body.token);
    expect(me.status).toBe(200);
    expect(me.body.canonical_handle).toBe('@t9.alice');
    expect(me.body.inbound_policy).toBe('allowlist');
    // Reading it back shows the same defaults and no token.
    const shown = await show('@t9.alice');
    expect(shown.status).toBe(200);
    expect(shown.body).not.toHaveProperty('token');
    expect(shown.body.policy).toBe('allowlist');
    expect(shown.body.visibility).toBe('private');
    expect(shown.body.display_name).toBe('@t9.alice');
    expect(shown.body.allowlist).toEqual([]);
  });

  it('#9 POST /_admin/agents stores the optional fields it is given', async () => {
    const reply = await create({
      handle: '@t9.bob',
      policy: 'open',
      display_name: 'Bob',
      description: 'a bot',
      card_body: '# Bob',
      visibility: 'public',
      some_unknown_field: true,
    });
    expect(reply.status).toBe(201);
    const shown = await show('@t9.bob');
    expect(shown.body).toEqual({
      handle: '@t9.bob',
      policy: 'open',
      allowlist: [],
      display_name: 'Bob',
      description: 'a bot',
      card_body: '# Bob',
      visibility: 'public',
    });
  });

  it('#10 POST /_admin/agents with an existing handle returns 409 AGENT_EXISTS and changes nothing', async () => {
    const first = await create({ handle: '@t10.alice', display_name: 'Original' });
    expect(first.status).toBe(201);
    const again = await create({ handle: '@t10.alice', display_name: 'Impostor', policy: 'open' });
    expectError(again, 409, 'AGENT_EXISTS');
    const shown = await show('@t10.alice');
    expect(shown.body.display_name).toBe('Original');
    expect(shown.body.policy).toBe('allowlist');
    // The original token still authenticates.
    expect((await op.client.get('/agents/me', first.body.token)).status).toBe(200);
  });

  it('#11 POST /_admin/agents with handle @Bad.x, @a, a.b or @a.b.c returns 400 INVALID_HANDLE and creates nothing', async () => {
    const bad = ['@Bad.x', '@a', 'a.b', '@a.b.c', '@t11.*', '@.x', '@x.', '', ' @t11.x', 42, null];
    for (const handle of bad) {
      expectError(await create({ handle }), 400, 'INVALID_HANDLE', JSON.stringify(handle));
    }
    expectError(await create({}), 400, 'INVALID_HANDLE', 'missing handle');
    const listed = await op.client.get('/_admin/agents', op.adminToken);
    const handles = listed.body.agents.map((a: { handle: string }) => a.handle);
    for (const handle of ['@Bad.x', '@bad.x', '@a', 'a.b', '@a.b.c', '@t11.*']) expect(handles).not.toContain(handle);
  });

  it('#11 admin path handles must be handles: 400 INVALID_HANDLE on GET, PATCH, rotate-token and DELETE', async () => {
    for (const handle of ['@Bad.x', 'a.b', '@a', '@t11.*']) {
      expectError(await op.client.get(path(handle), op.adminToken), 400, 'INVALID_HANDLE', `GET ${handle}`);
      expectError(await op.client.patch(path(handle), {}, op.adminToken), 400, 'INVALID_HANDLE', `PATCH ${handle}`);
      expectError(
        await op.client.post(`${path(handle)}/rotate-token`, undefined, op.adminToken),
        400,
        'INVALID_HANDLE',
        `rotate ${handle}`,
      );
      expectError(await op.client.delete(path(handle), op.adminToken), 400, 'INVALID_HANDLE', `DELETE ${handle}`);
    }
  });

  it('#12 GET /_admin/agents lists agents sorted by handle without token', async () => {
    for (const handle of ['@t12.zed', '@t12.amy', '@t12-a.bob', '@t12.a_b', '@t12.a-b', '@t12.m0']) {
      expect((await create({ handle })).status).toBe(201);
    }
    const reply = await op.client.get('/_admin/agents', op.adminToken);
    expect(reply.status).toBe(200);
    const handles: string[] = reply.body.agents.map((a: { handle: string }) => a.handle);
    const byteSorted = [...handles].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    expect(handles).toEqual(byteSorted);
    expect(handles.filter((h) => h.startsWith('@t12'))).toEqual([
      '@t12-a.bob',
      '@t12.a-b',
      '@t12.a_b',
      '@t12.amy',
      '@t12.m0',
      '@t12.zed',
    ]);
    for (const agent of reply.body.agents) {
      expect(agent).not.toHaveProperty('token');
      expect(reply.text).not.toContain('"token"');
    }
  });

  it('#13 POST /_admin/agents/{h}/rotate-token returns a new token; the old token then gets 401', async () => {
    const created = await create({ handle: '@t13.alice', policy: 'open' });
    const old = created.body.token as string;
    const bob = await op.agent('@t13.bob');
    expect((await op.client.get('/agents/me', old)).status).toBe(200);

    const rotated = await op.client.post(`${path('@t13.alice')}/rotate-token`, undefined, op.adminToken);
    expect(rotated.status).toBe(200);
    expect(rotated.body.handle).toBe('@t13.alice');
    expect(typeof rotated.body.token).toBe('string');
    expect(rotated.body.token).not.toBe(old);
    expect(rotated.body.policy).toBe('open');

    expectError(await op.client.get('/agents/me', old), 401, 'UNAUTHORIZED', 'old token');
    expectError(await op.client.post('/messages', envelope('@t13.bob'), old), 401, 'UNAUTHORIZED', 'old token send');
    expect((await op.client.get('/mailbox', bob)).body.envelope_headers).toEqual([]);
    const me = await op.client.get('/agents/me', rotated.body.token);
    expect(me.status).toBe(200);
    expect(me.body.canonical_handle).toBe('@t13.alice');
    expect((await show('@t13.alice')).body).not.toHaveProperty('token');
  });

  it('#13 rotate-token of an unknown agent returns 404', async () => {
    expectError(
      await op.client.post(`${path('@t13.nobody')}/rotate-token`, undefined, op.adminToken),
      404,
      'NOT_FOUND',
    );
  });

  it('#14 DELETE /_admin/agents/{h} returns 204; repeating it returns 404', async () => {
    const token = await op.agent('@t14.alice');
    const first = await op.client.delete(path('@t14.alice'), op.adminToken);
    expect(first.status).toBe(204);
    expect(first.text).toBe('');
    expectError(await op.client.delete(path('@t14.alice'), op.adminToken), 404, 'NOT_FOUND', 'repeat');
    expectError(await show('@t14.alice'), 404, 'NOT_FOUND', 'GET after delete');
    expectError(await op.client.get('/agents/me', token), 401, 'UNAUTHORIZED', 'token after delete');
    const listed = await op.client.get('/_admin/agents', op.adminToken);
    expect(listed.body.agents.map((a: { handle: string }) => a.handle)).not.toContain('@t14.alice');
    // The handle can be registered again afterwards.
    expect((await create({ handle: '@t14.alice' })).status).toBe(201);
  });

  it('#14 DELETE accepts the raw (@) as well as the percent-encoded (%40) path handle', async () => {
    await op.agent('@t14.raw');
    const raw = await op.client.delete('/_admin/agents/@t14.raw', op.adminToken);
    expect(raw.status).toBe(204);
    expectError(await op.client.delete('/_admin/agents/%40t14.raw', op.adminToken), 404, 'NOT_FOUND');
  });

  it('#14 a deleted recipient is unknown to senders (404 not found)', async () => {
    const alice = await op.agent('@t14.sender');
    await op.agent('@t14.gone');
    expect((await op.client.delete(path('@t14.gone'), op.adminToken)).status).toBe(204);
    const sent = await op.client.post('/messages', envelope('@t14.gone'), alice);
    expectError(sent, 404, 'NOT_FOUND');
  });

  it('#15 PATCH /_admin/agents/{h} with {"policy":"maybe"} returns 400 INVALID_POLICY and changes nothing', async () => {
    await create({ handle: '@t15.alice', display_name: 'Alice', description: 'before' });
    const before = await show('@t15.alice');
    for (const body of [
      { policy: 'maybe' },
      { display_name: 'Changed', description: 'after', policy: 'maybe' },
      { policy: 'OPEN' },
      { policy: 1 },
    ]) {
      expectError(
        await op.client.patch(path('@t15.alice'), body, op.adminToken),
        400,
        'INVALID_POLICY',
        JSON.stringify(body),
      );
    }
    const after = await show('@t15.alice');
    expect(after.body).toEqual(before.body);
    expect(after.body.policy).toBe('allowlist');
    expect(after.body.display_name).toBe('Alice');
  });

  it('#15 PATCH validates every field before writing (field codes), and a valid PATCH applies', async () => {
    await create({ handle: '@t15.bob' });
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ display_name: '' }, 'INVALID_DISPLAY_NAME'],
      [{ display_name: null }, 'INVALID_DISPLAY_NAME'],
      [{ description: 5 }, 'INVALID_DESCRIPTION'],
      [{ card_body: [] }, 'INVALID_CARD_BODY'],
      [{ visibility: 'secret', display_name: 'Bob' }, 'INVALID_VISIBILITY'],
    ];
    for (const [body, code] of cases) {
      expectError(await op.client.patch(path('@t15.bob'), body, op.adminToken), 400, code, JSON.stringify(body));
    }
    expect((await show('@t15.bob')).body.display_name).toBe('@t15.bob');
    expectError(
      await op.client.request('PATCH', path('@t15.bob'), { token: op.adminToken, body: '[1]' }),
      400,
      'INVALID_JSON',
    );
    // 404 comes before body validation.
    expectError(await op.client.patch(path('@t15.nobody'), { policy: 'maybe' }, op.adminToken), 404, 'NOT_FOUND');
    // `{}` is a no-op; `policy: null` counts as omitted.
    expect((await op.client.patch(path('@t15.bob'), {}, op.adminToken)).status).toBe(200);
    const applied = await op.client.patch(
      path('@t15.bob'),
      { policy: null, display_name: 'Bob', description: 'd', visibility: 'public' },
      op.adminToken,
    );
    expect(applied.status).toBe(200);
    expect(applied.body).not.toHaveProperty('token');
    expect(applied.body).toMatchObject({
      policy: 'allowlist',
      display_name: 'Bob',
      description: 'd',
      visibility: 'public',
    });
    const cleared = await op.client.patch(path('@t15.bob'), { description: null, policy: 'open' }, op.adminToken);
    expect(cleared.body).toMatchObject({ policy: 'open', description: null, display_name: 'Bob' });
  });

  describe('organizations (EXTENSIONS.md §5)', () => {
    const orgPath = (name: string) => `/_admin/orgs/${name}`;

    it('orgs: POST /_admin/orgs {name} returns 201 with admin_token; GET lists and shows it without the token', async () => {
      const created = await op.client.post('/_admin/orgs', { name: 'acme1' }, op.adminToken);
      expect(created.status).toBe(201);
      expect(created.body.name).toBe('acme1');
      expect(typeof created.body.admin_token).toBe('string');
      expect(created.body.admin_token.length).toBeGreaterThanOrEqual(32);
      expect(created.body.retention_days).toBeNull();
      expect(created.body.max_agents).toBeNull();

      const shown = await op.client.get(orgPath('acme1'), op.adminToken);
      expect(shown.status).toBe(200);
      expect(shown.body.name).toBe('acme1');
      expect(shown.body).not.toHaveProperty('admin_token');

      await createOrg('acme0');
      const listed = await op.client.get('/_admin/orgs', op.adminToken);
      expect(listed.status).toBe(200);
      const names: string[] = listed.body.orgs.map((o: { name: string }) => o.name);
      expect(names).toEqual(expect.arrayContaining(['acme0', 'acme1']));
      expect(names.indexOf('acme0')).toBeLessThan(names.indexOf('acme1'));
      expect(listed.text).not.toContain('admin_token');

      expectError(await op.client.get(orgPath('nosuchorg'), op.adminToken), 404, 'NOT_FOUND');
    });

    it('orgs: POST /_admin/orgs with an existing name is 409 and with an invalid name is 400, creating nothing', async () => {
      const token = await createOrg('dup1');
      const again = await op.client.post('/_admin/orgs', { name: 'dup1' }, op.adminToken);
      expect(again.status).toBe(409);
      // The first organization's token is still the valid one.
      expect((await op.client.get('/_admin/agents', token)).status).toBe(200);
      for (const name of ['Bad', 'a.b', '@acme', '', 'x'.repeat(65), 7, null]) {
        const reply = await op.client.post('/_admin/orgs', { name }, op.adminToken);
        expect({ name, status: reply.status }).toEqual({ name, status: 400 });
      }
      expect((await op.client.post('/_admin/orgs', {}, op.adminToken)).status).toBe(400);
      const names = (await op.client.get('/_admin/orgs', op.adminToken)).body.orgs.map((o: { name: string }) => o.name);
      expect(names).not.toContain('Bad');
      expect(names).not.toContain('a.b');
    });

    it('orgs: PATCH /_admin/orgs/{name} takes retention_days, content_guard and max_agents', async () => {
      await createOrg('patch1');
      const patched = await op.client.patch(
        orgPath('patch1'),
        { retention_days: 30, content_guard: 'block', max_agents: 5 },
        op.adminToken,
      );
      expect(patched.status).toBe(200);
      expect(patched.body).toMatchObject({ name: 'patch1', retention_days: 30, content_guard: 'block', max_agents: 5 });
      expect(patched.body).not.toHaveProperty('admin_token');
      const shown = await op.client.get(orgPath('patch1'), op.adminToken);
      expect(shown.body).toMatchObject({ retention_days: 30, content_guard: 'block', max_agents: 5 });
      // null clears a limit; {} changes nothing.
      const cleared = await op.client.patch(
        orgPath('patch1'),
        { retention_days: null, max_agents: null },
        op.adminToken,
      );
      expect(cleared.body).toMatchObject({ retention_days: null, content_guard: 'block', max_agents: null });
      expect((await op.client.patch(orgPath('patch1'), {}, op.adminToken)).body).toMatchObject({
        content_guard: 'block',
      });
      expectError(await op.client.patch(orgPath('nosuchorg'), { max_agents: 1 }, op.adminToken), 404, 'NOT_FOUND');
    });

    it('orgs: an invalid PATCH value is 400 and changes nothing', async () => {
      await createOrg('patch2', { retention_days: 7, content_guard: 'warn', max_agents: 3 });
      const before = (await op.client.get(orgPath('patch2'), op.adminToken)).body;
      const invalid: Array<Record<string, unknown>> = [
        { retention_days: 0 },
        { retention_days: -1 },
        { retention_days: 1.5 },
        { retention_days: '30' },
        { content_guard: 'loud' },
        { content_guard: null },
        { max_agents: -1 },
        { max_agents: '3' },
        { max_agents: 2.5 },
        { retention_days: 30, content_guard: 'block', max_agents: -1 },
      ];
      for (const body of invalid) {
        const reply = await op.client.patch(orgPath('patch2'), body, op.adminToken);
        expect({ body, status: reply.status }).toEqual({ body, status: 400 });
        expect(reply.body.error.code).toMatch(/^INVALID_/);
      }
      expect((await op.client.request('PATCH', orgPath('patch2'), { token: op.adminToken, body: 'nope' })).status).toBe(
        400,
      );
      const after = (await op.client.get(orgPath('patch2'), op.adminToken)).body;
      expect(after).toEqual(before);
    });

    it('orgs: POST /_admin/orgs/{name}/rotate-token returns a new admin_token; the old one is then 401', async () => {
      const old = await createOrg('rot1');
      expect((await op.client.get('/_admin/agents', old)).status).toBe(200);
      const rotated = await op.client.post(`${orgPath('rot1')}/rotate-token`, undefined, op.adminToken);
      expect(rotated.status).toBe(200);
      expect(rotated.body.name).toBe('rot1');
      expect(typeof rotated.body.admin_token).toBe('string');
      expect(rotated.body.admin_token).not.toBe(old);
      expectError(await op.client.get('/_admin/agents', old), 401, 'UNAUTHORIZED', 'old org token');
      expectError(
        await op.client.post('/_admin/agents', { handle: '@rot1.bot' }, old),
        401,
        'UNAUTHORIZED',
        'old org token create',
      );
      expectError(await show('@rot1.bot'), 404, 'NOT_FOUND', 'nothing created');
      expect((await op.client.post('/_admin/agents', { handle: '@rot1.bot' }, rotated.body.admin_token)).status).toBe(
        201,
      );
      expectError(
        await op.client.post(`${orgPath('nosuchorg')}/rotate-token`, undefined, op.adminToken),
        404,
        'NOT_FOUND',
      );
    });

    it('orgs: an organization admin token manages agents @<org>.* through /_admin/agents', async () => {
      const orgToken = await createOrg('own1');
      await op.agent('@other1.bot');
      const created = await create({ handle: '@own1.alpha', policy: 'open' }, orgToken);
      expect(created.status).toBe(201);
      expect(typeof created.body.token).toBe('string');
      expect((await op.client.get('/agents/me', created.body.token)).body.canonical_handle).toBe('@own1.alpha');
      expect((await create({ handle: '@own1.beta' }, orgToken)).status).toBe(201);

      const listed = await op.client.get('/_admin/agents', orgToken);
      expect(listed.status).toBe(200);
      expect(listed.body.agents.map((a: { handle: string }) => a.handle)).toEqual(['@own1.alpha', '@own1.beta']);

      expect((await show('@own1.alpha', orgToken)).body.handle).toBe('@own1.alpha');
      const patched = await op.client.patch(path('@own1.alpha'), { display_name: 'Alpha' }, orgToken);
      expect(patched.status).toBe(200);
      expect(patched.body.display_name).toBe('Alpha');
      const rotated = await op.client.post(`${path('@own1.alpha')}/rotate-token`, undefined, orgToken);
      expect(rotated.status).toBe(200);
      expectError(await op.client.get('/agents/me', created.body.token), 401, 'UNAUTHORIZED', 'rotated away');
      expect((await op.client.delete(path('@own1.beta'), orgToken)).status).toBe(204);
      expectError(await show('@own1.beta'), 404, 'NOT_FOUND', 'deleted by org admin');
      // An organization admin token is not an agent token.
      expectError(await op.client.get('/agents/me', orgToken), 401, 'UNAUTHORIZED', 'org token on agent route');
    });

    it('orgs: an organization admin token gets 404 for any agent outside @<org>.* and changes nothing', async () => {
      const orgToken = await createOrg('own2');
      const victimToken = await op.agent('@other2.victim', { display_name: 'Victim' });
      await op.agent('@own22.lookalike');
      for (const handle of ['@other2.victim', '@own22.lookalike']) {
        expectError(await show(handle, orgToken), 404, 'NOT_FOUND', `GET ${handle}`);
        expectError(
          await op.client.patch(path(handle), { display_name: 'Owned' }, orgToken),
          404,
          'NOT_FOUND',
          `PATCH ${handle}`,
        );
        expectError(
          await op.client.post(`${path(handle)}/rotate-token`, undefined, orgToken),
          404,
          'NOT_FOUND',
          `rotate ${handle}`,
        );
        expectError(await op.client.delete(path(handle), orgToken), 404, 'NOT_FOUND', `DELETE ${handle}`);
      }
      // Creating outside the organization is a 404 too, even for a handle nobody holds.
      expectError(await create({ handle: '@other2.newbie' }, orgToken), 404, 'NOT_FOUND', 'create outside');
      expectError(await create({ handle: '@own.newbie' }, orgToken), 404, 'NOT_FOUND', 'create in prefix org');
      // A handle outside the org that does not exist looks the same as one that does.
      expectError(await show('@other2.ghost', orgToken), 404, 'NOT_FOUND', 'GET ghost');
      // The org's listing shows none of them.
      expect((await op.client.get('/_admin/agents', orgToken)).body.agents).toEqual([]);
      // Nothing changed.
      const victim = await show('@other2.victim');
      expect(victim.body.display_name).toBe('Victim');
      expect((await op.client.get('/agents/me', victimToken)).status).toBe(200);
      expectError(await show('@other2.newbie'), 404, 'NOT_FOUND', 'not created');
      expectError(await show('@own.newbie'), 404, 'NOT_FOUND', 'not created');
      expect((await show('@own22.lookalike')).status).toBe(200);
    });

    it('orgs: organization routes reject an organization admin token with 401', async () => {
      const orgToken = await createOrg('own3');
      await createOrg('own3b');
      const routes: Array<[string, string, unknown]> = [
        ['POST', '/_admin/orgs', { name: 'own3new' }],
        ['GET', '/_admin/orgs', undefined],
        ['GET', orgPath('own3'), undefined],
        ['PATCH', orgPath('own3'), { max_agents: 100 }],
        ['POST', `${orgPath('own3')}/rotate-token`, undefined],
        ['DELETE', orgPath('own3b'), undefined],
        ['DELETE', orgPath('own3'), undefined],
      ];
      for (const [method, route, body] of routes) {
        const reply = await op.client.request(method, route, { token: orgToken, body });
        expectError(reply, 401, 'UNAUTHORIZED', `${method} ${route}`);
      }
      expectError(await op.client.get(orgPath('own3new'), op.adminToken), 404, 'NOT_FOUND', 'not created');
      expect((await op.client.get(orgPath('own3'), op.adminToken)).body.max_agents).toBeNull();
      expect((await op.client.get(orgPath('own3b'), op.adminToken)).status).toBe(200);
      expect((await op.client.get('/_admin/agents', orgToken)).status).toBe(200); // not rotated
    });

    it('orgs: the max_agents quota refuses further agents with 429 QUOTA_EXCEEDED', async () => {
      const orgToken = await createOrg('quota1', { max_agents: 2 });
      expect((await create({ handle: '@quota1.a' }, orgToken)).status).toBe(201);
      expect((await create({ handle: '@quota1.b' }, op.adminToken)).status).toBe(201);
      expectError(await create({ handle: '@quota1.c' }, orgToken), 429, 'QUOTA_EXCEEDED', 'org admin');
      expectError(await create({ handle: '@quota1.c' }, op.adminToken), 429, 'QUOTA_EXCEEDED', 'operator admin');
      expectError(await show('@quota1.c'), 404, 'NOT_FOUND', 'not created');
      expect((await op.client.get('/_admin/agents', orgToken)).body.agents).toHaveLength(2);
      // Agents of other owners are not counted.
      expect((await create({ handle: '@quota1x.c' })).status).toBe(201);
      // Room again after a delete, or after raising the quota.
      expect((await op.client.delete(path('@quota1.a'), orgToken)).status).toBe(204);
      expect((await create({ handle: '@quota1.c' }, orgToken)).status).toBe(201);
      expectError(await create({ handle: '@quota1.d' }, orgToken), 429, 'QUOTA_EXCEEDED', 'full again');
      expect((await op.client.patch(orgPath('quota1'), { max_agents: 3 }, op.adminToken)).status).toBe(200);
      expect((await create({ handle: '@quota1.d' }, orgToken)).status).toBe(201);
      // max_agents 0 admits nobody.
      const zero = await createOrg('quota0', { max_agents: 0 });
      expectError(await create({ handle: '@quota0.a' }, zero), 429, 'QUOTA_EXCEEDED', 'zero quota');
    });

    it('orgs: the max_agents quota holds under concurrent creates', async () => {
      const orgToken = await createOrg('quota2', { max_agents: 3 });
      const replies = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          create({ handle: `@quota2.a${i}` }, i % 2 === 0 ? orgToken : op.adminToken),
        ),
      );
      const statuses = replies.map((r) => r.status).sort();
      expect(statuses).toEqual([201, 201, 201, 429, 429, 429, 429, 429, 429, 429]);
      for (const reply of replies.filter((r) => r.status === 429)) expect(reply.body.error.code).toBe('QUOTA_EXCEEDED');
      expect((await op.client.get('/_admin/agents', orgToken)).body.agents).toHaveLength(3);
    });

    it('orgs: agent PATCH also takes content_guard and retention_days overrides; invalid values are 400', async () => {
      await create({ handle: '@ovr1.alice' });
      const patched = await op.client.patch(
        path('@ovr1.alice'),
        { content_guard: 'block', retention_days: 7 },
        op.adminToken,
      );
      expect(patched.status).toBe(200);
      expect(patched.body).toMatchObject({ content_guard: 'block', retention_days: 7 });
      expect((await show('@ovr1.alice')).body).toMatchObject({ content_guard: 'block', retention_days: 7 });
      for (const body of [
        { content_guard: 'loud' },
        { retention_days: 0 },
        { retention_days: 'x' },
        { retention_days: 1.5 },
      ]) {
        const reply = await op.client.patch(path('@ovr1.alice'), body, op.adminToken);
        expect({ body, status: reply.status }).toEqual({ body, status: 400 });
      }
      expect((await show('@ovr1.alice')).body).toMatchObject({ content_guard: 'block', retention_days: 7 });
      // null clears an override (the field is then omitted, as the ASMTP AdminAgent has no such field).
      const cleared = await op.client.patch(
        path('@ovr1.alice'),
        { content_guard: null, retention_days: null },
        op.adminToken,
      );
      expect(cleared.status).toBe(200);
      expect(cleared.body).not.toHaveProperty('content_guard');
      expect(cleared.body).not.toHaveProperty('retention_days');
    });

    it('orgs: DELETE /_admin/orgs/{name} returns 204 and removes the organization and its agents', async () => {
      const orgToken = await createOrg('gone1');
      const member = await create({ handle: '@gone1.a', policy: 'open' }, orgToken);
      await create({ handle: '@gone1.b' }, orgToken);
      const outsider = await op.agent('@gone1x.keep');
      const deleted = await op.client.delete(orgPath('gone1'), op.adminToken);
      expect(deleted.status).toBe(204);
      expect(deleted.text).toBe('');
      expectError(await op.client.get(orgPath('gone1'), op.adminToken), 404, 'NOT_FOUND', 'org gone');
      expectError(await op.client.delete(orgPath('gone1'), op.adminToken), 404, 'NOT_FOUND', 'repeat delete');
      expect(
        (await op.client.get('/_admin/orgs', op.adminToken)).body.orgs.map((o: { name: string }) => o.name),
      ).not.toContain('gone1');
      expectError(await show('@gone1.a'), 404, 'NOT_FOUND', 'member a gone');
      expectError(await show('@gone1.b'), 404, 'NOT_FOUND', 'member b gone');
      expectError(await op.client.get('/agents/me', member.body.token), 401, 'UNAUTHORIZED', 'member token');
      expectError(await op.client.get('/_admin/agents', orgToken), 401, 'UNAUTHORIZED', 'org token');
      const handles = (await op.client.get('/_admin/agents', op.adminToken)).body.agents.map(
        (a: { handle: string }) => a.handle,
      );
      expect(handles.filter((h: string) => h.startsWith('@gone1.'))).toEqual([]);
      // Agents of other owners stay.
      expect((await op.client.get('/agents/me', outsider)).status).toBe(200);
      // The removed agents are unknown recipients now.
      expectError(
        await op.client.post('/messages', envelope('@gone1.a'), outsider),
        404,
        'NOT_FOUND',
        'send to removed',
      );
    });
  });
});
