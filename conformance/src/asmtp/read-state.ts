import { eq, expectError, expectStatus, ok } from '../assert';
import { ulid } from '#client';
import { envelope } from '../wire';
import { read, unread } from './helpers';
import { item } from './item';

/** ASMTP.md §10 items 56–62: read state (§5). */

item(56, 'a new mailbox entry is unread: it appears under unread=true', async (t) => {
  const { alice, bob } = await t.agents('alice', 'bob');
  const sent = await t.sent(alice, envelope(bob.handle));
  eq(await unread(t, bob), [sent.id], 'unread=true');
  eq(await read(t, bob), [], 'unread=false');
});

item(
  57,
  'GET /messages/{id} marks it read: it disappears from unread=true and appears under unread=false',
  async (t) => {
    const { alice, bob } = await t.agents('alice', 'bob');
    const [a, b] = [await t.sent(alice, envelope(bob.handle)), await t.sent(alice, envelope(bob.handle))];
    expectStatus(await t.http.get(`/messages/${a.id}`, bob.token), 200);
    eq(await unread(t, bob), [b.id], 'unread=true');
    eq(await read(t, bob), [a.id], 'unread=false');
    // A failed fetch marks nothing.
    expectStatus(await t.http.get(`/messages/${ulid()}`, bob.token), 404);
    eq(await unread(t, bob), [b.id], 'unread=true after a 404');
  },
);

item(58, 'batch GET /messages?ids= marks every returned envelope read', async (t) => {
  const { alice, bob } = await t.agents('alice', 'bob');
  const [a, b, c] = [
    await t.sent(alice, envelope(bob.handle)),
    await t.sent(alice, envelope(bob.handle)),
    await t.sent(alice, envelope(bob.handle)),
  ];
  const reply = await t.http.get(`/messages?ids=${c.id},${a.id}`, bob.token);
  expectStatus(reply, 200);
  eq(reply.body.envelopes.length, 2, 'returned envelopes');
  eq(await unread(t, bob), [b.id], 'unread=true');
  eq(await read(t, bob), [a.id, c.id], 'unread=false');
});

item(
  59,
  'POST /mailbox/read returns 200 {read:[…]} containing owned ids that were unread, never ids outside the caller’s mailbox',
  async (t) => {
    const { alice, bob, carol } = await t.agents('alice', 'bob', 'carol');
    const [a, b] = [await t.sent(alice, envelope(bob.handle)), await t.sent(alice, envelope(bob.handle))];
    const foreign = await t.sent(alice, envelope(carol.handle));
    const unknown = ulid();
    const reply = await t.http.post('/mailbox/read', { ids: [a.id, foreign.id, unknown, b.id] }, bob.token);
    expectStatus(reply, 200);
    ok(Array.isArray(reply.body.read), '`read` is an array');
    for (const id of [a.id, b.id]) ok(reply.body.read.includes(id), `read lacks the newly read ${id}`);
    for (const id of [foreign.id, unknown])
      ok(!reply.body.read.includes(id), `read lists ${id}, which is not in the caller’s mailbox`);
    eq(await unread(t, bob), [], 'bob’s unread entries');
    eq(await unread(t, carol), [foreign.id], 'carol’s entry is untouched');
  },
);

item(
  60,
  'POST /mailbox/read with ids [] returns 400 INVALID_REQUEST; with a malformed id returns 400 INVALID_ENVELOPE_ID',
  async (t) => {
    const { alice, bob } = await t.agents('alice', 'bob');
    const sent = await t.sent(alice, envelope(bob.handle));
    expectError(await t.http.post('/mailbox/read', { ids: [] }, bob.token), 400, 'INVALID_REQUEST', 'ids []');
    expectError(await t.http.post('/mailbox/read', {}, bob.token), 400, 'INVALID_REQUEST', 'no ids');
    expectError(
      await t.http.post('/mailbox/read', { ids: [sent.id, 'nope'] }, bob.token),
      400,
      'INVALID_ENVELOPE_ID',
      'a malformed id',
    );
    eq(await unread(t, bob), [sent.id], 'nothing was marked by the refused requests');
  },
);

item(61, 'read state is per recipient: B reading does not change C’s unread state for the same envelope', async (t) => {
  const { alice, bob, carol } = await t.agents('alice', 'bob', 'carol');
  const [a, b, c] = [
    await t.sent(alice, envelope([bob.handle, carol.handle])),
    await t.sent(alice, envelope([bob.handle, carol.handle])),
    await t.sent(alice, envelope([bob.handle, carol.handle])),
  ];
  expectStatus(await t.http.get(`/messages/${a.id}`, bob.token), 200);
  expectStatus(await t.http.get(`/messages?ids=${b.id}`, bob.token), 200);
  expectStatus(await t.http.post('/mailbox/read', { ids: [c.id] }, bob.token), 200);
  eq(await unread(t, bob), [], 'bob’s unread');
  eq(await unread(t, carol), [a.id, b.id, c.id], 'carol’s unread');
});

item(62, 'GET /mailbox never changes read state', async (t) => {
  const { alice, bob } = await t.agents('alice', 'bob');
  const [a, b] = [await t.sent(alice, envelope(bob.handle)), await t.sent(alice, envelope(bob.handle))];
  for (const query of [
    '',
    '?unread=true',
    '?order=desc&limit=1',
    '?unread=false',
    `?after_created_at=0&after_envelope_id=01${'0'.repeat(24)}`,
  ]) {
    expectStatus(await t.http.get(`/mailbox${query}`, bob.token), 200, query);
  }
  eq(await unread(t, bob), [a.id, b.id], 'still unread');
});
