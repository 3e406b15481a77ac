import { caps } from '../caps';
import { eq, expectError, expectStatus, ok } from '../assert';
import { test, type T } from '../runner';
import { setTimeout as sleep } from 'node:timers/promises';
import { randomName } from '../util';
import { connect, type Socket } from '../ws';
import { envelope } from '../wire';
import { inbox, unread } from '../asmtp/helpers';

/** EXTENSIONS.md, the quirk table: the side Roost takes on each ASMTP.md §9.2 ambiguity. */

export const roost = (id: string, title: string, run: (t: T) => Promise<void>, options: { exclusive?: boolean } = {}) =>
  test('roost', `roost.${id}`, title, run, options);

roost(
  'quirk.replay-timestamps',
  'an idempotent replay returns the original received_ms and created_at (§9.2.1)',
  async (t) => {
    const { alice, bob } = await t.agents('alice', 'bob');
    const raw = JSON.stringify(envelope(bob.handle));
    const first = await t.http.request('POST', '/messages', { token: alice.token, body: raw });
    expectStatus(first, 202);
    await sleep(25);
    const again = await t.http.request('POST', '/messages', { token: alice.token, body: raw });
    expectStatus(again, 202);
    eq(again.body, first.body, 'the replayed 202');
  },
);

roost(
  'quirk.read-transitions',
  'POST /mailbox/read lists only ids that went from unread to read, each once (§9.2.2)',
  async (t) => {
    const { alice, bob } = await t.agents('alice', 'bob');
    const [a, b] = [await t.sent(alice, envelope(bob.handle)), await t.sent(alice, envelope(bob.handle))];
    expectStatus(await t.http.get(`/messages/${b.id}`, bob.token), 200);
    const reply = await t.http.post('/mailbox/read', { ids: [a.id, a.id, b.id] }, bob.token);
    expectStatus(reply, 200);
    eq(reply.body, { read: [a.id] }, 'read (b was already read, a listed once)');
    eq((await t.http.post('/mailbox/read', { ids: [a.id] }, bob.token)).body, { read: [] }, 'marking it again');
  },
);

roost(
  'quirk.sender-fetch',
  'the sender may GET /messages/{id} (single and batch) for envelopes it sent; this marks nothing read (§9.2.3)',
  async (t) => {
    const { alice, bob } = await t.agents('alice', 'bob');
    const body = envelope(bob.handle, { subject: 'mine' });
    expectStatus(await t.send(alice, body), 202);
    const single = await t.http.get(`/messages/${body.id}`, alice.token);
    expectStatus(single, 200, 'the sender’s single fetch');
    eq([single.body.id, single.body.from, single.body.subject], [body.id, alice.handle, 'mine'], 'the body');
    const batch = await t.http.get(`/messages?ids=${body.id}`, alice.token);
    eq(
      batch.body.envelopes.map((e: { id: string }) => e.id),
      [body.id],
      'the sender’s batch fetch',
    );
    eq(await unread(t, bob), [body.id], 'the recipient’s entry is still unread');
    // A self-addressed envelope: the sender's fetch marks its own entry only.
    const self = await t.sent(alice, envelope([alice.handle, bob.handle]));
    expectStatus(await t.http.get(`/messages/${self.id}`, alice.token), 200);
    eq(await unread(t, alice), [], 'the sender’s own entry');
    eq(await unread(t, bob), [body.id, self.id], 'the other recipient’s entries');
  },
);

roost('quirk.payload-413', 'a JSON body over 1 MiB gets a real 413 PAYLOAD_TOO_LARGE (§9.2.7, §7)', async (t) => {
  const { alice, bob } = await t.agents('alice', 'bob');
  const big = envelope(bob.handle, { content_parts: [{ type: 'text', text: 'x'.repeat(1024 * 1024 + 16) }] });
  expectError(await t.send(alice, big), 413, 'PAYLOAD_TOO_LARGE', 'POST /messages');
  expectError(
    await t.http.post('/mailbox/read', { ids: [], pad: 'x'.repeat(2 * 1024 * 1024) }, bob.token),
    413,
    'PAYLOAD_TOO_LARGE',
    'POST /mailbox/read',
  );
  eq(await inbox(t, bob), [], 'nothing stored');
});

roost(
  'quirk.created-at-strict',
  'created_at is strictly increasing per mailbox, even for concurrent sends (§9.2.10)',
  async (t) => {
    const { alice, bob, carol, dave } = await t.agents('alice', 'bob', 'carol', 'dave');
    const senders = [alice, bob, carol];
    const accepted = await Promise.all(
      Array.from({ length: 30 }, (_, i) => t.sent(senders[i % 3], envelope(dave.handle))),
    );
    const rows = (await t.http.get('/mailbox?limit=1000', dave.token)).body.envelope_headers as Array<{
      id: string;
      created_at: number;
    }>;
    eq(rows.length, 30, 'dave’s entries');
    for (let i = 1; i < rows.length; i++)
      ok(
        rows[i].created_at > rows[i - 1].created_at,
        `created_at not strictly increasing at row ${i}: ${rows[i - 1].created_at} then ${rows[i].created_at}`,
      );
    const byId = new Map(accepted.map((a) => [a.id, a.created_at]));
    for (const row of rows) eq(row.created_at, byId.get(row.id), `created_at of ${row.id} vs its 202`);
  },
);

roost(
  'quirk.revoke-sockets',
  'live sockets close with 4001 within a second after token rotation or agent deletion (§9.2.9)',
  async (t) => {
    const { bob, carol } = await t.agents('bob', 'carol');
    for (const [label, agent, revoke] of [
      [
        'rotate-token',
        bob,
        () => t.http.post(`/_admin/agents/${encodeURIComponent(bob.handle)}/rotate-token`, undefined, t.adminToken),
      ],
      ['delete', carol, () => t.http.delete(`/_admin/agents/${encodeURIComponent(carol.handle)}`, t.adminToken)],
    ] as const) {
      const socket = await t.listen(agent, {}, `${agent.handle} (${label})`);
      const reply = await revoke();
      expectStatus(reply, [200, 204], label);
      if (reply.status === 200) t.run.agents.set(agent.handle, reply.body.token);
      const at = Date.now();
      await socket.until(() => socket.closeCode !== undefined, 5_000, `the close after ${label}`);
      eq([socket.closeCode, socket.closeReason], [4001, 'token revoked'], `${label}: close code and reason`);
      // "Within a second" (EXTENSIONS.md), with slack for a loaded CI machine; slower than a second is noted.
      const took = socket.closedAt! - at;
      ok(took <= 2_500, `${label}: the socket closed after ${took} ms (EXTENSIONS.md: within a second)`);
      if (took > 1_000) t.note(`${label}: the socket closed after ${took} ms`);
    }
  },
  { exclusive: true },
);

roost(
  'quirk.no-spurious-revoke',
  'a socket whose token is valid is never closed with 4001, even one opened while the gateway re-checks tokens (sweep)',
  async (t) => {
    const agents = [];
    for (let i = 0; i < 60; i += 10)
      agents.push(...(await Promise.all(Array.from({ length: 10 }, (_, j) => t.agent(`a${i + j}`)))));
    // Bursts of fresh sockets (each the first of its mailbox) for longer than two default sweep intervals (5 s).
    const deadline = Date.now() + 12_000;
    let opened = 0;
    const revoked: string[] = [];
    while (Date.now() < deadline) {
      const sockets: Socket[] = await Promise.all(
        agents.map((agent) => connect(t.options.url, { token: agent.token }, agent.handle)),
      );
      opened += sockets.length;
      await sleep(60);
      for (const socket of sockets) {
        if (socket.closeCode === 4001) revoked.push(socket.label);
        socket.terminate();
      }
      await sleep(10);
    }
    ok(
      revoked.length === 0,
      `${revoked.length} of ${opened} sockets with valid tokens were closed with 4001 "token revoked" (e.g. ${revoked[0]})`,
    );
  },
  { exclusive: true },
);

roost(
  'quirk.search-sent',
  '/search/messages covers envelopes the caller sent as well as received (§9.2.11)',
  async (t) => {
    await t.need(caps.searchMessages(t.run));
    const { alice, bob, carol } = await t.agents('alice', 'bob', 'carol');
    const word = `zq${randomName(10, 'abcdefghijklmnopqrstuvwxyz')}`;
    const sent = await t.sent(alice, envelope(bob.handle, { subject: `${word} sent` }));
    const received = await t.sent(
      bob,
      envelope(alice.handle, { content_parts: [{ type: 'text', text: `reply ${word}` }] }),
    );
    await t.sent(bob, envelope(carol.handle, { subject: `${word} not alice’s` }));
    const reply = await t.http.get(`/search/messages?q=${word}`, alice.token);
    expectStatus(reply, 200);
    eq(
      reply.body.envelopes.map((e: { envelope_id: string }) => e.envelope_id),
      [received.id, sent.id],
      'alice’s hits, newest first',
    );
  },
);
