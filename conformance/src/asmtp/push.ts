import { eq, expectStatus, Failure, hasNoKey, ok } from '../assert';
import { refusal } from '../ws';
import { ulid } from '#client';
import { envelope } from '../wire';
import { item } from './item';

/** ASMTP.md §10 items 63–73: the `/connect` WebSocket (§6). */

item(63, 'a WebSocket upgrade to /connect with a valid Authorization: Bearer succeeds (101)', async (t) => {
  const { alice, bob } = await t.agents('alice', 'bob');
  const socket = await t.listen(bob);
  ok(socket.open, 'the socket is not open');
  const sent = await t.sent(alice, envelope(bob.handle));
  await socket.notifyOf(sent.id, t.options.frameTimeoutMs);
  ok(socket.open, 'the socket closed after a frame');
});

item(64, 'a WebSocket upgrade with a valid ?token= and no header succeeds', async (t) => {
  const { alice, bob } = await t.agents('alice', 'bob');
  const socket = await t.listen(bob, { tokenInQuery: true });
  const sent = await t.sent(alice, envelope(bob.handle));
  await socket.notifyOf(sent.id, t.options.frameTimeoutMs);
});

item(
  65,
  'a WebSocket upgrade without a bearer, or with an unknown one, is refused with HTTP 401 before the upgrade',
  async (t) => {
    const bob = await t.agent('bob');
    const unknown = `unknown-${ulid()}`;
    for (const [label, options] of [
      ['no bearer', {}],
      ['unknown header bearer', { token: unknown }],
      ['unknown ?token=', { token: unknown, tokenInQuery: true }],
      ['empty ?token=', { query: { token: '' } }],
      // §6.1: when both are present the header wins.
      ['unknown header bearer with a valid ?token=', { token: unknown, query: { token: bob.token } }],
    ] as const) {
      const refused = await refusal(t.options.url, options, label);
      eq(refused.status, 401, `${label}: status`);
      eq(refused.body?.error?.code, 'UNAUTHORIZED', `${label}: error code`);
    }
  },
);

item(
  66,
  'after POST /messages every open socket of every recipient receives exactly one envelope.notify for it',
  async (t) => {
    const { alice, bob, carol } = await t.agents('alice', 'bob', 'carol');
    const sockets = [
      await t.connect(bob, {}, 'bob#1'),
      await t.connect(bob, {}, 'bob#2'),
      await t.connect(carol, {}, 'carol'),
    ];
    await t.quiet(t.options.wsSettleMs);
    const sent = await t.sent(alice, envelope(bob.handle, { cc: [carol.handle, bob.handle] }));
    for (const socket of sockets) await socket.notifyOf(sent.id, t.options.frameTimeoutMs);
    await t.quiet();
    for (const socket of sockets) eq(socket.notifiesFor(sent.id).length, 1, `${socket.label}: frames for the envelope`);
  },
);

item(67, 'push frames carry no content_parts, direction, unread, references or monitor', async (t) => {
  const { alice, bob } = await t.agents('alice', 'bob');
  const socket = await t.listen(bob);
  const parent = ulid();
  const sent = await t.sent(
    alice,
    envelope(bob.handle, {
      subject: 's',
      in_reply_to: parent,
      references: [parent],
      monitor: 'mon_cf67',
      content_parts: [{ type: 'text', text: 'secret body text' }],
    }),
  );
  await socket.notifyOf(sent.id, t.options.frameTimeoutMs);
  const frame = socket.notifiesFor(sent.id)[0];
  for (const key of ['content_parts', 'direction', 'unread', 'references', 'monitor', 'received_ms'])
    hasNoKey(frame, key, 'the push frame');
  const raw = socket.raw.find((text) => text.includes(sent.id))!;
  ok(!raw.includes('secret body text'), 'the push frame carries body text');
  eq(frame.in_reply_to, parent, 'in_reply_to');
});

item(
  68,
  'a push frame’s created_at equals the created_at of the same envelope in GET /mailbox and in the 202',
  async (t) => {
    const { alice, bob } = await t.agents('alice', 'bob');
    const socket = await t.listen(bob);
    const accepted = [await t.sent(alice, envelope(bob.handle)), await t.sent(alice, envelope(bob.handle))];
    const listed = (await t.http.get('/mailbox', bob.token)).body.envelope_headers as Array<{
      id: string;
      created_at: number;
    }>;
    for (const one of accepted) {
      const frame = await socket.notifyOf(one.id, t.options.frameTimeoutMs);
      eq(frame.created_at, one.created_at, 'frame vs 202 created_at');
      eq(listed.find((h) => h.id === one.id)?.created_at, one.created_at, 'GET /mailbox vs 202 created_at');
    }
    // The listing row and the frame are the same header.
    eq(
      socket.notifiesFor(accepted[0].id)[0],
      listed.find((h) => h.id === accepted[0].id),
      'frame vs listing row',
    );
  },
);

item(69, 'the sender receives no envelope.notify for a send that does not include itself', async (t) => {
  const { alice, bob } = await t.agents('alice', 'bob');
  const senderSocket = await t.listen(alice, {}, 'alice');
  const recipientSocket = await t.listen(bob, {}, 'bob');
  const sent = await t.sent(alice, envelope(bob.handle));
  await recipientSocket.notifyOf(sent.id, t.options.frameTimeoutMs);
  await t.quiet();
  eq(senderSocket.notifies.length, 0, 'envelope.notify frames on the sender’s socket');
});

item(70, 'messages sent by the client over the socket are ignored and do not close it', async (t) => {
  const { alice, bob } = await t.agents('alice', 'bob');
  const socket = await t.listen(bob);
  for (const data of [
    'hello',
    '{"op":"subscribe","cursor":null}',
    '{"op":"envelope.ack","id":"x"}',
    Buffer.from([0, 1, 2, 255]),
  ])
    socket.send(data);
  await t.quiet();
  ok(socket.open, `the socket closed after client frames (code ${socket.closeCode})`);
  eq(socket.frames.length, 0, 'frames in answer to client messages');
  const sent = await t.sent(alice, envelope(bob.handle));
  await socket.notifyOf(sent.id, t.options.frameTimeoutMs);
});

item(
  71,
  'envelopes accepted while a recipient is disconnected are not replayed on reconnect but are returned by GET /mailbox after the saved cursor',
  async (t) => {
    const { alice, bob } = await t.agents('alice', 'bob');
    const first = await t.listen(bob, {}, 'bob before');
    const seen = await t.sent(alice, envelope(bob.handle));
    const frame = await first.notifyOf(seen.id, t.options.frameTimeoutMs);
    const cursor = { created_at: frame.created_at as number, envelope_id: frame.id as string };
    first.terminate();
    await t.quiet(200);
    const missed = [await t.sent(alice, envelope(bob.handle)), await t.sent(alice, envelope(bob.handle))];
    const second = await t.listen(bob, {}, 'bob after');
    await t.quiet();
    eq(second.notifies.length, 0, 'frames replayed on a plain reconnect');
    const after = await t.http.get(
      `/mailbox?after_created_at=${cursor.created_at}&after_envelope_id=${cursor.envelope_id}`,
      bob.token,
    );
    expectStatus(after, 200);
    eq(
      after.body.envelope_headers.map((h: { id: string }) => h.id),
      missed.map((m) => m.id),
      'GET /mailbox after the saved cursor',
    );
    eq(after.body.next_cursor, null, 'next_cursor');
  },
);

item(
  72,
  'a send with monitor "mon_x" delivers one monitor.fact (stored, recipient_handle, envelope_id, at_ms) per recipient to the sender’s sockets',
  async (t) => {
    const { alice, bob, carol } = await t.agents('alice', 'bob', 'carol');
    const senderSockets = [await t.connect(alice, {}, 'alice#1'), await t.connect(alice, {}, 'alice#2')];
    await t.quiet(t.options.wsSettleMs);
    const sent = await t.sent(alice, envelope(bob.handle, { cc: [carol.handle], monitor: 'mon_x' }));
    for (const socket of senderSockets) {
      await socket.until(
        () => socket.facts.filter((f) => f.envelope_id === sent.id).length >= 2,
        t.options.frameTimeoutMs,
        'two monitor facts',
      );
    }
    await t.quiet();
    for (const socket of senderSockets) {
      const facts = socket.facts.filter((f) => f.envelope_id === sent.id);
      eq(
        facts.map((f) => f.recipient_handle).sort(),
        [bob.handle, carol.handle].sort(),
        `${socket.label}: one fact per recipient`,
      );
      for (const fact of facts) {
        eq([fact.monitor, fact.fact], ['mon_x', 'stored'], `${socket.label}: monitor and fact`);
        ok(typeof fact.at_ms === 'number', 'at_ms is a number');
      }
      eq(socket.notifies.length, 0, `${socket.label}: envelope.notify on the sender`);
    }
  },
);

item(73, 'an idempotent replay produces no push frames and no monitor facts', async (t) => {
  const { alice, bob } = await t.agents('alice', 'bob');
  const senderSocket = await t.listen(alice, {}, 'alice');
  const recipientSocket = await t.listen(bob, {}, 'bob');
  const raw = JSON.stringify(envelope(bob.handle, { monitor: 'mon_cf73' }));
  const id = JSON.parse(raw).id as string;
  expectStatus(await t.http.request('POST', '/messages', { token: alice.token, body: raw }), 202);
  await recipientSocket.notifyOf(id, t.options.frameTimeoutMs);
  await senderSocket.until(() => senderSocket.facts.length >= 1, t.options.frameTimeoutMs, 'the monitor fact');
  await t.quiet(300);
  expectStatus(await t.http.request('POST', '/messages', { token: alice.token, body: raw }), 202, 'the replay');
  await t.quiet();
  eq(recipientSocket.notifiesFor(id).length, 1, 'envelope.notify frames after the replay');
  if (senderSocket.facts.length !== 1)
    throw new Failure(`monitor facts after the replay: expected 1, got ${senderSocket.facts.length}`);
});
