import { envelope, startOperator, type TestOperator } from '../../support/operator';

interface Accepted {
  id: string;
  created_at: number;
}

/** Newest first by `(created_at, id)`, as /search/messages orders. */
const newestFirst = (a: Accepted, b: Accepted): number =>
  b.created_at - a.created_at || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0);

/**
 * ASMTP.md §10 items 92–93: agent search under the visibility rule (§1.8, §3.9) and message
 * search, which Roost runs as Postgres full-text over envelopes the caller sent or received
 * (EXTENSIONS.md), never other agents' envelopes.
 */
describe('search', () => {
  let op: TestOperator;
  let owners = 0;

  beforeAll(async () => {
    op = await startOperator();
  });
  afterAll(async () => op?.close());

  const owner = () => `srch${++owners}`;

  async function agent(
    handle: string,
    fields: Record<string, unknown> = {},
  ): Promise<{ handle: string; token: string }> {
    return { handle, token: await op.agent(handle, fields) };
  }

  async function send(token: string, to: string | string[], fields: Record<string, unknown> = {}): Promise<Accepted> {
    const reply = await op.client.post('/messages', envelope(to, fields), token);
    expect(reply.status).toBe(202);
    return reply.body;
  }

  async function expectQueryError(path: string, token: string): Promise<void> {
    const reply = await op.client.get(path, token);
    expect({ path, status: reply.status, code: reply.body?.error?.code }).toEqual({
      path,
      status: 400,
      code: 'INVALID_QUERY',
    });
  }

  const handlesOf = (reply: { body: any }): string[] =>
    reply.body.agents.map((a: { canonical_handle: string }) => a.canonical_handle);

  describe('agents', () => {
    it('#92 GET /search/agents?q=a returns 400 INVALID_QUERY, as do other bad q, limit and cursor values', async () => {
      const me = await agent(`@${owner()}.me`);
      for (const route of ['/search/agents', '/search', '/search/messages']) {
        for (const query of [
          'q=a',
          '',
          'q=',
          `q=${'x'.repeat(101)}`,
          'q=ab&limit=0',
          'q=ab&limit=01',
          'q=ab&limit=x',
        ]) {
          await expectQueryError(`${route}?${query}`, me.token);
        }
        await expectQueryError(`${route}?q=ab&limit=51`, me.token);
        expect((await op.client.get(`${route}?q=ab&limit=50`, me.token)).status).toBe(200);
        expect((await op.client.get(`${route}?q=${'x'.repeat(100)}`, me.token)).status).toBe(200);
      }
      await expectQueryError(`/search/agents?q=ab&cursor=${'A'.repeat(201)}`, me.token);
      expect((await op.client.get(`/search/agents?q=ab&cursor=${'A'.repeat(200)}`, me.token)).status).toBe(200);
    });

    it('#92 valid agent searches return {agents, next_cursor} and never include invisible private agents', async () => {
      const o = owner();
      const caller = await agent(`@${o}.caller`);
      const pubA = await agent(`@${o}.pub-a`, { visibility: 'public', display_name: 'Public A' });
      const pubB = await agent(`@${o}.pub-b`, { visibility: 'public' });
      const hidden = await agent(`@${o}.hidden`, { display_name: 'Hidden' });
      const friend = await agent(`@${o}.friend`);
      const named = await agent(`@other${o}.x`, {
        visibility: 'public',
        display_name: `Found By ${o.toUpperCase()} Name`,
      });
      await op.client.post('/agents/me/allowlist', { entries: [caller.handle] }, friend.token);
      // One-directional: the caller listing the hidden agent does not make it visible to the caller.
      await op.client.post('/agents/me/allowlist', { entries: [hidden.handle] }, caller.token);
      const visible = [caller, friend, pubA, pubB, named].map((a) => a.handle).sort();

      const reply = await op.client.get(`/search/agents?q=${o}`, caller.token);
      expect(reply.status).toBe(200);
      expect(reply.body.next_cursor).toBeNull();
      expect(handlesOf(reply)).toEqual(visible);
      expect(reply.body.agents.find((a: { id: string }) => a.id === pubA.handle)).toEqual({
        type: 'agent',
        id: pubA.handle,
        canonical_handle: pubA.handle,
        display_name: 'Public A',
        image_url: null,
      });
      // ASCII case-insensitive, on the handle or the display name.
      expect(handlesOf(await op.client.get(`/search/agents?q=${o.toUpperCase()}`, caller.token))).toEqual(visible);
      expect(
        handlesOf(await op.client.get(`/search/agents?q=${encodeURIComponent(`by ${o} na`)}`, caller.token)),
      ).toEqual([named.handle]);
      // LIKE wildcards are literal.
      expect(handlesOf(await op.client.get('/search/agents?q=%25%25', caller.token))).toEqual([]);

      // Another caller sees a different set: itself, the hidden agent never, the friend only when listed.
      const stranger = await agent(`@x${o}.stranger`);
      expect(handlesOf(await op.client.get(`/search/agents?q=${o}`, stranger.token))).toEqual(
        [named.handle, pubA.handle, pubB.handle, stranger.handle].sort(),
      );
      // The hidden agent, in turn, sees the caller that lists it.
      expect(handlesOf(await op.client.get(`/search/agents?q=${o}`, hidden.token))).toEqual(
        [hidden.handle, caller.handle, pubA.handle, pubB.handle, named.handle].sort(),
      );

      const everything = await op.client.get(`/search?q=${o}`, caller.token);
      expect(everything.status).toBe(200);
      expect(everything.body.people).toEqual([]);
      expect(everything.body.organizations).toEqual([]);
      expect(handlesOf(everything)).toEqual(visible);
      expect(handlesOf(await op.client.get(`/search?q=${o}&limit=2`, caller.token))).toEqual(visible.slice(0, 2));
    });

    it('#92 paging with next_cursor covers every visible match once; the cursor never names a hidden agent', async () => {
      const o = owner();
      const caller = await agent(`@${o}.caller`);
      const names = ['a1', 'a2', 'b1', 'b2', 'c1', 'c2', 'd1'];
      const made = [];
      for (const name of names)
        made.push(await agent(`@${o}.${name}`, { visibility: name.endsWith('1') ? 'public' : 'private' }));
      const visible = [caller, ...made.filter((a) => a.handle.endsWith('1'))].map((a) => a.handle).sort();

      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const query: string = `/search/agents?q=${o}&limit=2${cursor ? `&cursor=${cursor}` : ''}`;
        const reply = await op.client.get(query, caller.token);
        expect(reply.status).toBe(200);
        const page = handlesOf(reply);
        seen.push(...page);
        cursor = reply.body.next_cursor;
        if (cursor !== null) {
          // A page with a cursor is full, and the cursor stands for its last (visible) agent: a
          // cursor naming a hidden candidate would reveal that the hidden agent exists.
          expect(page).toHaveLength(2);
          expect(Buffer.from(cursor, 'base64url').toString('utf8')).toBe(page[1]);
        }
        expect(++pages).toBeLessThan(20);
      } while (cursor !== null);
      expect(seen).toEqual(visible);
    });

    it('#92 a stranger cannot tell a hidden match from no match: same page, same cursor', async () => {
      const o = owner();
      const caller = await agent(`@${o}x.caller`);
      await agent(`@${o}.hidden`);
      for (const limit of [1, 2, 20]) {
        const hidden = await op.client.get(`/search/agents?q=${o}.hid&limit=${limit}`, caller.token);
        const none = await op.client.get(`/search/agents?q=${o}.zzz&limit=${limit}`, caller.token);
        expect(hidden.text).toBe(none.text);
        expect(hidden.body).toEqual({ agents: [], next_cursor: null });
      }
    });
  });

  describe('messages', () => {
    it('#93 GET /search/messages returns only envelopes the caller received, newest first, capped at limit', async () => {
      const o = owner();
      const [alice, bob, carol, dave] = await Promise.all(
        ['alice', 'bob', 'carol', 'dave'].map((n) => agent(`@${o}.${n}`)),
      );
      const word = `quokka${o}`;
      const received: Accepted[] = [];
      received.push(await send(alice.token, bob.handle, { subject: `about ${word}` }));
      received.push(
        await send(alice.token, bob.handle, { content_parts: [{ type: 'text', text: `the ${word} is here` }] }),
      );
      received.push(
        await send(carol.token, [dave.handle], {
          cc: [bob.handle],
          content_parts: [{ type: 'data', data: { animal: word } }],
        }),
      );
      received.push(await send(alice.token, bob.handle, { subject: word.toUpperCase() }));
      await send(alice.token, bob.handle, { subject: 'unrelated' });
      const notBobs = await send(alice.token, carol.handle, { subject: word });
      await send(dave.token, carol.handle, { subject: word });

      const reply = await op.client.get(`/search/messages?q=${word}`, bob.token);
      expect(reply.status).toBe(200);
      const expected = [...received].sort(newestFirst);
      expect(reply.body.envelopes.map((e: { envelope_id: string }) => e.envelope_id)).toEqual(
        expected.map((a) => a.id),
      );
      expect(reply.body.envelopes.find((e: { envelope_id: string }) => e.envelope_id === received[2].id)).toEqual({
        envelope_id: received[2].id,
        sender_handle: carol.handle,
        recipient_handles: [dave.handle, bob.handle],
        subject: null,
        snippet: null,
        created_at: received[2].created_at,
        date_ms: expect.any(Number),
      });
      expect(reply.body.envelopes.find((e: { envelope_id: string }) => e.envelope_id === received[0].id).subject).toBe(
        `about ${word}`,
      );
      expect(reply.body.envelopes.map((e: { envelope_id: string }) => e.envelope_id)).not.toContain(notBobs.id);

      const capped = await op.client.get(`/search/messages?q=${word}&limit=2`, bob.token);
      expect(capped.body.envelopes.map((e: { envelope_id: string }) => e.envelope_id)).toEqual(
        expected.slice(0, 2).map((a) => a.id),
      );
      expect((await op.client.get(`/search/messages?q=${word}&limit=1`, bob.token)).body.envelopes).toHaveLength(1);

      // Searching is not reading; no hits is an ordinary 200.
      const unread = await op.client.get('/mailbox?unread=true', bob.token);
      expect(unread.body.envelope_headers).toHaveLength(5);
      const none = await op.client.get(`/search/messages?q=nothing${o}`, bob.token);
      expect(none.status).toBe(200);
      expect(none.body).toEqual({ envelopes: [] });
      expect((await op.client.get('/search/messages?q=%21%21', bob.token)).body).toEqual({ envelopes: [] });

      const stranger = await agent(`@${o}.stranger`);
      expect((await op.client.get(`/search/messages?q=${word}`, stranger.token)).body).toEqual({ envelopes: [] });
    });

    it('Roost: /search/messages includes the caller’s sent envelopes and excludes other agents’', async () => {
      const o = owner();
      const [alice, bob, carol] = await Promise.all(['alice', 'bob', 'carol'].map((n) => agent(`@${o}.${n}`)));
      const word = `wombat${o}`;
      const sent = await send(bob.token, carol.handle, { subject: word });
      const self = await send(bob.token, [bob.handle, alice.handle], { content_parts: [{ type: 'text', text: word }] });
      const got = await send(alice.token, bob.handle, { subject: word });
      const others = await send(alice.token, carol.handle, { subject: word });
      const carolsOwn = await send(carol.token, alice.handle, { subject: word });

      const ids = async (token: string) =>
        (await op.client.get(`/search/messages?q=${word}`, token)).body.envelopes.map(
          (e: { envelope_id: string }) => e.envelope_id,
        );
      expect(await ids(bob.token)).toEqual([sent, self, got].sort(newestFirst).map((a) => a.id));
      expect(await ids(carol.token)).toEqual([sent, others, carolsOwn].sort(newestFirst).map((a) => a.id));
      expect(await ids(alice.token)).toEqual([self, got, others, carolsOwn].sort(newestFirst).map((a) => a.id));

      const hit = (await op.client.get(`/search/messages?q=${word}`, bob.token)).body.envelopes.find(
        (e: { envelope_id: string }) => e.envelope_id === sent.id,
      );
      expect(hit).toMatchObject({ sender_handle: bob.handle, recipient_handles: [carol.handle], subject: word });
      // Finding a sent envelope marks nothing read for its recipient.
      expect((await op.client.get('/mailbox?unread=true', carol.token)).body.envelope_headers).toHaveLength(2);
    });
  });
});
