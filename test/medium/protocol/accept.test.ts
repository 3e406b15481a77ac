import { FrameBus, type Delivery } from '#bus';
import { ulid } from '#domain';
import type { Reply } from '../../support/client';
import { envelope, startOperator, type TestOperator } from '../../support/operator';

/** ASMTP.md §10 items 16–38: validation, policy, recipient expansion and idempotency of POST /messages. */
describe('POST /messages accept path (ASMTP.md §10 #16–38)', () => {
  let op: TestOperator;
  beforeAll(async () => {
    op = await startOperator();
  });
  afterAll(async () => op?.close());

  const expectError = (reply: Reply, status: number, code: string, what = '') => {
    expect({ what, status: reply.status, code: reply.body?.error?.code }).toEqual({ what, status, code });
  };

  const send = (token: string, body: unknown) => op.client.post('/messages', body, token);

  /** Ids in the caller's `in` feed. */
  const inbox = async (token: string): Promise<string[]> => {
    const reply = await op.client.get('/mailbox?limit=1000', token);
    expect(reply.status).toBe(200);
    return reply.body.envelope_headers.map((h: { id: string }) => h.id);
  };

  /** Ids the caller sent (`direction=out`). */
  const outbox = async (token: string): Promise<string[]> => {
    const reply = await op.client.get('/mailbox?direction=out&limit=1000', token);
    expect(reply.status).toBe(200);
    return reply.body.envelope_headers.map((h: { id: string }) => h.id);
  };

  const allow = async (token: string, entries: string[]) => {
    const reply = await op.client.post('/agents/me/allowlist', { entries }, token);
    expect(reply.status).toBe(200);
  };

  /** A sender and a recipient (both `open`) under `owner`, for the 400 cases. */
  const pair = async (owner: string) => ({
    sender: await op.agent(`@${owner}.alice`),
    recipient: await op.agent(`@${owner}.bob`),
    to: `@${owner}.bob`,
  });

  /** Each body is refused with 400 `code`; the recipient's mailbox and the sender's out feed stay empty. */
  const expectAllRejected = async (
    owner: string,
    code: string,
    bodies: (to: string) => Array<[string, Record<string, unknown>]>,
  ) => {
    const { sender, recipient, to } = await pair(owner);
    for (const [label, body] of bodies(to)) {
      expectError(await send(sender, body), 400, code, label);
    }
    expect(await inbox(recipient)).toEqual([]);
    expect(await outbox(sender)).toEqual([]);
  };

  it('#16 POST /messages with a valid envelope returns 202 {id, received_ms, created_at, recipients:[{handle}]}', async () => {
    const alice = await op.agent('@t16.alice');
    const bob = await op.agent('@t16.bob');
    const body = envelope('@t16.bob', { subject: 'hi' });
    const before = Date.now();
    const reply = await send(alice, body);
    const after = Date.now();
    expect(reply.status).toBe(202);
    expect(reply.headers.get('content-type')).toMatch(/^application\/json/);
    expect(Object.keys(reply.body).sort()).toEqual(['created_at', 'id', 'received_ms', 'recipients']);
    expect(reply.body.id).toBe(body.id);
    expect(reply.body.recipients).toEqual([{ handle: '@t16.bob' }]);
    expect(Number.isInteger(reply.body.received_ms)).toBe(true);
    expect(reply.body.received_ms).toBeGreaterThanOrEqual(before);
    expect(reply.body.received_ms).toBeLessThanOrEqual(after);
    expect(Number.isInteger(reply.body.created_at)).toBe(true);
    expect(reply.body.created_at).toBeGreaterThanOrEqual(reply.body.received_ms);
    // It was delivered: the recipient lists it with the same created_at and can read it.
    const listed = await op.client.get('/mailbox', bob);
    expect(listed.body.envelope_headers).toHaveLength(1);
    expect(listed.body.envelope_headers[0]).toMatchObject({
      id: body.id,
      from: '@t16.alice',
      created_at: reply.body.created_at,
    });
    const fetched = await op.client.get(`/messages/${body.id as string}`, bob);
    expect(fetched.status).toBe(200);
    expect(fetched.body).toMatchObject({ id: body.id, from: '@t16.alice', to: ['@t16.bob'], subject: 'hi' });
  });

  it('#16 POST /messages accepts any Content-Type and an Idempotency-Key header, and ignores unknown top-level fields', async () => {
    const alice = await op.agent('@t16b.alice');
    const bob = await op.agent('@t16b.bob');
    const body = envelope('@t16b.bob', { priority: 'high', x_trace: { a: 1 } });
    const reply = await op.client.request('POST', '/messages', {
      token: alice,
      body: JSON.stringify(body),
      headers: { 'content-type': 'text/plain', 'idempotency-key': '2f1e0c6a-58a4-4a4e-9d0f-0d1b2f3c4d5e' },
    });
    expect(reply.status).toBe(202);
    const fetched = await op.client.get(`/messages/${body.id as string}`, bob);
    expect(Object.keys(fetched.body).sort()).toEqual(['content_parts', 'date_ms', 'from', 'id', 'to']);
    const noType = envelope('@t16b.bob');
    expect((await op.client.request('POST', '/messages', { token: alice, body: JSON.stringify(noType) })).status).toBe(
      202,
    );
    expect(await inbox(bob)).toEqual([body.id, noType.id]);
  });

  it('#17 POST /messages containing a from key returns 400 INVALID_REQUEST', async () => {
    await expectAllRejected('t17', 'INVALID_REQUEST', (to) => [
      ['own handle', envelope(to, { from: '@t17.alice' })],
      ['other handle', envelope(to, { from: '@t17.bob' })],
      ['null', envelope(to, { from: null })],
      ['empty string', envelope(to, { from: '' })],
      ['number', envelope(to, { from: 5 })],
      ['object', envelope(to, { from: {} })],
      // `from` is checked first: it wins over a later field's error.
      ['with a bad id', envelope(to, { from: '@t17.alice', id: 'bad' })],
    ]);
  });

  it('#18 POST /messages with a lower-case, 25-char or non-01 id returns 400 INVALID_ENVELOPE_ID', async () => {
    const valid = ulid();
    await expectAllRejected('t18', 'INVALID_ENVELOPE_ID', (to) => [
      ['lower-case', envelope(to, { id: valid.toLowerCase() })],
      ['25 chars', envelope(to, { id: valid.slice(0, 25) })],
      ['27 chars', envelope(to, { id: `${valid}0` })],
      ['00 prefix', envelope(to, { id: `00${valid.slice(2)}` })],
      ['7Z prefix', envelope(to, { id: `7Z${valid.slice(2)}` })],
      ['02 prefix', envelope(to, { id: `02${valid.slice(2)}` })],
      ['letter U (not Crockford)', envelope(to, { id: `01${valid.slice(2, 25)}U` })],
      ['number', envelope(to, { id: 1 })],
      ['null', envelope(to, { id: null })],
      ['missing', (({ id: _id, ...rest }) => rest)(envelope(to))],
    ]);
  });

  it('#19 POST /messages with missing or empty to returns 400 INVALID_REQUEST', async () => {
    await expectAllRejected('t19', 'INVALID_REQUEST', (to) => [
      ['missing', (({ to: _to, ...rest }) => rest)(envelope(to))],
      ['empty', envelope([])],
      ['string', envelope(to, { to })],
      ['null', envelope(to, { to: null })],
      ['object', envelope(to, { to: { 0: to } })],
    ]);
  });

  it('#20 POST /messages with cc: [] returns 400 INVALID_REQUEST', async () => {
    await expectAllRejected('t20', 'INVALID_REQUEST', (to) => [
      ['empty cc', envelope(to, { cc: [] })],
      ['null cc', envelope(to, { cc: null })],
      ['string cc', envelope(to, { cc: to })],
    ]);
  });

  it('#21 POST /messages with an owner glob in to returns 400 INVALID_HANDLE', async () => {
    await expectAllRejected('t21', 'INVALID_HANDLE', (to) => [
      ['glob in to', envelope('@t21.*')],
      ['glob after a handle', envelope([to, '@t21.*'])],
      ['glob in cc', envelope(to, { cc: ['@t21.*'] })],
      ['upper-case handle', envelope('@T21.bob')],
      ['no @', envelope('t21.bob')],
      ['two dots', envelope('@t21.bob.x')],
      ['non-string element', envelope(to, { to: [to, 7] })],
    ]);
  });

  it('#22 POST /messages with non-integer or negative date_ms returns 400 INVALID_REQUEST', async () => {
    await expectAllRejected('t22', 'INVALID_REQUEST', (to) => [
      ['fraction', envelope(to, { date_ms: 1747000000000.5 })],
      ['negative', envelope(to, { date_ms: -1 })],
      ['string', envelope(to, { date_ms: '1747000000000' })],
      ['null', envelope(to, { date_ms: null })],
      ['boolean', envelope(to, { date_ms: true })],
      ['missing', (({ date_ms: _d, ...rest }) => rest)(envelope(to))],
    ]);
  });

  it('#22 date_ms 0 and a JSON 1.0 are valid integers', async () => {
    const { sender, recipient, to } = await pair('t22b');
    expect((await send(sender, envelope(to, { date_ms: 0 }))).status).toBe(202);
    const id = ulid();
    const raw = `{"id":"${id}","to":["${to}"],"date_ms":1747000000000.0,"content_parts":[{"type":"text","text":"x"}]}`;
    expect((await op.client.request('POST', '/messages', { token: sender, body: raw })).status).toBe(202);
    expect(await inbox(recipient)).toHaveLength(2);
  });

  it('#23 POST /messages with empty content_parts, unknown part type, empty text, or non-object data returns 400 INVALID_CONTENT', async () => {
    const part = (p: unknown) => ({ content_parts: [p] });
    await expectAllRejected('t23', 'INVALID_CONTENT', (to) => [
      ['empty content_parts', envelope(to, { content_parts: [] })],
      ['missing content_parts', (({ content_parts: _c, ...rest }) => rest)(envelope(to))],
      ['content_parts not an array', envelope(to, { content_parts: { type: 'text', text: 'x' } })],
      ['content_parts null', envelope(to, { content_parts: null })],
      ['unknown type', envelope(to, part({ type: 'video', url: 'https://x/y' }))],
      ['missing type', envelope(to, part({ text: 'hello' }))],
      ['empty text', envelope(to, part({ type: 'text', text: '' }))],
      ['missing text', envelope(to, part({ type: 'text' }))],
      ['non-string text', envelope(to, part({ type: 'text', text: 5 }))],
      ['data array', envelope(to, part({ type: 'data', data: [1, 2] }))],
      ['data string', envelope(to, part({ type: 'data', data: 'x' }))],
      ['data null', envelope(to, part({ type: 'data', data: null }))],
      ['data missing', envelope(to, part({ type: 'data' }))],
      ['part not an object', envelope(to, part('hello'))],
      ['part null', envelope(to, part(null))],
      [
        'good part then bad part',
        envelope(to, {
          content_parts: [
            { type: 'text', text: 'ok' },
            { type: 'text', text: '' },
          ],
        }),
      ],
    ]);
  });

  it('#23 every part type in its valid form is accepted (control)', async () => {
    const { sender, recipient, to } = await pair('t23b');
    const parts = [
      { type: 'text', text: 'hello' },
      { type: 'image', url: 'https://example.com/p.png', mime_type: 'image/png' },
      { type: 'file', url: 'https://example.com/a.pdf', name: 'a.pdf', mime_type: 'application/pdf', size: 10 },
      { type: 'data', data: { k: 1 }, schema: 'example/v1' },
    ];
    const body = envelope(to, { content_parts: parts });
    expect((await send(sender, body)).status).toBe(202);
    const fetched = await op.client.get(`/messages/${body.id as string}`, recipient);
    expect(fetched.body.content_parts).toEqual(parts);
  });

  it('#24 an image/file part with both url and file_id, neither, or a data: url returns 400 INVALID_CONTENT', async () => {
    const cases: Array<[string, Record<string, unknown>]> = [];
    for (const type of ['image', 'file']) {
      cases.push(
        [
          `${type}: url and file_id`,
          { type, url: 'https://example.com/x', file_id: 'file_01JV3Z8W7Q4M2N6P8R0T2V4X6Y' },
        ],
        [`${type}: neither`, { type, mime_type: 'image/png' }],
        [`${type}: data: url`, { type, url: 'data:image/png;base64,iVBORw0KGgo=' }],
        [`${type}: empty url`, { type, url: '' }],
        [`${type}: empty file_id`, { type, file_id: '' }],
        [`${type}: non-string url`, { type, url: 5 }],
      );
    }
    await expectAllRejected('t24', 'INVALID_CONTENT', (to) =>
      cases.map(([label, p]) => [label, envelope(to, { content_parts: [p] })] as [string, Record<string, unknown>]),
    );
  });

  it('#24 the data: check is a case-sensitive prefix check (a DATA: url is accepted)', async () => {
    const { sender, to } = await pair('t24b');
    const reply = await send(sender, envelope(to, { content_parts: [{ type: 'image', url: 'DATA:x' }] }));
    expect(reply.status).toBe(202);
  });

  it('#25 monitor: "x" returns 400 INVALID_MONITOR', async () => {
    await expectAllRejected('t25', 'INVALID_MONITOR', (to) => [
      ['x', envelope(to, { monitor: 'x' })],
      ['mon_ without label', envelope(to, { monitor: 'mon_' })],
      ['upper-case prefix', envelope(to, { monitor: 'MON_abc' })],
      ['space', envelope(to, { monitor: 'mon_a b' })],
      ['65-char label', envelope(to, { monitor: `mon_${'a'.repeat(65)}` })],
      ['empty', envelope(to, { monitor: '' })],
    ]);
  });

  it('#25 a non-string monitor is INVALID_REQUEST; null counts as absent; a valid one is stored', async () => {
    const { sender, recipient, to } = await pair('t25b');
    expectError(await send(sender, envelope(to, { monitor: 5 })), 400, 'INVALID_REQUEST');
    const absent = envelope(to, { monitor: null });
    expect((await send(sender, absent)).status).toBe(202);
    expect((await op.client.get(`/messages/${absent.id as string}`, recipient)).body).not.toHaveProperty('monitor');
    const given = envelope(to, { monitor: `mon_${'A'.repeat(64)}` });
    expect((await send(sender, given)).status).toBe(202);
    expect((await op.client.get(`/messages/${given.id as string}`, recipient)).body.monitor).toBe(
      `mon_${'A'.repeat(64)}`,
    );
  });

  it('#26 references whose last element differs from in_reply_to returns 400 INVALID_REFERENCES', async () => {
    const [a, b, c] = [ulid(), ulid(), ulid()];
    await expectAllRejected('t26', 'INVALID_REFERENCES', (to) => [
      ['last differs', envelope(to, { in_reply_to: a, references: [a, b] })],
      ['single differs', envelope(to, { in_reply_to: c, references: [a] })],
      ['contains it but not last', envelope(to, { in_reply_to: b, references: [a, b, c] })],
    ]);
  });

  it('#26 matching, reply-less and empty references are accepted (control)', async () => {
    const { sender, recipient, to } = await pair('t26b');
    const [a, b] = [ulid(), ulid()];
    const matching = envelope(to, { in_reply_to: b, references: [a, b] });
    expect((await send(sender, matching)).status).toBe(202);
    expect((await op.client.get(`/messages/${matching.id as string}`, recipient)).body).toMatchObject({
      in_reply_to: b,
      references: [a, b],
    });
    expect((await send(sender, envelope(to, { references: [a, b] }))).status).toBe(202);
    const empty = envelope(to, { in_reply_to: a, references: [] });
    expect((await send(sender, empty)).status).toBe(202);
    expect((await op.client.get(`/messages/${empty.id as string}`, recipient)).body).not.toHaveProperty('references');
    // Validation order: a reference element of the wrong syntax is INVALID_ENVELOPE_ID, not INVALID_REFERENCES.
    expectError(await send(sender, envelope(to, { in_reply_to: a, references: ['nope'] })), 400, 'INVALID_ENVELOPE_ID');
    expectError(await send(sender, envelope(to, { references: null })), 400, 'INVALID_REQUEST');
    expectError(await send(sender, envelope(to, { in_reply_to: null })), 400, 'INVALID_ENVELOPE_ID');
  });

  it('#27 sending to a nonexistent handle returns 404 NOT_FOUND with message "not found" and stores nothing', async () => {
    const alice = await op.agent('@t27.alice');
    const bob = await op.agent('@t27.bob');
    const body = envelope('@t27.nobody');
    const reply = await send(alice, body);
    expect(reply.status).toBe(404);
    expect(reply.body).toEqual({ error: { code: 'NOT_FOUND', message: 'not found' } });
    // Nothing stored: the sender has no such envelope, cannot fetch it, and the id is still free.
    expect(await outbox(alice)).toEqual([]);
    expectError(await op.client.get(`/messages/${body.id as string}`, alice), 404, 'NOT_FOUND', 'sender fetch');
    const reuse = await send(alice, { ...body, to: ['@t27.bob'], subject: 'different' });
    expect(reuse.status).toBe(202);
    expect(await inbox(bob)).toEqual([body.id]);
  });

  it('#28 with one valid and one nonexistent recipient the send returns 404 and the valid recipient mailbox stays empty', async () => {
    const alice = await op.agent('@t28.alice');
    const bob = await op.agent('@t28.bob');
    const bodies = [
      envelope(['@t28.bob', '@t28.nobody']),
      envelope(['@t28.nobody', '@t28.bob']),
      envelope('@t28.bob', { cc: ['@t28.nobody'] }),
      envelope('@t28.nobody', { cc: ['@t28.bob'] }),
      envelope(['@t28.alice', '@t28.nobody']), // even a self-send is refused as a whole
    ];
    for (const body of bodies) {
      const reply = await send(alice, body);
      expect(reply.status).toBe(404);
      expect(reply.body).toEqual({ error: { code: 'NOT_FOUND', message: 'not found' } });
    }
    expect(await inbox(bob)).toEqual([]);
    expect(await inbox(alice)).toEqual([]);
    expect(await outbox(alice)).toEqual([]);
  });

  it('#29 sending to an allowlist agent that does not list the sender returns 404', async () => {
    const alice = await op.agent('@t29.alice'); // open
    const bob = await op.agent('@t29.bob', { policy: 'allowlist' });
    await allow(bob, ['@t29.carol', '@t29x.*']);
    const nobody = await send(alice, envelope('@t29.nobody'));
    const refused = await send(alice, envelope('@t29.bob'));
    expect(refused.status).toBe(404);
    expect(refused.text).toBe(nobody.text); // indistinguishable from an unknown recipient
    expect(await inbox(bob)).toEqual([]);
    // The same send succeeds once bob lists alice: the policy was the only reason.
    await allow(bob, ['@t29.alice']);
    expect((await send(alice, envelope('@t29.bob'))).status).toBe(202);
    expect(await inbox(bob)).toHaveLength(1);
  });

  it('#30 an allowlist sender sending to an open agent it does not list gets 404', async () => {
    const alice = await op.agent('@t30.alice', { policy: 'allowlist' });
    const bob = await op.agent('@t30.bob'); // open
    await allow(alice, ['@t30.carol']);
    const refused = await send(alice, envelope('@t30.bob'));
    expect(refused.status).toBe(404);
    expect(refused.body).toEqual({ error: { code: 'NOT_FOUND', message: 'not found' } });
    expect(await inbox(bob)).toEqual([]);
    expect(await outbox(alice)).toEqual([]);
    await allow(alice, ['@t30.bob']);
    expect((await send(alice, envelope('@t30.bob'))).status).toBe(202);
    expect(await inbox(bob)).toHaveLength(1);
  });

  it('#31 adding the sender owner glob @owner.* to the recipient allowlist (both sides satisfied) makes the send succeed', async () => {
    const alice = await op.agent('@t31a.alice', { policy: 'allowlist' });
    const bob = await op.agent('@t31b.bob', { policy: 'allowlist' });
    await allow(alice, ['@t31b.bob']); // sender side satisfied by the exact handle
    await allow(bob, ['@t31.*', '@t31ax.*', '@t31a.alicex']); // near misses do not count
    expect((await send(alice, envelope('@t31b.bob'))).status).toBe(404);
    expect(await inbox(bob)).toEqual([]);
    await allow(bob, ['@t31a.*']);
    const sent = await send(alice, envelope('@t31b.bob'));
    expect(sent.status).toBe(202);
    expect(await inbox(bob)).toEqual([sent.body.id]);
    // A glob covers every agent of that owner.
    const amy = await op.agent('@t31a.amy', { policy: 'allowlist' });
    await allow(amy, ['@t31b.*']);
    expect((await send(amy, envelope('@t31b.bob'))).status).toBe(202);
    // The gates are symmetric, so the reverse direction passes both of them too.
    expect((await send(bob, envelope('@t31a.alice'))).status).toBe(202);
    expect(await inbox(alice)).toHaveLength(1);
  });

  it('#32 a send to an agent that blocked the sender returns 404, identical to the nonexistent-recipient body', async () => {
    const alice = await op.agent('@t32.alice');
    const bob = await op.agent('@t32.bob');
    expect((await op.client.post('/agents/me/blocks', { handle: '@t32.alice' }, bob)).status).toBe(201);
    const nobody = await send(alice, envelope('@t32.nobody'));
    const blocked = await send(alice, envelope('@t32.bob'));
    expect(blocked.status).toBe(404);
    expect(blocked.text).toBe(nobody.text);
    expect(blocked.body).toEqual({ error: { code: 'NOT_FOUND', message: 'not found' } });
    // Blocked in cc, or alongside a valid recipient: still the whole send is refused.
    const carol = await op.agent('@t32.carol');
    expect((await send(alice, envelope('@t32.carol', { cc: ['@t32.bob'] }))).status).toBe(404);
    expect(await inbox(bob)).toEqual([]);
    expect(await inbox(carol)).toEqual([]);
    // Unblocking restores delivery.
    expect((await op.client.delete('/agents/me/blocks/%40t32.alice', bob)).status).toBe(200);
    expect((await send(alice, envelope('@t32.bob'))).status).toBe(202);
    expect(await inbox(bob)).toHaveLength(1);
  });

  it('#32 concurrent sends by a blocked and an allowed sender (their lookups share queries): each gets its own answer', async () => {
    const alice = await op.agent('@t32c.alice');
    const mallory = await op.agent('@t32c.mallory');
    const bob = await op.agent('@t32c.bob');
    const carol = await op.agent('@t32c.carol');
    expect((await op.client.post('/agents/me/blocks', { handle: '@t32c.mallory' }, bob)).status).toBe(201);
    const sends = Array.from({ length: 40 }, (_, i) => {
      const from = i % 2 === 0 ? alice : mallory;
      const to = i % 4 < 2 ? '@t32c.bob' : '@t32c.carol';
      return send(from, envelope(to)).then(
        (reply) => `${from === alice ? 'alice' : 'mallory'}→${to.slice(6)}:${reply.status}`,
      );
    });
    const outcomes = new Set(await Promise.all(sends));
    expect([...outcomes].sort()).toEqual(['alice→bob:202', 'alice→carol:202', 'mallory→bob:404', 'mallory→carol:202']);
    expect(await inbox(bob)).toHaveLength(10);
    expect(await inbox(carol)).toHaveLength(20);
  });

  it('#32 blocks are one-way: the sender own block of the recipient does not refuse its send (§1.6)', async () => {
    const alice = await op.agent('@t32b.alice');
    const bob = await op.agent('@t32b.bob');
    expect((await op.client.post('/agents/me/blocks', { handle: '@t32b.bob' }, alice)).status).toBe(201);
    expect((await send(alice, envelope('@t32b.bob'))).status).toBe(202);
    expect(await inbox(bob)).toHaveLength(1);
    expect((await send(bob, envelope('@t32b.alice'))).status).toBe(404);
  });

  it('#33 an allowlist agent with an empty allowlist can send to itself (202) and sees it in its in feed', async () => {
    const solo = await op.agent('@t33.solo', { policy: 'allowlist' });
    expect((await op.client.get('/agents/me/allowlist', solo)).body.entries).toEqual([]);
    const toSelf = await send(solo, envelope('@t33.solo'));
    expect(toSelf.status).toBe(202);
    expect(toSelf.body.recipients).toEqual([{ handle: '@t33.solo' }]);
    const ccSelf = await send(solo, envelope('@t33.solo', { cc: ['@t33.solo'] }));
    expect(ccSelf.status).toBe(202);
    const listed = await op.client.get('/mailbox', solo);
    expect(listed.body.envelope_headers.map((h: { id: string }) => h.id)).toEqual([toSelf.body.id, ccSelf.body.id]);
    expect(listed.body.envelope_headers[0]).not.toHaveProperty('direction');
    const fetched = await op.client.get(`/messages/${toSelf.body.id as string}`, solo);
    expect(fetched.body.from).toBe('@t33.solo');
    // Still gated towards others.
    await op.agent('@t33.other');
    expect((await send(solo, envelope('@t33.other'))).status).toBe(404);
  });

  it('#34 to ∪ cc recipients each receive exactly one mailbox entry; a handle in both lists gets one', async () => {
    const alice = await op.agent('@t34.alice');
    const bob = await op.agent('@t34.bob');
    const carol = await op.agent('@t34.carol');
    const dave = await op.agent('@t34.dave');
    const body = envelope(['@t34.bob', '@t34.carol', '@t34.bob'], { cc: ['@t34.carol', '@t34.dave', '@t34.dave'] });
    expect((await send(alice, body)).status).toBe(202);
    expect(await inbox(bob)).toEqual([body.id]);
    expect(await inbox(carol)).toEqual([body.id]);
    expect(await inbox(dave)).toEqual([body.id]);
    expect(await inbox(alice)).toEqual([]); // the sender is not a recipient
    // The stored body keeps to/cc exactly as posted, duplicates included.
    const fetched = await op.client.get(`/messages/${body.id as string}`, carol);
    expect(fetched.body.to).toEqual(['@t34.bob', '@t34.carol', '@t34.bob']);
    expect(fetched.body.cc).toEqual(['@t34.carol', '@t34.dave', '@t34.dave']);
    // A self-send naming the sender in to and cc also lands once.
    const self = envelope('@t34.alice', { cc: ['@t34.alice', '@t34.bob'] });
    expect((await send(alice, self)).status).toBe(202);
    expect(await inbox(alice)).toEqual([self.id]);
    expect(await inbox(bob)).toEqual([body.id, self.id]);
  });

  it('#35 recipients in the 202 lists unique handles, to first then cc, in first-occurrence order', async () => {
    const alice = await op.agent('@t35.alice');
    for (const name of ['a', 'b', 'c', 'd']) await op.agent(`@t35.${name}`);
    const reply = await send(
      alice,
      envelope(['@t35.c', '@t35.b', '@t35.c'], { cc: ['@t35.a', '@t35.b', '@t35.d', '@t35.a'] }),
    );
    expect(reply.status).toBe(202);
    expect(reply.body.recipients).toEqual([
      { handle: '@t35.c' },
      { handle: '@t35.b' },
      { handle: '@t35.a' },
      { handle: '@t35.d' },
    ]);
    const self = await send(alice, envelope(['@t35.d', '@t35.alice'], { cc: ['@t35.alice', '@t35.a'] }));
    expect(self.body.recipients).toEqual([{ handle: '@t35.d' }, { handle: '@t35.alice' }, { handle: '@t35.a' }]);
  });

  it('#36 re-POSTing a byte-identical envelope with the same id returns 202 and creates no second mailbox entry or push frame', async () => {
    const alice = await op.agent('@t36.alice');
    const bob = await op.agent('@t36.bob');
    const carol = await op.agent('@t36.carol');
    const bus = op.app.get(FrameBus);
    const published: Delivery[] = [];
    const spy = jest.spyOn(bus, 'publish').mockImplementation(async (delivery: Delivery) => {
      published.push(delivery);
    });
    try {
      const raw = JSON.stringify(envelope('@t36.bob', { cc: ['@t36.carol'], subject: 's', monitor: 'mon_t36' }));
      const id = (JSON.parse(raw) as { id: string }).id;
      const framesFor = () => published.flatMap((d) => d.frames).filter((f) => f.envelope_id === id);
      const factsFor = () => published.flatMap((d) => d.monitor).filter((m) => m.frame.includes(id));

      const first = await op.client.request('POST', '/messages', { token: alice, body: raw });
      expect(first.status).toBe(202);
      expect(framesFor()).toHaveLength(2); // the spy sees real deliveries
      expect(factsFor()).toHaveLength(2);
      await new Promise((resolve) => setTimeout(resolve, 15));

      for (let i = 0; i < 2; i++) {
        const again = await op.client.request('POST', '/messages', { token: alice, body: raw });
        expect(again.status).toBe(202);
        // Roost returns the original 202 (EXTENSIONS.md, quirk §9.2.1).
        expect(again.body).toEqual(first.body);
      }
      expect(framesFor()).toHaveLength(2);
      expect(factsFor()).toHaveLength(2);
      expect(await inbox(bob)).toEqual([id]);
      expect(await inbox(carol)).toEqual([id]);
      expect(await outbox(alice)).toEqual([id]);
      // Unknown top-level fields never matter for the comparison.
      const extra = await send(alice, { ...(JSON.parse(raw) as Record<string, unknown>), trace: 'x' });
      expect(extra.status).toBe(202);
      expect(await inbox(bob)).toEqual([id]);
      expect(framesFor()).toHaveLength(2);
    } finally {
      spy.mockRestore();
    }
  });

  it('#36 concurrent byte-identical POSTs of one envelope all return the same 202 and store one entry', async () => {
    const alice = await op.agent('@t36c.alice');
    const bob = await op.agent('@t36c.bob');
    const raw = JSON.stringify(envelope('@t36c.bob'));
    const replies = await Promise.all(
      Array.from({ length: 8 }, () => op.client.request('POST', '/messages', { token: alice, body: raw })),
    );
    expect(replies.map((r) => r.status)).toEqual(Array(8).fill(202));
    for (const reply of replies) expect(reply.body).toEqual(replies[0].body);
    expect(await inbox(bob)).toEqual([(JSON.parse(raw) as { id: string }).id]);
  });

  it('#36 a replay does not reset read state', async () => {
    const alice = await op.agent('@t36b.alice');
    const bob = await op.agent('@t36b.bob');
    const body = envelope('@t36b.bob');
    expect((await send(alice, body)).status).toBe(202);
    expect((await op.client.get(`/messages/${body.id as string}`, bob)).status).toBe(200);
    expect((await send(alice, body)).status).toBe(202);
    expect((await op.client.get('/mailbox?unread=true', bob)).body.envelope_headers).toEqual([]);
    expect((await op.client.get('/mailbox?unread=false', bob)).body.envelope_headers).toHaveLength(1);
  });

  it('#37 re-POSTing the same id with a different body by the same sender returns 409 RETRY_MISMATCH', async () => {
    const alice = await op.agent('@t37.alice');
    const bob = await op.agent('@t37.bob');
    await op.agent('@t37.carol');
    const body = envelope('@t37.bob', { cc: ['@t37.carol'], subject: 'original' });
    expect((await send(alice, body)).status).toBe(202);
    const variants: Array<[string, Record<string, unknown>]> = [
      ['subject', { ...body, subject: 'changed' }],
      ['no subject', (({ subject: _s, ...rest }) => rest)(body)],
      ['text', { ...body, content_parts: [{ type: 'text', text: 'hello!' }] }],
      ['date_ms', { ...body, date_ms: (body.date_ms as number) + 1 }],
      ['to/cc swapped', { ...body, to: ['@t37.carol'], cc: ['@t37.bob'] }],
      ['monitor added', { ...body, monitor: 'mon_x' }],
    ];
    for (const [label, variant] of variants) {
      expectError(await send(alice, variant), 409, 'RETRY_MISMATCH', label);
    }
    const fetched = await op.client.get(`/messages/${body.id as string}`, bob);
    expect(fetched.body.subject).toBe('original');
    expect(fetched.body.content_parts).toEqual([{ type: 'text', text: 'hello' }]);
    expect(fetched.body).not.toHaveProperty('monitor');
    expect(await inbox(bob)).toEqual([body.id]);
  });

  it('#38 POSTing an id already used by another sender returns 409 ID_COLLISION', async () => {
    const alice = await op.agent('@t38.alice');
    const mallory = await op.agent('@t38.mallory');
    const bob = await op.agent('@t38.bob');
    const carol = await op.agent('@t38.carol');
    const body = envelope('@t38.bob', { subject: 'from alice' });
    expect((await send(alice, body)).status).toBe(202);
    expectError(await send(mallory, body), 409, 'ID_COLLISION', 'identical body');
    expectError(await send(mallory, { ...body, subject: 'from mallory' }), 409, 'ID_COLLISION', 'other body');
    expectError(await send(mallory, { ...body, to: ['@t38.carol'] }), 409, 'ID_COLLISION', 'other recipient');
    expect(await inbox(bob)).toEqual([body.id]);
    expect(await inbox(carol)).toEqual([]);
    expect(await outbox(mallory)).toEqual([]);
    const fetched = await op.client.get(`/messages/${body.id as string}`, bob);
    expect(fetched.body.from).toBe('@t38.alice');
    expect(fetched.body.subject).toBe('from alice');
  });

  it('#38 concurrent POSTs of one id by different senders: exactly one 202, the others 409 ID_COLLISION', async () => {
    const bob = await op.agent('@t38c.bob');
    const senders = await Promise.all(['a', 'b', 'c', 'd', 'e', 'f'].map((n) => op.agent(`@t38c.${n}`)));
    const body = envelope('@t38c.bob');
    const replies = await Promise.all(senders.map((token) => send(token, body)));
    const statuses = replies.map((r) => r.status).sort();
    expect(statuses).toEqual([202, 409, 409, 409, 409, 409]);
    for (const reply of replies.filter((r) => r.status === 409)) expect(reply.body.error.code).toBe('ID_COLLISION');
    expect(await inbox(bob)).toEqual([body.id]);
    const winner = replies.findIndex((r) => r.status === 202);
    const fetched = await op.client.get(`/messages/${body.id as string}`, bob);
    expect(fetched.body.from).toBe(`@t38c.${['a', 'b', 'c', 'd', 'e', 'f'][winner]}`);
  });

  it('#38 recipient checks run before the duplicate-id check: a refused send is 404, not 409', async () => {
    const alice = await op.agent('@t38b.alice');
    const mallory = await op.agent('@t38b.mallory');
    const bob = await op.agent('@t38b.bob');
    expect((await op.client.post('/agents/me/blocks', { handle: '@t38b.mallory' }, bob)).status).toBe(201);
    const body = envelope('@t38b.bob');
    expect((await send(alice, body)).status).toBe(202);
    expectError(await send(mallory, body), 404, 'NOT_FOUND', 'blocked sender reusing the id');
    expectError(await send(mallory, { ...body, to: ['@t38b.nobody'] }), 404, 'NOT_FOUND', 'unknown recipient');
    expect(await inbox(bob)).toEqual([body.id]);
  });
});
