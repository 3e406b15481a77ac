import { eq, expectError, expectStatus, hasNoKey, notEq, ok } from '../assert';
import { item } from './item';

/** ASMTP.md §10 items 9–15: admin provisioning (§1.4). */

const adminPath = (handle: string) => `/_admin/agents/${encodeURIComponent(handle)}`;

item(
  9,
  'POST /_admin/agents {handle} returns 201 with token and defaults policy=allowlist, visibility=private, display_name=handle, allowlist=[]',
  async (t) => {
    const handle = `@${t.owner()}.fresh`;
    const reply = await t.http.post('/_admin/agents', { handle }, t.adminToken);
    expectStatus(reply, 201);
    t.run.agents.set(handle, reply.body.token);
    ok(typeof reply.body.token === 'string' && reply.body.token.length > 0, 'token must be a non-empty string');
    eq(
      { ...reply.body, token: undefined },
      {
        handle,
        token: undefined,
        policy: 'allowlist',
        allowlist: [],
        display_name: handle,
        description: null,
        card_body: null,
        visibility: 'private',
      },
      'the AdminAgent defaults',
    );
    // The token authenticates the new agent.
    expectStatus(await t.http.get('/mailbox', reply.body.token), 200, 'the new token');
    const shown = await t.http.get(adminPath(handle), t.adminToken);
    expectStatus(shown, 200);
    hasNoKey(shown.body, 'token', 'GET /_admin/agents/{h}');
  },
);

item(10, 'POST /_admin/agents with an existing handle returns 409 AGENT_EXISTS', async (t) => {
  const alice = await t.agent('alice');
  expectError(await t.http.post('/_admin/agents', { handle: alice.handle }, t.adminToken), 409, 'AGENT_EXISTS');
  expectStatus(await t.http.get('/mailbox', alice.token), 200, 'the existing token still works');
});

item(11, 'POST /_admin/agents with handle @Bad.x, @a, a.b or @a.b.c returns 400 INVALID_HANDLE', async (t) => {
  const owner = t.owner();
  for (const handle of [`@Bad${owner}.x`, `@${owner}`, `${owner}.b`, `@${owner}.b.c`, `@${owner}.*`]) {
    expectError(await t.http.post('/_admin/agents', { handle }, t.adminToken), 400, 'INVALID_HANDLE', handle);
  }
  expectStatus(await t.http.get(adminPath(`@${owner}.b`), t.adminToken), 404, 'nothing was created');
});

item(12, 'GET /_admin/agents lists agents sorted by handle without token', async (t) => {
  const names = ['zed', 'amy', 'mia'];
  for (const name of names) await t.agent(name);
  const reply = await t.http.get('/_admin/agents', t.adminToken);
  expectStatus(reply, 200);
  const handles: string[] = reply.body.agents.map((a: { handle: string }) => a.handle);
  const sorted = [...handles].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  eq(handles, sorted, 'handles in byte order');
  const ours = handles.filter((h) => h.startsWith(`@${t.owner()}.`));
  eq(ours, names.map((n) => `@${t.owner()}.${n}`).sort(), 'this test’s agents');
  for (const agent of reply.body.agents) hasNoKey(agent, 'token', `listed ${agent.handle}`);
});

item(13, 'POST /_admin/agents/{h}/rotate-token returns a new token; the old token then gets 401', async (t) => {
  const alice = await t.agent('alice');
  const reply = await t.http.post(`${adminPath(alice.handle)}/rotate-token`, undefined, t.adminToken);
  expectStatus(reply, 200);
  eq(reply.body.handle, alice.handle, 'handle');
  ok(typeof reply.body.token === 'string' && reply.body.token.length > 0, 'a new token');
  notEq(reply.body.token, alice.token, 'the new token');
  t.run.agents.set(alice.handle, reply.body.token);
  expectError(await t.http.get('/mailbox', alice.token), 401, 'UNAUTHORIZED', 'the old token');
  expectStatus(await t.http.get('/mailbox', reply.body.token), 200, 'the new token');
});

item(14, 'DELETE /_admin/agents/{h} returns 204; repeating it returns 404', async (t) => {
  const alice = await t.agent('alice');
  const first = await t.http.delete(adminPath(alice.handle), t.adminToken);
  expectStatus(first, 204);
  eq(first.text, '', '204 body');
  expectError(await t.http.delete(adminPath(alice.handle), t.adminToken), 404, 'NOT_FOUND', 'repeated DELETE');
  expectError(await t.http.get('/mailbox', alice.token), 401, 'UNAUTHORIZED', 'the deleted agent’s token');
});

item(
  15,
  'PATCH /_admin/agents/{h} with {"policy":"maybe"} returns 400 INVALID_POLICY and changes nothing',
  async (t) => {
    const alice = await t.agent('alice', { fields: { display_name: 'Alice' } });
    const before = (await t.http.get(adminPath(alice.handle), t.adminToken)).body;
    expectError(await t.http.patch(adminPath(alice.handle), { policy: 'maybe' }, t.adminToken), 400, 'INVALID_POLICY');
    expectError(
      await t.http.patch(adminPath(alice.handle), { display_name: 'Changed', policy: 'maybe' }, t.adminToken),
      400,
      'INVALID_POLICY',
      'with a valid field first',
    );
    const after = await t.http.get(adminPath(alice.handle), t.adminToken);
    eq(after.body, before, 'the agent after the refused PATCHes');
    // Control: a valid PATCH applies.
    const patched = await t.http.patch(adminPath(alice.handle), { policy: 'allowlist' }, t.adminToken);
    expectStatus(patched, 200);
    eq(patched.body.policy, 'allowlist', 'policy after a valid PATCH');
  },
);
