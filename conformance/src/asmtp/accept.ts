import { caps } from '../caps';
import { eq, expectError, expectStatus, Failure, isInt, ok } from '../assert';
import { ulid } from '#client';
import { envelope, without } from '../wire';
import { allow, idIsFree, inbox } from './helpers';
import { item } from './item';

/** ASMTP.md §10 items 16–38: POST /messages validation, policy, recipient expansion, idempotency. */

const NOT_FOUND = { error: { code: 'NOT_FOUND', message: 'not found' } };

item(
  16,
  'POST /messages with a valid envelope returns 202 {id, received_ms, created_at, recipients:[{handle}]}',
  async (t) => {
    const { alice, bob } = await t.agents('alice', 'bob');
    const body = envelope(bob.handle, { subject: 'hi' });
    const reply = await t.send(alice, body);
    expectStatus(reply, 202);
    ok(/^application\/json/i.test(reply.headers.get('content-type') ?? ''), 'the 202 is JSON');
    for (const key of ['id', 'received_ms', 'created_at', 'recipients']) ok(key in reply.body, `the 202 lacks ${key}`);
    eq(reply.body.id, body.id, 'id');
    isInt(reply.body.received_ms, 'received_ms');
    isInt(reply.body.created_at, 'created_at');
    eq(reply.body.recipients, [{ handle: bob.handle }], 'recipients');
    eq(await inbox(t, bob), [body.id], 'the recipient’s in feed');
  },
);

item(17, 'POST /messages containing a from key returns 400 INVALID_REQUEST', async (t) => {
  const { alice, bob } = await t.agents('alice', 'bob');
  for (const from of [alice.handle, bob.handle, null, '']) {
    expectError(
      await t.send(alice, envelope(bob.handle, { from })),
      400,
      'INVALID_REQUEST',
      `from ${JSON.stringify(from)}`,
    );
  }
  eq(await inbox(t, bob), [], 'nothing delivered');
});

item(18, 'POST /messages with a lower-case, 25-char or non-01 id returns 400 INVALID_ENVELOPE_ID', async (t) => {
  const { alice, bob } = await t.agents('alice', 'bob');
  const valid = ulid();
  for (const [label, id] of [
    ['lower-case', valid.toLowerCase()],
    ['25 chars', valid.slice(0, 25)],
    ['00 prefix', `00${valid.slice(2)}`],
    ['02 prefix', `02${valid.slice(2)}`],
    ['not Crockford (U)', `01${valid.slice(2, 25)}U`],
  ]) {
    expectError(await t.send(alice, envelope(bob.handle, { id })), 400, 'INVALID_ENVELOPE_ID', label);
  }
  expectError(await t.send(alice, without(envelope(bob.handle), 'id')), 400, 'INVALID_ENVELOPE_ID', 'missing id');
  eq(await inbox(t, bob), [], 'nothing delivered');
});

item(19, 'POST /messages with missing or empty to returns 400 INVALID_REQUEST', async (t) => {
  const { alice, bob } = await t.agents('alice', 'bob');
  expectError(await t.send(alice, without(envelope(bob.handle), 'to')), 400, 'INVALID_REQUEST', 'missing to');
  expectError(await t.send(alice, envelope([])), 400, 'INVALID_REQUEST', 'to: []');
  expectError(await t.send(alice, envelope(bob.handle, { to: bob.handle })), 400, 'INVALID_REQUEST', 'to: a string');
  eq(await inbox(t, bob), [], 'nothing delivered');
});

item(20, 'POST /messages with cc: [] returns 400 INVALID_REQUEST', async (t) => {
  const { alice, bob } = await t.agents('alice', 'bob');
  expectError(await t.send(alice, envelope(bob.handle, { cc: [] })), 400, 'INVALID_REQUEST', 'cc: []');
  expectError(await t.send(alice, envelope(bob.handle, { cc: null })), 400, 'INVALID_REQUEST', 'cc: null');
  eq(await inbox(t, bob), [], 'nothing delivered');
});

item(21, 'POST /messages with an owner glob in to returns 400 INVALID_HANDLE', async (t) => {
  const { alice, bob } = await t.agents('alice', 'bob');
  expectError(await t.send(alice, envelope(`@${alice.owner}.*`)), 400, 'INVALID_HANDLE', 'glob in to');
  expectError(
    await t.send(alice, envelope([bob.handle, `@${alice.owner}.*`])),
    400,
    'INVALID_HANDLE',
    'glob after a handle',
  );
  expectError(
    await t.send(alice, envelope(bob.handle, { cc: [`@${alice.owner}.*`] })),
    400,
    'INVALID_HANDLE',
    'glob in cc',
  );
  eq(await inbox(t, bob), [], 'nothing delivered');
});

item(22, 'POST /messages with non-integer or negative date_ms returns 400 INVALID_REQUEST', async (t) => {
  const { alice, bob } = await t.agents('alice', 'bob');
  for (const date_ms of [1747000000000.5, -1, '1747000000000', null]) {
    expectError(
      await t.send(alice, envelope(bob.handle, { date_ms })),
      400,
      'INVALID_REQUEST',
      `date_ms ${JSON.stringify(date_ms)}`,
    );
  }
  expectError(await t.send(alice, without(envelope(bob.handle), 'date_ms')), 400, 'INVALID_REQUEST', 'missing date_ms');
  eq(await inbox(t, bob), [], 'nothing delivered');
});

item(
  23,
  'POST /messages with empty content_parts, unknown part type, empty text, or non-object data returns 400 INVALID_CONTENT',
  async (t) => {
    const { alice, bob } = await t.agents('alice', 'bob');
    const cases: Array<[string, unknown]> = [
      ['empty content_parts', []],
      ['unknown type', [{ type: 'video', url: 'https://example.com/v' }]],
      ['empty text', [{ type: 'text', text: '' }]],
      ['data array', [{ type: 'data', data: [1, 2] }]],
      ['data string', [{ type: 'data', data: 'x' }]],
      ['data null', [{ type: 'data', data: null }]],
      ['part not an object', ['hello']],
    ];
    for (const [label, content_parts] of cases) {
      expectError(await t.send(alice, envelope(bob.handle, { content_parts })), 400, 'INVALID_CONTENT', label);
    }
    eq(await inbox(t, bob), [], 'nothing delivered');
  },
);

item(
  24,
  'an image/file part with both url and file_id, neither, or a data: url returns 400 INVALID_CONTENT',
  async (t) => {
    const { alice, bob } = await t.agents('alice', 'bob');
    for (const type of ['image', 'file']) {
      for (const [label, part] of [
        ['url and file_id', { type, url: 'https://example.com/x', file_id: `file_${ulid()}` }],
        ['neither', { type, mime_type: 'image/png' }],
        ['data: url', { type, url: 'data:image/png;base64,iVBORw0KGgo=' }],
      ] as const) {
        expectError(
          await t.send(alice, envelope(bob.handle, { content_parts: [part] })),
          400,
          'INVALID_CONTENT',
          `${type}: ${label}`,
        );
      }
    }
    eq(await inbox(t, bob), [], 'nothing delivered');
  },
);

item(25, 'monitor: "x" returns 400 INVALID_MONITOR', async (t) => {
  const { alice, bob } = await t.agents('alice', 'bob');
  for (const monitor of ['x', 'mon_', 'MON_abc', `mon_${'a'.repeat(65)}`]) {
    expectError(
      await t.send(alice, envelope(bob.handle, { monitor })),
      400,
      'INVALID_MONITOR',
      `monitor ${JSON.stringify(monitor)}`,
    );
  }
  eq(await inbox(t, bob), [], 'nothing delivered');
});

item(26, 'references whose last element differs from in_reply_to returns 400 INVALID_REFERENCES', async (t) => {
  const { alice, bob } = await t.agents('alice', 'bob');
  const [a, b] = [ulid(), ulid()];
  expectError(
    await t.send(alice, envelope(bob.handle, { in_reply_to: a, references: [a, b] })),
    400,
    'INVALID_REFERENCES',
  );
  eq(await inbox(t, bob), [], 'nothing delivered');
  // Control: a matching chain is accepted.
  expectStatus(
    await t.send(alice, envelope(bob.handle, { in_reply_to: b, references: [a, b] })),
    202,
    'matching references',
  );
});

item(
  27,
  'sending to a nonexistent handle returns 404 NOT_FOUND with message "not found" and stores nothing',
  async (t) => {
    const { alice, bob } = await t.agents('alice', 'bob');
    const body = envelope(`@${alice.owner}.nobody`);
    const reply = await t.send(alice, body);
    expectStatus(reply, 404);
    eq(reply.body, NOT_FOUND, 'the refusal');
    ok(
      await idIsFree(t, alice, bob.handle, body.id as string),
      'the refused envelope was stored: its id is no longer free',
    );
  },
);

item(
  28,
  'with one valid and one nonexistent recipient the send returns 404 and the valid recipient’s mailbox stays empty',
  async (t) => {
    const { alice, bob } = await t.agents('alice', 'bob');
    const nobody = `@${alice.owner}.nobody`;
    for (const body of [
      envelope([bob.handle, nobody]),
      envelope([nobody, bob.handle]),
      envelope(bob.handle, { cc: [nobody] }),
    ]) {
      const reply = await t.send(alice, body);
      expectStatus(reply, 404);
      eq(reply.body, NOT_FOUND, 'the refusal');
    }
    eq(await inbox(t, bob), [], 'the valid recipient’s mailbox');
  },
);

item(29, 'sending to an allowlist agent that does not list the sender returns 404', async (t) => {
  const alice = await t.agent('alice');
  const bob = await t.agent('bob', { policy: 'allowlist' });
  const nobody = await t.send(alice, envelope(`@${alice.owner}.nobody`));
  const refused = await t.send(alice, envelope(bob.handle));
  expectStatus(refused, 404);
  eq(refused.text, nobody.text, 'the refusal body equals the unknown-recipient body');
  eq(await inbox(t, bob), [], 'bob’s mailbox');
  if ((await caps.allowlist(t.run)) === null) {
    await allow(t, bob, [alice.handle]);
    expectStatus(await t.send(alice, envelope(bob.handle)), 202, 'once bob lists alice');
  }
});

item(30, 'an allowlist sender sending to an open agent it does not list gets 404', async (t) => {
  const alice = await t.agent('alice', { policy: 'allowlist' });
  const bob = await t.agent('bob');
  const refused = await t.send(alice, envelope(bob.handle));
  expectStatus(refused, 404);
  eq(refused.body, NOT_FOUND, 'the refusal');
  eq(await inbox(t, bob), [], 'bob’s mailbox');
  if ((await caps.allowlist(t.run)) === null) {
    await allow(t, alice, [bob.handle]);
    expectStatus(await t.send(alice, envelope(bob.handle)), 202, 'once alice lists bob');
  }
});

item(
  31,
  'adding the sender’s owner glob @owner.* to the recipient’s allowlist (both sides satisfied) makes the send succeed',
  async (t) => {
    await t.need(caps.allowlist(t.run));
    const alice = await t.agent('alice', { policy: 'allowlist', owner: t.owner('a') });
    const bob = await t.agent('bob', { policy: 'allowlist', owner: t.owner('b') });
    await allow(t, alice, [bob.handle]);
    await allow(t, bob, [`@${t.owner('x')}.*`, `@${t.owner('a')}.alicex`]);
    expectStatus(await t.send(alice, envelope(bob.handle)), 404, 'before the glob (near misses do not count)');
    await allow(t, bob, [`@${alice.owner}.*`]);
    const sent = await t.sent(alice, envelope(bob.handle));
    eq(await inbox(t, bob), [sent.id], 'bob’s mailbox');
  },
);

item(
  32,
  'a send to an agent that blocked the sender returns 404, identical to the nonexistent-recipient body',
  async (t) => {
    await t.need(caps.blocks(t.run));
    const { alice, bob, carol } = await t.agents('alice', 'bob', 'carol');
    expectStatus(await t.http.post('/agents/me/blocks', { handle: alice.handle }, bob.token), 201, 'bob blocks alice');
    const nobody = await t.send(alice, envelope(`@${alice.owner}.nobody`));
    const blocked = await t.send(alice, envelope(bob.handle));
    expectStatus(blocked, 404);
    eq(blocked.text, nobody.text, 'the refusal body equals the unknown-recipient body');
    expectStatus(await t.send(alice, envelope(carol.handle, { cc: [bob.handle] })), 404, 'blocked in cc');
    eq(await inbox(t, bob), [], 'bob’s mailbox');
    eq(await inbox(t, carol), [], 'carol’s mailbox');
  },
);

item(
  33,
  'an allowlist agent with an empty allowlist can send to itself (202) and sees it in its in feed',
  async (t) => {
    const solo = await t.agent('solo', { policy: 'allowlist' });
    const reply = await t.send(solo, envelope(solo.handle));
    expectStatus(reply, 202);
    eq(reply.body.recipients, [{ handle: solo.handle }], 'recipients');
    eq(await inbox(t, solo), [reply.body.id], 'its in feed');
  },
);

item(34, 'to ∪ cc recipients each receive exactly one mailbox entry; a handle in both lists gets one', async (t) => {
  const { alice, bob, carol, dave } = await t.agents('alice', 'bob', 'carol', 'dave');
  const body = envelope([bob.handle, carol.handle, bob.handle], { cc: [carol.handle, dave.handle, dave.handle] });
  expectStatus(await t.send(alice, body), 202);
  for (const agent of [bob, carol, dave]) eq(await inbox(t, agent), [body.id], `${agent.handle}’s in feed`);
  eq(await inbox(t, alice), [], 'the sender (not a recipient)');
});

item(35, 'recipients in the 202 lists unique handles, to first then cc, in first-occurrence order', async (t) => {
  const { alice, a, b, c, d } = await t.agents('alice', 'a', 'b', 'c', 'd');
  const reply = await t.send(
    alice,
    envelope([c.handle, b.handle, c.handle], { cc: [a.handle, b.handle, d.handle, a.handle] }),
  );
  expectStatus(reply, 202);
  eq(
    reply.body.recipients,
    [c, b, a, d].map((x) => ({ handle: x.handle })),
    'recipients',
  );
});

item(
  36,
  'a byte-identical re-POST of the same id by the same sender returns 202 and creates no second mailbox entry or push frame',
  async (t) => {
    const { alice, bob } = await t.agents('alice', 'bob');
    const socket = await t.listen(bob);
    const raw = JSON.stringify(envelope(bob.handle, { subject: 'once' }));
    const id = JSON.parse(raw).id as string;
    expectStatus(await t.http.request('POST', '/messages', { token: alice.token, body: raw }), 202, 'first POST');
    await socket.notifyOf(id, t.options.frameTimeoutMs);
    for (let i = 0; i < 2; i++) {
      const again = await t.http.request('POST', '/messages', { token: alice.token, body: raw });
      expectStatus(again, 202, `retry ${i + 1}`);
      eq(again.body.id, id, 'retry id');
    }
    await t.quiet();
    eq(await inbox(t, bob), [id], 'bob’s in feed');
    eq(socket.notifiesFor(id).length, 1, 'envelope.notify frames for the envelope');
  },
);

item(37, 'a re-POST of the same id with a different body by the same sender returns 409 RETRY_MISMATCH', async (t) => {
  const { alice, bob } = await t.agents('alice', 'bob');
  const body = envelope(bob.handle, { subject: 'original' });
  expectStatus(await t.send(alice, body), 202);
  for (const [label, variant] of [
    ['subject', { ...body, subject: 'changed' }],
    ['text', { ...body, content_parts: [{ type: 'text', text: 'hello!' }] }],
    ['date_ms', { ...body, date_ms: (body.date_ms as number) + 1 }],
  ] as const) {
    expectError(await t.send(alice, variant), 409, 'RETRY_MISMATCH', label);
  }
  const fetched = await t.http.get(`/messages/${body.id}`, bob.token);
  expectStatus(fetched, 200);
  eq(fetched.body.subject, 'original', 'the stored subject');
  eq(await inbox(t, bob), [body.id], 'bob’s in feed');
});

item(38, 'POSTing an id already used by another sender returns 409 ID_COLLISION', async (t) => {
  const { alice, mallory, bob, carol } = await t.agents('alice', 'mallory', 'bob', 'carol');
  const body = envelope(bob.handle, { subject: 'from alice' });
  expectStatus(await t.send(alice, body), 202);
  expectError(await t.send(mallory, body), 409, 'ID_COLLISION', 'identical body');
  expectError(await t.send(mallory, { ...body, to: [carol.handle] }), 409, 'ID_COLLISION', 'another recipient');
  eq(await inbox(t, bob), [body.id], 'bob’s in feed');
  eq(await inbox(t, carol), [], 'carol’s in feed');
  const fetched = await t.http.get(`/messages/${body.id}`, bob.token);
  if (fetched.body?.from !== alice.handle) throw new Failure(`the stored envelope changed sender: ${fetched.text}`);
});
