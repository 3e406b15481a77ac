import { envelope, startOperator, type TestOperator } from '../../support/operator';

/**
 * ASMTP.md §10 items 83–91: the self surface `/agents/me*` (§3.7: profile, allowlist, blocks) and
 * discovery `/agents/{owner}/{name}[/card]` under the visibility rule of §1.8.
 */
describe('agents: self surface and discovery', () => {
  let op: TestOperator;
  let owners = 0;

  beforeAll(async () => {
    op = await startOperator();
  });
  afterAll(async () => op?.close());

  /** A fresh owner name no other test uses. */
  const owner = () => `agents${++owners}`;

  async function agent(
    handle: string,
    fields: Record<string, unknown> = {},
  ): Promise<{ handle: string; token: string }> {
    return { handle, token: await op.agent(handle, fields) };
  }

  function expectError(reply: { status: number; body: any }, status: number, code: string): void {
    expect({ status: reply.status, code: reply.body?.error?.code }).toEqual({ status, code });
  }

  const path = (handle: string) => `/agents/${handle.slice(1).replace('.', '/')}`;

  it('#83 GET /agents/me returns 200 with canonical_handle = caller and inbound_policy', async () => {
    const o = owner();
    const open = await agent(`@${o}.open`);
    const gated = await agent(`@${o}.gated`, { policy: 'allowlist', display_name: 'Gated', visibility: 'public' });

    const me = await op.client.get('/agents/me', open.token);
    expect(me.status).toBe(200);
    expect(me.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(me.body).toEqual({
      canonical_handle: open.handle,
      display_name: open.handle,
      description: null,
      card_body: null,
      visibility: 'private',
      inbound_policy: 'open',
      image_url: null,
      owner_image_url: null,
      skills: null,
      inactive: false,
      paused: false,
      is_online: true,
      owner_label: `@${o}`,
      owner_display_name: o,
      owner_id: o,
      namespace: o,
      id: open.handle,
      local_name: 'open',
      owner_type: 'account',
      scope: 'personal',
      created_at: expect.any(Number),
      updated_at: expect.any(Number),
    });
    const other = await op.client.get('/agents/me', gated.token);
    expect(other.body).toMatchObject({
      canonical_handle: gated.handle,
      inbound_policy: 'allowlist',
      display_name: 'Gated',
      visibility: 'public',
    });
    // The policy follows admin changes.
    await op.client.patch(`/_admin/agents/${encodeURIComponent(gated.handle)}`, { policy: 'open' }, op.adminToken);
    expect((await op.client.get('/agents/me', gated.token)).body.inbound_policy).toBe('open');
    expectError(await op.client.get('/agents/me'), 401, 'UNAUTHORIZED');
  });

  it('#84 PATCH /agents/me {} returns 400 INVALID_UPDATE; {display_name: ""} returns 400 INVALID_DISPLAY_NAME', async () => {
    const me = await agent(`@${owner()}.me`);
    const before = (await op.client.get('/agents/me', me.token)).body;

    expectError(await op.client.patch('/agents/me', {}, me.token), 400, 'INVALID_UPDATE');
    expectError(await op.client.request('PATCH', '/agents/me', { token: me.token, body: '' }), 400, 'INVALID_UPDATE');
    // Keys the self surface does not take are ignored, so they alone are no update.
    expectError(
      await op.client.patch('/agents/me', { visibility: 'public', skills: ['x'] }, me.token),
      400,
      'INVALID_UPDATE',
    );
    expectError(await op.client.patch('/agents/me', { display_name: '' }, me.token), 400, 'INVALID_DISPLAY_NAME');
    expectError(await op.client.patch('/agents/me', { display_name: null }, me.token), 400, 'INVALID_DISPLAY_NAME');
    expectError(await op.client.patch('/agents/me', { display_name: 7 }, me.token), 400, 'INVALID_DISPLAY_NAME');
    expectError(await op.client.patch('/agents/me', { description: 7 }, me.token), 400, 'INVALID_DESCRIPTION');
    expectError(await op.client.patch('/agents/me', { card_body: ['#'] }, me.token), 400, 'INVALID_CARD_BODY');
    // Validation completes before any write.
    expectError(
      await op.client.patch('/agents/me', { description: 'kept?', display_name: '' }, me.token),
      400,
      'INVALID_DISPLAY_NAME',
    );
    expectError(
      await op.client.request('PATCH', '/agents/me', { token: me.token, body: '{"display_name":' }),
      400,
      'INVALID_JSON',
    );
    expect((await op.client.get('/agents/me', me.token)).body).toEqual(before);

    const patched = await op.client.patch(
      '/agents/me',
      { display_name: 'Me', description: 'about me', card_body: '# Me', visibility: 'public' },
      me.token,
    );
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({
      display_name: 'Me',
      description: 'about me',
      card_body: '# Me',
      visibility: 'private',
    });
    expect(patched.body.updated_at).toBeGreaterThanOrEqual(before.updated_at);
    const cleared = await op.client.patch('/agents/me', { description: null }, me.token);
    expect(cleared.body).toMatchObject({ display_name: 'Me', description: null, card_body: '# Me' });
  });

  it('#85 POST /agents/me/allowlist {entries: ["@acme.*"]} returns the full sorted list; repeating it is idempotent', async () => {
    const me = await agent(`@${owner()}.me`, { policy: 'allowlist' });
    const first = await op.client.post('/agents/me/allowlist', { entries: ['@acme.*'] }, me.token);
    expect(first.status).toBe(200);
    expect(first.body).toEqual({ entries: ['@acme.*'] });
    const again = await op.client.post('/agents/me/allowlist', { entries: ['@acme.*'] }, me.token);
    expect(again.status).toBe(200);
    expect(again.body).toEqual({ entries: ['@acme.*'] });

    // Byte order ('-' < '.' < '0' < '_'), duplicates collapsed, the whole list returned.
    const more = await op.client.post(
      '/agents/me/allowlist',
      { entries: ['@acme_x.bot', '@acme0.bot', '@acme.bot', '@acme-x.bot', '@acme.bot'] },
      me.token,
    );
    const sorted = ['@acme-x.bot', '@acme.*', '@acme.bot', '@acme0.bot', '@acme_x.bot'];
    expect(more.body).toEqual({ entries: sorted });
    expect((await op.client.get('/agents/me/allowlist', me.token)).body).toEqual({ entries: sorted });
    expect(
      (await op.client.get(`/_admin/agents/${encodeURIComponent(me.handle)}`, op.adminToken)).body.allowlist,
    ).toEqual(sorted);
  });

  it('#86 POST /agents/me/allowlist {entries: []} returns 400 INVALID_ENTRIES; a bad entry 400 INVALID_ALLOWLIST_ENTRY, nothing added', async () => {
    const me = await agent(`@${owner()}.me`);
    await op.client.post('/agents/me/allowlist', { entries: ['@keep.one'] }, me.token);
    for (const body of [
      { entries: [] },
      {},
      { entries: null },
      { entries: '@acme.*' },
      { entries: { a: '@acme.*' } },
    ]) {
      expectError(await op.client.post('/agents/me/allowlist', body, me.token), 400, 'INVALID_ENTRIES');
    }
    for (const bad of ['@Bad.x', '@a', 'a.b', '@a.b.c', '@*.*', '@acme.x*', '', 5, null]) {
      expectError(
        await op.client.post('/agents/me/allowlist', { entries: ['@fine.one', bad] }, me.token),
        400,
        'INVALID_ALLOWLIST_ENTRY',
      );
    }
    expect((await op.client.get('/agents/me/allowlist', me.token)).body).toEqual({ entries: ['@keep.one'] });
  });

  it('#87 DELETE /agents/me/allowlist/%40acme.* removes the entry (200); removing an absent entry returns 404', async () => {
    const me = await agent(`@${owner()}.me`);
    await op.client.post('/agents/me/allowlist', { entries: ['@acme.*', '@acme.bot', '@zed.*'] }, me.token);

    const removed = await op.client.delete('/agents/me/allowlist/%40acme.*', me.token);
    expect(removed.status).toBe(200);
    expect(removed.body).toEqual({ entries: ['@acme.bot', '@zed.*'] });
    const again = await op.client.delete('/agents/me/allowlist/%40acme.*', me.token);
    expect(again.status).toBe(404);
    expect(again.body.error.code).toBe('NOT_FOUND');

    // Fully encoded and raw forms name the same entry.
    expect((await op.client.delete('/agents/me/allowlist/%40zed.%2A', me.token)).body).toEqual({
      entries: ['@acme.bot'],
    });
    expect((await op.client.delete('/agents/me/allowlist/@acme.bot', me.token)).body).toEqual({ entries: [] });
    expectError(await op.client.delete('/agents/me/allowlist/%40never.listed', me.token), 404, 'NOT_FOUND');
    expectError(await op.client.delete('/agents/me/allowlist/acme.bot', me.token), 400, 'INVALID_ALLOWLIST_ENTRY');
    expect((await op.client.get('/agents/me/allowlist', me.token)).body).toEqual({ entries: [] });
  });

  it('#88 POST /agents/me/blocks {handle} returns 201 {blocked_agent_id, blocked_handle, created_at}; blocking oneself is 400 INVALID_BLOCK_TARGET', async () => {
    const o = owner();
    const me = await agent(`@${o}.me`);
    const pest = await agent(`@${o}.pest`);
    const before = Date.now();

    const blocked = await op.client.post('/agents/me/blocks', { handle: pest.handle }, me.token);
    expect(blocked.status).toBe(201);
    expect(blocked.body).toEqual({
      blocked_agent_id: expect.any(String),
      blocked_handle: pest.handle,
      created_at: expect.any(Number),
    });
    expect(blocked.body.created_at).toBeGreaterThanOrEqual(before);
    // Re-blocking keeps the original time; the target need not exist.
    const again = await op.client.post('/agents/me/blocks', { handle: pest.handle }, me.token);
    expect(again.status).toBe(201);
    expect(again.body).toEqual(blocked.body);
    expect((await op.client.post('/agents/me/blocks', { handle: `@${o}.ghost` }, me.token)).status).toBe(201);

    expectError(
      await op.client.post('/agents/me/blocks', { handle: me.handle }, me.token),
      400,
      'INVALID_BLOCK_TARGET',
    );
    for (const handle of [`@${o}.*`, '@Bad.x', 'x.y', undefined, 5]) {
      expectError(await op.client.post('/agents/me/blocks', { handle }, me.token), 400, 'INVALID_HANDLE');
    }
    const list = await op.client.get('/agents/me/blocks', me.token);
    expect(list.body.blocks.map((b: { blocked_handle: string }) => b.blocked_handle).sort()).toEqual([
      `@${o}.ghost`,
      pest.handle,
    ]);

    // The block refuses the pest's sends with the non-enumerating 404.
    const refused = await op.client.post('/messages', envelope(me.handle), pest.token);
    expect(refused.status).toBe(404);
    expect(refused.body).toEqual({ error: { code: 'NOT_FOUND', message: 'not found' } });
  });

  it('#89 DELETE /agents/me/blocks/{h} returns 200 {unblocked: true}, then 404 when repeated', async () => {
    const o = owner();
    const me = await agent(`@${o}.me`);
    const pest = await agent(`@${o}.pest`);
    await op.client.post('/agents/me/blocks', { handle: pest.handle }, me.token);
    expect((await op.client.post('/messages', envelope(me.handle), pest.token)).status).toBe(404);

    const unblocked = await op.client.delete(`/agents/me/blocks/${encodeURIComponent(pest.handle)}`, me.token);
    expect(unblocked.status).toBe(200);
    expect(unblocked.body).toEqual({ unblocked: true });
    expectError(
      await op.client.delete(`/agents/me/blocks/${encodeURIComponent(pest.handle)}`, me.token),
      404,
      'NOT_FOUND',
    );
    expect((await op.client.post('/messages', envelope(me.handle), pest.token)).status).toBe(202);

    await op.client.post('/agents/me/blocks', { handle: pest.handle }, me.token);
    expect((await op.client.delete(`/agents/me/blocks/${pest.handle}`, me.token)).body).toEqual({ unblocked: true });
    expectError(
      await op.client.delete(`/agents/me/blocks/${encodeURIComponent(`@${o}.*`)}`, me.token),
      400,
      'INVALID_HANDLE',
    );
    expect((await op.client.get('/agents/me/blocks', me.token)).body).toEqual({ blocks: [], next_cursor: null });
  });

  it('#90 a private agent not allowlisting the caller is a 404 like a nonexistent one; a public agent is 200 {agent, viewer}', async () => {
    const o = owner();
    const caller = await agent(`@${o}.caller`);
    const hidden = await agent(`@${o}.hidden`);
    const shown = await agent(`@${o}.shown`, { visibility: 'public', display_name: 'Shown' });
    const friend = await agent(`@${o}.friend`);
    const club = await agent(`@${o}.club`);
    await op.client.post('/agents/me/allowlist', { entries: [caller.handle] }, friend.token);
    await op.client.post('/agents/me/allowlist', { entries: [`@${o}.*`] }, club.token);
    // One-directional: the caller allowlisting the hidden agent does not reveal it.
    await op.client.post('/agents/me/allowlist', { entries: [hidden.handle] }, caller.token);

    const privateReply = await op.client.get(path(hidden.handle), caller.token);
    const missingReply = await op.client.get(path(`@${o}.ghost`), caller.token);
    expect(privateReply.status).toBe(404);
    expect(privateReply.body).toEqual({ error: { code: 'NOT_FOUND', message: `agent ${hidden.handle} not found` } });
    expect(missingReply.status).toBe(404);
    expect(missingReply.body).toEqual({ error: { code: 'NOT_FOUND', message: `agent @${o}.ghost not found` } });
    expect(privateReply.text.replace(hidden.handle, 'H')).toBe(missingReply.text.replace(`@${o}.ghost`, 'H'));

    const publicReply = await op.client.get(path(shown.handle), caller.token);
    expect(publicReply.status).toBe(200);
    expect(publicReply.body.viewer).toEqual({ relationship: 'none', can_edit: false });
    expect(publicReply.body.agent).toEqual((await op.client.get('/agents/me', shown.token)).body);
    expect(publicReply.body.agent).toMatchObject({ canonical_handle: shown.handle, display_name: 'Shown' });

    for (const visible of [friend, club]) {
      const reply = await op.client.get(path(visible.handle), caller.token);
      expect(reply.status).toBe(200);
      expect(reply.body.agent.canonical_handle).toBe(visible.handle);
    }
    const own = await op.client.get(path(hidden.handle), hidden.token);
    expect(own.status).toBe(200);
    expect(own.body.viewer).toEqual({ relationship: 'owner', can_edit: true });

    // Visibility is not delivery: the hidden agent still receives.
    expect((await op.client.post('/messages', envelope(hidden.handle), caller.token)).status).toBe(202);
    expectError(await op.client.get(path(shown.handle)), 401, 'UNAUTHORIZED');
  });

  it('#91 GET /agents/{o}/{n}/card returns text/markdown with the card body, or an empty string', async () => {
    const o = owner();
    const caller = await agent(`@${o}.caller`);
    const carded = await agent(`@${o}.carded`, { visibility: 'public', card_body: '# Carded\n\nI *do* things.\n' });
    const blank = await agent(`@${o}.blank`, { visibility: 'public' });
    const hidden = await agent(`@${o}.hidden`, { card_body: 'secret' });

    const card = await op.client.get(`${path(carded.handle)}/card`, caller.token);
    expect(card.status).toBe(200);
    expect(card.headers.get('content-type')).toBe('text/markdown; charset=utf-8');
    expect(card.text).toBe('# Carded\n\nI *do* things.\n');

    const empty = await op.client.get(`${path(blank.handle)}/card`, caller.token);
    expect(empty.status).toBe(200);
    expect(empty.headers.get('content-type')).toBe('text/markdown; charset=utf-8');
    expect(empty.text).toBe('');

    await op.client.patch('/agents/me', { card_body: 'updated' }, blank.token);
    expect((await op.client.get(`${path(blank.handle)}/card`, caller.token)).text).toBe('updated');

    const invisible = await op.client.get(`${path(hidden.handle)}/card`, caller.token);
    expect(invisible.status).toBe(404);
    expect(invisible.body).toEqual({ error: { code: 'NOT_FOUND', message: `agent ${hidden.handle} not found` } });
    expectError(await op.client.get(`${path(`@${o}.ghost`)}/card`, caller.token), 404, 'NOT_FOUND');
    expect((await op.client.get(`${path(hidden.handle)}/card`, hidden.token)).text).toBe('secret');
  });
});
