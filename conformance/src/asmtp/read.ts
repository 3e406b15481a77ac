import { eq, expectError, expectStatus, hasNoKey, ok } from '../assert';
import { ulid } from '#client';
import { envelope } from '../wire';
import { item } from './item';

/** ASMTP.md §10 items 39–44: reading stored envelopes, single and batch. */

item(
  39,
  'GET /messages/{id} by a recipient returns 200 with id, from (stamped), to, date_ms, content_parts, and optional fields only when given',
  async (t) => {
    const { alice, bob, carol } = await t.agents('alice', 'bob', 'carol');
    const minimal = envelope(bob.handle, { date_ms: 1_747_000_000_000, subject: null, monitor: null, references: [] });
    expectStatus(await t.send(alice, minimal), 202);
    const plain = await t.http.get(`/messages/${minimal.id}`, bob.token);
    expectStatus(plain, 200);
    eq(
      plain.body,
      {
        id: minimal.id,
        from: alice.handle,
        to: [bob.handle],
        date_ms: 1_747_000_000_000,
        content_parts: [{ type: 'text', text: 'hello' }],
      },
      'a minimal envelope (null optionals count as absent)',
    );

    const [a, b] = [ulid(), ulid()];
    const parts = [
      { type: 'text', text: 'full' },
      { type: 'data', data: { k: [1, { x: null }] }, schema: 'example/v1' },
      { type: 'image', url: 'https://example.com/p.png', mime_type: 'image/png' },
    ];
    const full = envelope(bob.handle, {
      cc: [carol.handle],
      subject: '',
      in_reply_to: b,
      references: [a, b],
      monitor: 'mon_cf39',
      content_parts: parts,
      x_unknown: 1,
    });
    expectStatus(await t.send(alice, full), 202);
    const fetched = await t.http.get(`/messages/${full.id}`, carol.token);
    expectStatus(fetched, 200);
    eq(
      fetched.body,
      {
        id: full.id,
        from: alice.handle,
        to: [bob.handle],
        date_ms: full.date_ms,
        content_parts: parts,
        cc: [carol.handle],
        subject: '',
        in_reply_to: b,
        references: [a, b],
        monitor: 'mon_cf39',
      },
      'a full envelope (unknown fields dropped)',
    );
  },
);

item(40, 'GET /messages/{id} bodies contain no created_at, received_ms, type_hint, size_hint or file_id', async (t) => {
  const { alice, bob } = await t.agents('alice', 'bob');
  const body = envelope(bob.handle, {
    subject: 's',
    content_parts: [
      { type: 'text', text: 'x' },
      { type: 'file', url: 'https://example.com/a.pdf', name: 'a.pdf' },
    ],
  });
  expectStatus(await t.send(alice, body), 202);
  const fetched = await t.http.get(`/messages/${body.id}`, bob.token);
  expectStatus(fetched, 200);
  for (const key of ['created_at', 'received_ms', 'type_hint', 'size_hint', 'file_id'])
    hasNoKey(fetched.body, key, 'stored body');
  for (const part of fetched.body.content_parts) hasNoKey(part, 'file_id', 'stored part');
  ok(!fetched.text.includes('"file_id"'), 'the stored body mentions file_id');
});

item(
  41,
  'GET /messages/{id} by a non-recipient returns 404 NOT_FOUND; a malformed id returns 400 INVALID_ENVELOPE_ID',
  async (t) => {
    const { alice, bob, carol } = await t.agents('alice', 'bob', 'carol');
    const body = envelope(bob.handle);
    expectStatus(await t.send(alice, body), 202);
    const stranger = await t.http.get(`/messages/${body.id}`, carol.token);
    expectError(stranger, 404, 'NOT_FOUND', 'a non-party');
    const unknown = await t.http.get(`/messages/${ulid()}`, carol.token);
    expectError(unknown, 404, 'NOT_FOUND', 'an unknown id');
    eq(stranger.body, unknown.body, 'non-party and unknown-id bodies');
    for (const bad of [(body.id as string).toLowerCase(), 'nope', `${body.id}0`]) {
      expectError(await t.http.get(`/messages/${bad}`, bob.token), 400, 'INVALID_ENVELOPE_ID', bad);
    }
  },
);

item(
  42,
  'GET /messages?ids=B,A returns envelopes in order B, A; duplicates collapsed; unentitled ids omitted with 200',
  async (t) => {
    const { alice, bob, carol } = await t.agents('alice', 'bob', 'carol');
    const a = envelope(bob.handle, { subject: 'A' });
    const b = envelope(bob.handle, { subject: 'B' });
    const other = envelope(carol.handle, { subject: 'not for bob' });
    for (const body of [a, b, other]) expectStatus(await t.send(alice, body), 202);
    const reply = await t.http.get(`/messages?ids=${b.id},${a.id},${b.id},${other.id},${ulid()}`, bob.token);
    expectStatus(reply, 200);
    eq(
      reply.body.envelopes.map((e: { id: string }) => e.id),
      [b.id, a.id],
      'envelope ids',
    );
    eq(reply.body.envelopes[0].subject, 'B', 'first envelope');
    const none = await t.http.get(`/messages?ids=${other.id}`, bob.token);
    expectStatus(none, 200);
    eq(none.body, { envelopes: [] }, 'only unentitled ids');
  },
);

item(43, 'GET /messages without ids, with two ids params, or with 101 ids returns 400 INVALID_QUERY', async (t) => {
  const { alice, bob } = await t.agents('alice', 'bob');
  const body = envelope(bob.handle);
  expectStatus(await t.send(alice, body), 202);
  expectError(await t.http.get('/messages', bob.token), 400, 'INVALID_QUERY', 'no ids');
  expectError(await t.http.get('/messages?ids=', bob.token), 400, 'INVALID_QUERY', 'empty ids');
  expectError(
    await t.http.get(`/messages?ids=${body.id}&ids=${body.id}`, bob.token),
    400,
    'INVALID_QUERY',
    'two ids params',
  );
  const many = Array.from({ length: 101 }, () => body.id).join(',');
  expectError(
    await t.http.get(`/messages?ids=${many}`, bob.token),
    400,
    'INVALID_QUERY',
    '101 ids (counted before de-duplication)',
  );
  const hundred = Array.from({ length: 100 }, () => body.id).join(',');
  expectStatus(await t.http.get(`/messages?ids=${hundred}`, bob.token), 200, '100 ids');
});

item(44, 'GET /messages?ids=A,,B returns 400 INVALID_ENVELOPE_ID', async (t) => {
  const { alice, bob } = await t.agents('alice', 'bob');
  const [a, b] = [envelope(bob.handle), envelope(bob.handle)];
  for (const body of [a, b]) expectStatus(await t.send(alice, body), 202);
  expectError(await t.http.get(`/messages?ids=${a.id},,${b.id}`, bob.token), 400, 'INVALID_ENVELOPE_ID', 'A,,B');
  expectError(await t.http.get(`/messages?ids=${a.id},`, bob.token), 400, 'INVALID_ENVELOPE_ID', 'trailing comma');
  const unread = await t.http.get('/mailbox?unread=true', bob.token);
  eq(unread.body.envelope_headers.length, 2, 'nothing was marked read by the refused fetches');
});
