import { caps } from '../caps';
import { eq, expectError, expectStatus, ok } from '../assert';
import type { Agent, T } from '../runner';
import { compareKeys, randomName } from '../util';
import { envelope } from '../wire';
import { allow } from './helpers';
import { item } from './item';

/** ASMTP.md §10 items 92–93: discovery search and message search (§3.9). */

async function searchAll(t: T, caller: Agent, q: string): Promise<string[]> {
  const handles: string[] = [];
  let cursor: string | null = null;
  for (let pages = 0; pages < 20; pages++) {
    const reply: any = await t.http.get(
      `/search/agents?q=${encodeURIComponent(q)}&limit=50${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      caller.token,
    );
    expectStatus(reply, 200, `search q=${q}`);
    handles.push(...reply.body.agents.map((a: { canonical_handle: string }) => a.canonical_handle));
    cursor = reply.body.next_cursor;
    if (cursor === null) break;
  }
  return handles;
}

item(
  92,
  'GET /search/agents?q=a returns 400 INVALID_QUERY; valid queries return {agents, next_cursor} and never include invisible private agents',
  async (t) => {
    await t.need(caps.searchAgents(t.run));
    const caller = await t.agent('caller');
    expectError(await t.http.get('/search/agents?q=a', caller.token), 400, 'INVALID_QUERY', 'q=a');
    expectError(await t.http.get('/search/agents', caller.token), 400, 'INVALID_QUERY', 'no q');
    expectError(
      await t.http.get(`/search/agents?q=${'x'.repeat(101)}`, caller.token),
      400,
      'INVALID_QUERY',
      'q of 101 chars',
    );
    await t.agent('hidden');
    await t.agent('shown', { fields: { visibility: 'public' } });
    const friend = await t.agent('friend');
    if ((await caps.allowlist(t.run)) === null) await allow(t, friend, [caller.handle]);
    const o = t.owner();
    const found = await searchAll(t, caller, o);
    ok(
      found.every((h) => h.startsWith(`@${o}.`)),
      `results outside the query: ${found.join(', ')}`,
    );
    ok(!found.includes(`@${o}.hidden`), 'a private agent that does not allowlist the caller was listed');
    ok(found.includes(`@${o}.shown`), 'a public agent was not found');
    ok(found.includes(caller.handle), 'the caller itself was not found');
    if ((await caps.allowlist(t.run)) === null)
      ok(found.includes(friend.handle), 'a private agent allowlisting the caller was not found');
    const empty = await t.http.get(`/search/agents?q=${t.run.prefix}zz${randomName(6)}`, caller.token);
    expectStatus(empty, 200, 'a search without results');
    eq(empty.body, { agents: [], next_cursor: null }, 'an empty result');
  },
);

item(
  93,
  'GET /search/messages?q=… returns only envelopes the caller received, newest first, capped at limit',
  async (t) => {
    await t.need(caps.searchMessages(t.run));
    const { alice, bob, carol } = await t.agents('alice', 'bob', 'carol');
    const word = `zq${randomName(10, 'abcdefghijklmnopqrstuvwxyz')}`;
    const received = [];
    for (let i = 0; i < 3; i++)
      received.push(await t.sent(alice, envelope(bob.handle, { subject: `about ${word} number ${i}` })));
    const other = await t.sent(
      alice,
      envelope(carol.handle, {
        subject: `${word} for carol`,
        content_parts: [{ type: 'text', text: `${word} only carol` }],
      }),
    );
    expectError(await t.http.get('/search/messages?q=a', bob.token), 400, 'INVALID_QUERY', 'q=a');
    const reply = await t.http.get(`/search/messages?q=${word}`, bob.token);
    expectStatus(reply, 200);
    const ids: string[] = reply.body.envelopes.map((e: { envelope_id: string }) => e.envelope_id);
    ok(!ids.includes(other.id), 'an envelope the caller did not receive was listed');
    eq(
      ids,
      [...received]
        .sort(compareKeys)
        .reverse()
        .map((r) => r.id),
      'received envelopes, newest first',
    );
    const first = reply.body.envelopes[0];
    eq(
      [first.sender_handle, first.recipient_handles, first.subject],
      [alice.handle, [bob.handle], `about ${word} number 2`],
      'the newest hit',
    );
    const capped = await t.http.get(`/search/messages?q=${word}&limit=2`, bob.token);
    expectStatus(capped, 200);
    eq(
      capped.body.envelopes.map((e: { envelope_id: string }) => e.envelope_id),
      ids.slice(0, 2),
      'limit=2',
    );
    // Searching never marks anything read.
    eq((await t.http.get('/mailbox?unread=true', bob.token)).body.envelope_headers.length, 3, 'unread after searching');
  },
);
