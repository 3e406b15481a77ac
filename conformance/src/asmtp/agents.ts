import { caps } from '../caps';
import { eq, expectError, expectStatus, ok } from '../assert';
import type { T } from '../runner';
import { item } from './item';

/** ASMTP.md §10 items 83–91: the self surface, allowlist, blocks and discovery (§3.7–3.8). */

const withCap = (
  n: number,
  title: string,
  cap: 'self' | 'allowlist' | 'blocks' | 'discovery',
  run: (t: T) => Promise<void>,
) =>
  item(n, title, async (t) => {
    await t.need(caps[cap](t.run));
    await run(t);
  });

withCap(83, 'GET /agents/me returns 200 with canonical_handle = caller and inbound_policy', 'self', async (t) => {
  const open = await t.agent('open');
  const gated = await t.agent('gated', { policy: 'allowlist' });
  const me = await t.http.get('/agents/me', open.token);
  expectStatus(me, 200);
  eq([me.body.canonical_handle, me.body.inbound_policy], [open.handle, 'open'], 'an open agent');
  const other = await t.http.get('/agents/me', gated.token);
  eq([other.body.canonical_handle, other.body.inbound_policy], [gated.handle, 'allowlist'], 'an allowlist agent');
});

withCap(
  84,
  'PATCH /agents/me {} returns 400 INVALID_UPDATE; {display_name:""} returns 400 INVALID_DISPLAY_NAME',
  'self',
  async (t) => {
    const me = await t.agent('me');
    const before = (await t.http.get('/agents/me', me.token)).body;
    expectError(await t.http.patch('/agents/me', {}, me.token), 400, 'INVALID_UPDATE', '{}');
    expectError(
      await t.http.patch('/agents/me', { display_name: '' }, me.token),
      400,
      'INVALID_DISPLAY_NAME',
      'display_name ""',
    );
    expectError(
      await t.http.patch('/agents/me', { description: 'kept?', display_name: '' }, me.token),
      400,
      'INVALID_DISPLAY_NAME',
      'with a valid field first',
    );
    eq((await t.http.get('/agents/me', me.token)).body, before, 'the agent after refused PATCHes');
    const patched = await t.http.patch('/agents/me', { display_name: 'Me', description: 'about me' }, me.token);
    expectStatus(patched, 200);
    eq([patched.body.display_name, patched.body.description], ['Me', 'about me'], 'a valid PATCH');
  },
);

withCap(
  85,
  'POST /agents/me/allowlist {entries:["@acme.*"]} returns 200 with the full sorted list; repeating it is idempotent',
  'allowlist',
  async (t) => {
    const me = await t.agent('me', { policy: 'allowlist' });
    const o = t.owner('x');
    const first = await t.http.post('/agents/me/allowlist', { entries: [`@${o}.*`] }, me.token);
    expectStatus(first, 200);
    eq(first.body, { entries: [`@${o}.*`] }, 'after the first add');
    eq(
      (await t.http.post('/agents/me/allowlist', { entries: [`@${o}.*`] }, me.token)).body,
      { entries: [`@${o}.*`] },
      'after repeating it',
    );
    const more = await t.http.post(
      '/agents/me/allowlist',
      { entries: [`@${o}_x.bot`, `@${o}0.bot`, `@${o}.bot`, `@${o}-x.bot`] },
      me.token,
    );
    eq(
      more.body,
      { entries: [`@${o}-x.bot`, `@${o}.*`, `@${o}.bot`, `@${o}0.bot`, `@${o}_x.bot`] },
      'the whole list in byte order',
    );
    eq((await t.http.get('/agents/me/allowlist', me.token)).body, more.body, 'GET /agents/me/allowlist');
  },
);

withCap(
  86,
  'POST /agents/me/allowlist {entries:[]} returns 400 INVALID_ENTRIES; a bad entry returns 400 INVALID_ALLOWLIST_ENTRY',
  'allowlist',
  async (t) => {
    const me = await t.agent('me');
    const keep = `@${t.owner('k')}.one`;
    expectStatus(await t.http.post('/agents/me/allowlist', { entries: [keep] }, me.token), 200);
    for (const body of [{ entries: [] }, {}, { entries: 'x' }]) {
      expectError(
        await t.http.post('/agents/me/allowlist', body, me.token),
        400,
        'INVALID_ENTRIES',
        JSON.stringify(body),
      );
    }
    for (const bad of ['@Bad.x', '@a', 'a.b', '@a.b.c', '@acme.x*']) {
      expectError(
        await t.http.post('/agents/me/allowlist', { entries: [`@${t.owner('f')}.one`, bad] }, me.token),
        400,
        'INVALID_ALLOWLIST_ENTRY',
        bad,
      );
    }
    eq((await t.http.get('/agents/me/allowlist', me.token)).body, { entries: [keep] }, 'nothing added');
  },
);

withCap(
  87,
  'DELETE /agents/me/allowlist/%40acme.* removes the entry (200); removing an absent entry returns 404',
  'allowlist',
  async (t) => {
    const me = await t.agent('me');
    const o = t.owner('x');
    expectStatus(await t.http.post('/agents/me/allowlist', { entries: [`@${o}.*`, `@${o}.bot`] }, me.token), 200);
    const removed = await t.http.delete(`/agents/me/allowlist/%40${o}.*`, me.token);
    expectStatus(removed, 200);
    eq(removed.body, { entries: [`@${o}.bot`] }, 'after the delete');
    expectError(
      await t.http.delete(`/agents/me/allowlist/%40${o}.*`, me.token),
      404,
      'NOT_FOUND',
      'the same delete again',
    );
    eq(
      (await t.http.delete(`/agents/me/allowlist/%40${o}.bot`, me.token)).body,
      { entries: [] },
      'a percent-encoded handle',
    );
  },
);

withCap(
  88,
  'POST /agents/me/blocks {handle} returns 201 {blocked_agent_id, blocked_handle, created_at}; blocking oneself returns 400 INVALID_BLOCK_TARGET',
  'blocks',
  async (t) => {
    const { me, other } = await t.agents('me', 'other');
    const reply = await t.http.post('/agents/me/blocks', { handle: other.handle }, me.token);
    expectStatus(reply, 201);
    eq(reply.body.blocked_handle, other.handle, 'blocked_handle');
    ok(typeof reply.body.blocked_agent_id === 'string', 'blocked_agent_id is a string');
    ok(typeof reply.body.created_at === 'number', 'created_at is a number');
    // The target need not exist.
    expectStatus(
      await t.http.post('/agents/me/blocks', { handle: `@${t.owner()}.ghost` }, me.token),
      201,
      'blocking a nonexistent handle',
    );
    expectError(
      await t.http.post('/agents/me/blocks', { handle: me.handle }, me.token),
      400,
      'INVALID_BLOCK_TARGET',
      'blocking oneself',
    );
    expectError(
      await t.http.post('/agents/me/blocks', { handle: `@${t.owner()}.*` }, me.token),
      400,
      'INVALID_HANDLE',
      'a glob',
    );
  },
);

withCap(
  89,
  'DELETE /agents/me/blocks/{h} returns 200 {unblocked:true}, then 404 when repeated',
  'blocks',
  async (t) => {
    const { me, other } = await t.agents('me', 'other');
    expectStatus(await t.http.post('/agents/me/blocks', { handle: other.handle }, me.token), 201);
    const path = `/agents/me/blocks/${encodeURIComponent(other.handle)}`;
    const reply = await t.http.delete(path, me.token);
    expectStatus(reply, 200);
    eq(reply.body, { unblocked: true }, 'the unblock');
    expectError(await t.http.delete(path, me.token), 404, 'NOT_FOUND', 'repeated');
  },
);

withCap(
  90,
  'GET /agents/{o}/{n} of a private agent not allowlisting the caller returns 404 identical to a nonexistent agent; of a public agent returns 200 {agent, viewer}',
  'discovery',
  async (t) => {
    const caller = await t.agent('caller');
    const hidden = await t.agent('hidden');
    const shown = await t.agent('shown', { fields: { visibility: 'public', display_name: 'Shown' } });
    const o = t.owner();
    const privateReply = await t.http.get(`/agents/${o}/hidden`, caller.token);
    const missingReply = await t.http.get(`/agents/${o}/ghost`, caller.token);
    expectError(privateReply, 404, 'NOT_FOUND', 'a private agent');
    expectError(missingReply, 404, 'NOT_FOUND', 'a nonexistent agent');
    eq(privateReply.body.error.code, missingReply.body.error.code, 'private vs nonexistent');
    const publicReply = await t.http.get(`/agents/${o}/shown`, caller.token);
    expectStatus(publicReply, 200, 'a public agent');
    eq(
      [publicReply.body.agent.canonical_handle, publicReply.body.agent.display_name],
      [shown.handle, 'Shown'],
      'the agent',
    );
    eq(publicReply.body.viewer.relationship, 'none', 'viewer.relationship');
    const self = await t.http.get(`/agents/${o}/hidden`, hidden.token);
    expectStatus(self, 200, 'a private agent viewing itself');
    eq([self.body.viewer.relationship, self.body.viewer.can_edit], ['owner', true], 'the owner viewer');
  },
);

withCap(
  91,
  'GET /agents/{o}/{n}/card returns text/markdown with the card body (empty string if none)',
  'discovery',
  async (t) => {
    const caller = await t.agent('caller');
    await t.agent('plain', { fields: { visibility: 'public' } });
    await t.agent('carded', { fields: { visibility: 'public', card_body: '# Carded\n\nDoes things.' } });
    const o = t.owner();
    const carded = await t.http.get(`/agents/${o}/carded/card`, caller.token);
    expectStatus(carded, 200);
    ok(
      /^text\/markdown/i.test(carded.headers.get('content-type') ?? ''),
      `Content-Type ${carded.headers.get('content-type')} is not text/markdown`,
    );
    eq(carded.text, '# Carded\n\nDoes things.', 'the card body');
    const plain = await t.http.get(`/agents/${o}/plain/card`, caller.token);
    expectStatus(plain, 200);
    eq(plain.text, '', 'an agent without a card');
    expectError(await t.http.get(`/agents/${o}/ghost/card`, caller.token), 404, 'NOT_FOUND', 'a nonexistent agent');
  },
);
