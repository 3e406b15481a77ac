import { DATABASE, type Database } from '#db';
import { RECEIPT_STATUSES, ulid } from '#domain';
import type { Reply } from '../../support/client';
import { envelope, startOperator, type TestAgent as Agent, type TestOperator } from '../../support/operator';
import { testBackend } from '../../support/services';
import { connect, type Listener } from '../../support/ws';

/**
 * Receipts and delivery status (EXTENSIONS.md §2). On Postgres the frames go through Redis
 * Streams, on PGlite through the in-process bus.
 */

const SCHEMA = 'roost.receipt/v1';
/** Keys an ASMTP client knows in a header frame / listing row (ASMTP.md §6.3). */
const ASMTP_HEADER_KEYS = [
  'op',
  'id',
  'from',
  'to',
  'cc',
  'subject',
  'in_reply_to',
  'type_hint',
  'size_hint',
  'created_at',
  'date_ms',
];
/** Keys of a stored body (ASMTP.md §2.1). */
const ASMTP_BODY_KEYS = [
  'id',
  'from',
  'to',
  'date_ms',
  'content_parts',
  'cc',
  'subject',
  'in_reply_to',
  'references',
  'monitor',
];

let op: TestOperator;
let database: Database;
const sockets: Listener[] = [];

beforeAll(async () => {
  op = await startOperator({ redis: testBackend() === 'postgres' });
  database = op.app.get<Database>(DATABASE);
});
afterEach(() => {
  for (const socket of sockets.splice(0)) socket.close();
});
afterAll(async () => op?.close());

const expectError = (reply: Reply, status: number, code: string, what = '') => {
  expect({ what, status: reply.status, code: reply.body?.error?.code }).toEqual({ what, status, code });
};

/** POST /messages expecting 202; returns the 202 body. */
async function sent(from: Agent, body: Record<string, unknown>): Promise<{ id: string; created_at: number }> {
  const reply = await op.client.post('/messages', body, from.token);
  if (reply.status !== 202) throw new Error(`send: ${reply.status} ${reply.text}`);
  return reply.body;
}

const postReceipt = (by: Agent, envelopeId: string, body: Record<string, unknown>) =>
  op.client.post(`/messages/${envelopeId}/receipts`, body, by.token);

/** POST /messages/{id}/receipts expecting 201; returns the receipt object. */
async function receipt(by: Agent, envelopeId: string, body: Record<string, unknown>): Promise<any> {
  const reply = await postReceipt(by, envelopeId, body);
  if (reply.status !== 201) throw new Error(`receipt: ${reply.status} ${reply.text}`);
  return reply.body;
}

/** A receipt part for a plain POST /messages. */
const receiptPart = (data: Record<string, unknown>) => ({ type: 'data', schema: SCHEMA, data });

async function headers(agent: Agent, direction = 'in'): Promise<any[]> {
  const reply = await op.client.get(`/mailbox?direction=${direction}&limit=1000`, agent.token);
  expect(reply.status).toBe(200);
  return reply.body.envelope_headers;
}

const ids = (rows: Array<{ id: string }>) => rows.map((row) => row.id);

/** Stored envelopes that answer `envelopeId` (receipts), counted in the operator's own database. */
async function storedReceipts(envelopeId: string): Promise<number> {
  const rows = await database.withSession((session) =>
    session.query<{ n: number }>('select count(*)::int as n from envelopes where receipt_for = $1', [envelopeId]),
  );
  return rows[0].n;
}

async function envelopeCount(): Promise<number> {
  const rows = await database.withSession((session) =>
    session.query<{ n: number }>('select count(*)::int as n from envelopes'),
  );
  return rows[0].n;
}

/** Sum of `name`'s samples on /metrics whose labels include `labels`. */
async function metric(name: string, labels: Record<string, string> = {}): Promise<number> {
  const reply = await op.client.get('/metrics');
  expect(reply.status).toBe(200);
  let sum = 0;
  for (const line of reply.text.split('\n')) {
    const match = /^([a-z_]+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const sample = Object.fromEntries([...(match[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    if (Object.entries(labels).every(([key, value]) => sample[key] === value)) sum += Number(match[3]);
  }
  return sum;
}

async function status(agent: Agent, envelopeId: string): Promise<Reply> {
  return op.client.get(`/messages/${envelopeId}/status`, agent.token);
}

describe('POST /messages/{id}/receipts (EXTENSIONS.md §2)', () => {
  it('accepts every status from a recipient: 201 with the receipt object; the status route shows each in turn', async () => {
    const { alice, bob } = await op.agents('rc1', 'alice', 'bob');
    const original = await sent(alice, envelope(bob.handle, { subject: 'deploy?' }));
    const posted: any[] = [];
    for (const value of RECEIPT_STATUSES) {
      const body = await receipt(bob, original.id, { status: value });
      expect(Object.keys(body).sort()).toEqual(['created_at', 'envelope_id', 'from', 'id', 'status']);
      expect(body).toMatchObject({ envelope_id: original.id, from: bob.handle, status: value });
      expect(body.created_at).toBeGreaterThan(original.created_at);
      posted.push(body);
      const now = await status(alice, original.id);
      expect(now.status).toBe(200);
      expect(now.body.recipients.map((row: any) => [row.handle, row.status])).toEqual([[bob.handle, value]]);
    }
    expect(new Set(ids(posted)).size).toBe(RECEIPT_STATUSES.length);
    const listed = await op.client.get(`/messages/${original.id}/receipts`, alice.token);
    expect(listed.status).toBe(200);
    expect(listed.body.receipts).toEqual(posted);
  });

  it('keeps a note (up to 2000 characters, counted as characters) in the 201, the listing and the receipt part', async () => {
    const { alice, bob } = await op.agents('rc2', 'alice', 'bob');
    const original = await sent(alice, envelope(bob.handle));
    const short = await receipt(bob, original.id, { status: 'needs_confirmation', note: 'which region?' });
    expect(short.note).toBe('which region?');
    const longest = await receipt(bob, original.id, { status: 'deferred', note: 'n'.repeat(2000) });
    expect(longest.note).toHaveLength(2000);
    // 2000 astral characters are 4000 UTF-16 units: still 2000 characters.
    const astral = '🦜'.repeat(2000);
    const wide = await receipt(bob, original.id, { status: 'deferred', note: astral });
    expect(wide.note).toBe(astral);
    const plain = await sent(
      bob,
      envelope(alice.handle, {
        content_parts: [receiptPart({ envelope_id: original.id, status: 'deferred', note: astral })],
      }),
    );
    const listed = (await op.client.get(`/messages/${original.id}/receipts`, alice.token)).body.receipts;
    expect(listed.map((r: any) => [r.id, r.note])).toEqual([
      [short.id, 'which region?'],
      [longest.id, 'n'.repeat(2000)],
      [wide.id, astral],
      [plain.id, astral],
    ]);
    const body = (await op.client.get(`/messages/${short.id}`, alice.token)).body;
    expect(body.content_parts).toEqual([
      receiptPart({ envelope_id: original.id, status: 'needs_confirmation', note: 'which region?' }),
    ]);
  });

  it('is idempotent with a client id: the retry returns the same 201 body and stores one envelope; another body under that id is 409', async () => {
    const { alice, bob } = await op.agents('rc3', 'alice', 'bob');
    const original = await sent(alice, envelope(bob.handle));
    const id = ulid();
    const counted = await metric('roost_receipts_total', { status: 'applied' });
    const first = await postReceipt(bob, original.id, { status: 'applied', note: 'done', id });
    expect(first.status).toBe(201);
    expect(first.body.id).toBe(id);
    for (let i = 0; i < 3; i++) {
      const again = await postReceipt(bob, original.id, { status: 'applied', note: 'done', id });
      expect(again.status).toBe(201);
      expect(again.text).toBe(first.text);
    }
    expect(await storedReceipts(original.id)).toBe(1);
    expect(ids(await headers(alice))).toEqual([id]);
    expect(ids((await op.client.get(`/messages/${original.id}/receipts`, alice.token)).body.receipts)).toEqual([id]);
    expect(await metric('roost_receipts_total', { status: 'applied' })).toBe(counted + 1);

    expectError(
      await postReceipt(bob, original.id, { status: 'rejected', note: 'done', id }),
      409,
      'RETRY_MISMATCH',
      'another status',
    );
    expectError(
      await postReceipt(bob, original.id, { status: 'applied', note: 'other', id }),
      409,
      'RETRY_MISMATCH',
      'another note',
    );
    expectError(await postReceipt(bob, original.id, { status: 'applied', id }), 409, 'RETRY_MISMATCH', 'no note');
    // The same id answering another envelope is another body too.
    const second = await sent(alice, envelope(bob.handle));
    expectError(
      await postReceipt(bob, second.id, { status: 'applied', note: 'done', id }),
      409,
      'RETRY_MISMATCH',
      'another envelope',
    );
    // An id someone else already used.
    expectError(
      await postReceipt(bob, original.id, { status: 'applied', id: original.id }),
      409,
      'ID_COLLISION',
      "the original's id",
    );
    expect(await storedReceipts(original.id)).toBe(1);
    expect(await storedReceipts(second.id)).toBe(0);
  });

  it('is 404 for a non-recipient, for the sender and for an unknown envelope, 400 for a malformed id; nothing is stored', async () => {
    const { alice, bob, mallory } = await op.agents('rc4', 'alice', 'bob', 'mallory');
    const original = await sent(alice, envelope(bob.handle));
    const before = await envelopeCount();
    const counted = await metric('roost_receipts_total');
    for (const [what, by, id] of [
      ['a non-recipient', mallory, original.id],
      ['the sender', alice, original.id],
      ['an unknown envelope', bob, ulid()],
    ] as const) {
      const reply = await postReceipt(by, id, { status: 'accepted' });
      expectError(reply, 404, 'NOT_FOUND', what);
    }
    expectError(
      await postReceipt(bob, 'not-an-id', { status: 'accepted' }),
      400,
      'INVALID_ENVELOPE_ID',
      'a malformed id',
    );
    // Refusals read the same whether or not the envelope exists.
    const known = await postReceipt(mallory, original.id, { status: 'accepted' });
    const unknown = await postReceipt(mallory, ulid(), { status: 'accepted' });
    expect(known.text).toBe(unknown.text);
    // A receipt goes through the accept path: a sender who blocked the recipient refuses it like any envelope.
    const blocked = await op.client.post('/agents/me/blocks', { handle: bob.handle }, alice.token);
    expect(blocked.status).toBeLessThan(300);
    expectError(
      await postReceipt(bob, original.id, { status: 'accepted' }),
      404,
      'NOT_FOUND',
      'the sender blocked the recipient',
    );
    expect(await envelopeCount()).toBe(before);
    expect(await metric('roost_receipts_total')).toBe(counted);
    expect(await headers(alice)).toEqual([]);
  });

  it('is 400 INVALID_RECEIPT for a bad status or note; nothing is stored', async () => {
    const { alice, bob } = await op.agents('rc5', 'alice', 'bob');
    const original = await sent(alice, envelope(bob.handle));
    const before = await envelopeCount();
    for (const [what, body] of [
      ['no status', {}],
      ['an unknown status', { status: 'maybe' }],
      ['an upper-case status', { status: 'ACCEPTED' }],
      ['a null status', { status: null }],
      ['a numeric status', { status: 1 }],
      ['a 2001-character note', { status: 'accepted', note: 'n'.repeat(2001) }],
      ['a numeric note', { status: 'accepted', note: 7 }],
      ['a null note', { status: 'accepted', note: null }],
    ] as const) {
      expectError(await postReceipt(bob, original.id, body), 400, 'INVALID_RECEIPT', what);
    }
    expectError(
      await postReceipt(bob, original.id, { status: 'accepted', id: 'lower-case-id' }),
      400,
      'INVALID_ENVELOPE_ID',
      'a bad client id',
    );
    expect(await envelopeCount()).toBe(before);
  });
});

describe('a roost.receipt/v1 part through plain POST /messages is validated the same way', () => {
  it('refuses a receipt to someone other than the sender, for an unknown or unreceived envelope, and any bad part with 400 INVALID_RECEIPT', async () => {
    const { alice, bob, carol } = await op.agents('rc6', 'alice', 'bob', 'carol');
    const original = await sent(alice, envelope(bob.handle));
    const carols = await sent(carol, envelope(alice.handle));
    const before = await envelopeCount();
    const counted = await metric('roost_receipts_total');
    const valid = { envelope_id: original.id, status: 'accepted' };
    const part = (data: Record<string, unknown>) => ({ content_parts: [receiptPart(data)] });
    const cases: Array<[string, Agent, Record<string, unknown>]> = [
      ['to a third agent', bob, envelope(carol.handle, part(valid))],
      ['to the sender and a third agent', bob, envelope([alice.handle, carol.handle], part(valid))],
      ['to the sender with a third agent in cc', bob, envelope(alice.handle, { ...part(valid), cc: [carol.handle] })],
      ['to itself', bob, envelope(bob.handle, part(valid))],
      ['by a non-recipient', carol, envelope(alice.handle, part(valid))],
      ['by the sender, to itself', alice, envelope(alice.handle, part(valid))],
      ['for an unknown envelope', bob, envelope(alice.handle, part({ ...valid, envelope_id: ulid() }))],
      ['for an envelope bob did not receive', bob, envelope(carol.handle, part({ ...valid, envelope_id: carols.id }))],
      ['a malformed envelope_id', bob, envelope(alice.handle, part({ ...valid, envelope_id: 'nope' }))],
      ['no envelope_id', bob, envelope(alice.handle, part({ status: 'accepted' }))],
      ['an unknown status', bob, envelope(alice.handle, part({ ...valid, status: 'maybe' }))],
      ['no status', bob, envelope(alice.handle, part({ envelope_id: original.id }))],
      ['a 2001-character note', bob, envelope(alice.handle, part({ ...valid, note: 'n'.repeat(2001) }))],
      ['a numeric note', bob, envelope(alice.handle, part({ ...valid, note: 1 }))],
      ['an extra data key', bob, envelope(alice.handle, part({ ...valid, by: 'me' }))],
      [
        'two receipt parts',
        bob,
        envelope(alice.handle, { content_parts: [receiptPart(valid), receiptPart({ ...valid, status: 'applied' })] }),
      ],
      [
        'a receipt part beside a text part, twice',
        bob,
        envelope(alice.handle, {
          content_parts: [{ type: 'text', text: 'x' }, receiptPart(valid), receiptPart(valid)],
        }),
      ],
    ];
    for (const [what, from, body] of cases) {
      expectError(await op.client.post('/messages', body, from.token), 400, 'INVALID_RECEIPT', what);
    }
    expect(await envelopeCount()).toBe(before);
    expect(await storedReceipts(original.id)).toBe(0);
    expect(await metric('roost_receipts_total')).toBe(counted);
    expect(ids(await headers(alice))).toEqual([carols.id]);
  });

  it('a valid posted receipt is a receipt: header extension, delivery status, receipts listing and metric', async () => {
    const { alice, bob } = await op.agents('rc7', 'alice', 'bob');
    const original = await sent(alice, envelope(bob.handle));
    const counted = await metric('roost_receipts_total', { status: 'rejected' });
    const posted = await sent(
      bob,
      envelope(alice.handle, {
        in_reply_to: original.id,
        content_parts: [receiptPart({ envelope_id: original.id, status: 'rejected', note: 'no' })],
      }),
    );
    const [header] = await headers(alice);
    expect(header).toMatchObject({
      id: posted.id,
      in_reply_to: original.id,
      receipt: { envelope_id: original.id, status: 'rejected' },
    });
    expect((await status(alice, original.id)).body.recipients.map((r: any) => r.status)).toEqual(['rejected']);
    expect((await op.client.get(`/messages/${original.id}/receipts`, alice.token)).body.receipts).toEqual([
      {
        id: posted.id,
        envelope_id: original.id,
        from: bob.handle,
        status: 'rejected',
        note: 'no',
        created_at: posted.created_at,
      },
    ]);
    expect(await metric('roost_receipts_total', { status: 'rejected' })).toBe(counted + 1);
    // A data part with another schema is an ordinary data part, not a receipt.
    const other = await sent(
      bob,
      envelope(alice.handle, {
        content_parts: [{ type: 'data', schema: 'roost.receipt/v2', data: { status: 'maybe' } }],
      }),
    );
    expect((await headers(alice)).find((h) => h.id === other.id)).not.toHaveProperty('receipt');
  });
});

describe('GET /messages/{id}/receipts and /status', () => {
  it('is append-only with the latest receipt winning: every receipt listed oldest first, status shows the latest', async () => {
    const { alice, bob, carol } = await op.agents('rc8', 'alice', 'bob', 'carol');
    const original = await sent(alice, envelope([bob.handle, carol.handle]));
    const sequence = ['deferred', 'needs_confirmation', 'accepted', 'applied'];
    const bobs: any[] = [];
    for (const value of sequence) {
      bobs.push(await receipt(bob, original.id, { status: value }));
      expect((await status(alice, original.id)).body.recipients.map((r: any) => [r.handle, r.status])).toEqual([
        [bob.handle, value],
        [carol.handle, null],
      ]);
    }
    const carols = await receipt(carol, original.id, { status: 'blocked', note: 'policy' });
    const all = (await op.client.get(`/messages/${original.id}/receipts`, alice.token)).body.receipts;
    expect(all).toEqual([...bobs, carols]);
    const createdAt = all.map((r: any) => r.created_at);
    expect(createdAt).toEqual([...createdAt].sort((a, b) => a - b));
    // A recipient lists its own receipts only.
    expect((await op.client.get(`/messages/${original.id}/receipts`, bob.token)).body.receipts).toEqual(bobs);
    expect((await op.client.get(`/messages/${original.id}/receipts`, carol.token)).body.receipts).toEqual([carols]);
    // A later receipt overrides an earlier "final" one: append-only, not a state machine.
    await receipt(bob, original.id, { status: 'rejected' });
    expect((await status(alice, original.id)).body.recipients.map((r: any) => r.status)).toEqual([
      'rejected',
      'blocked',
    ]);
    expect((await op.client.get(`/messages/${original.id}/receipts`, alice.token)).body.receipts).toHaveLength(
      sequence.length + 2,
    );
  });

  it('status: the sender sees every recipient in recipient order (to then cc, as in the 202), a recipient only its own row, anyone else 404', async () => {
    const { alice, bob, carol, dave, eve } = await op.agents('rc9', 'alice', 'bob', 'carol', 'dave', 'eve');
    // Mailboxes of different lengths: rows still follow the envelope's recipients, not entry order.
    for (let i = 0; i < 3; i++) await sent(eve, envelope(bob.handle));
    const original = await sent(alice, envelope([bob.handle, carol.handle], { cc: [dave.handle, bob.handle] }));
    const all = await status(alice, original.id);
    expect(all.status).toBe(200);
    expect(all.body.envelope_id).toBe(original.id);
    expect(all.body.recipients.map((r: any) => r.handle)).toEqual([bob.handle, carol.handle, dave.handle]);
    for (const recipient of [bob, carol, dave]) {
      const own = await status(recipient, original.id);
      expect(own.status).toBe(200);
      expect(own.body).toEqual({
        envelope_id: original.id,
        recipients: [all.body.recipients.find((r: any) => r.handle === recipient.handle)],
      });
    }
    const unknown = ulid();
    for (const [what, who, id] of [
      ['a third party', eve, original.id],
      ['an unknown envelope, the sender', alice, unknown],
      ['an unknown envelope, a third party', eve, unknown],
    ] as const) {
      expectError(await status(who, id), 404, 'NOT_FOUND', `status: ${what}`);
      expectError(await op.client.get(`/messages/${id}/receipts`, who.token), 404, 'NOT_FOUND', `receipts: ${what}`);
    }
    expect((await status(eve, original.id)).text).toBe((await status(eve, unknown)).text);
    expectError(await status(alice, 'nope'), 400, 'INVALID_ENVELOPE_ID', 'status: malformed id');
    expectError(
      await op.client.get('/messages/nope/receipts', alice.token),
      400,
      'INVALID_ENVELOPE_ID',
      'receipts: malformed id',
    );
    expectError(await op.client.get(`/messages/${original.id}/status`), 401, 'UNAUTHORIZED', 'no bearer');
    // A self-send: the sender is also a recipient and sees every row.
    const self = await sent(alice, envelope([alice.handle, bob.handle]));
    expect((await status(alice, self.id)).body.recipients.map((r: any) => r.handle)).toEqual([
      alice.handle,
      bob.handle,
    ]);
    expect((await status(bob, self.id)).body.recipients.map((r: any) => r.handle)).toEqual([bob.handle]);
  });

  it('status: read and updated_at follow the read and the latest receipt; a receipt does not mark read, the sender reading marks nothing', async () => {
    const { alice, bob, carol } = await op.agents('rc10', 'alice', 'bob', 'carol');
    const original = await sent(alice, envelope([bob.handle, carol.handle]));
    const rows = async () => (await status(alice, original.id)).body.recipients as any[];
    expect(await rows()).toEqual([
      { handle: bob.handle, read: false, status: null, updated_at: original.created_at },
      { handle: carol.handle, read: false, status: null, updated_at: original.created_at },
    ]);

    expect((await op.client.get(`/messages/${original.id}`, alice.token)).status).toBe(200);
    expect((await rows()).map((r) => r.read)).toEqual([false, false]);

    const bobsReceipt = await receipt(bob, original.id, { status: 'accepted' });
    const afterReceipt = await rows();
    expect(afterReceipt[0]).toEqual({
      handle: bob.handle,
      read: false,
      status: 'accepted',
      updated_at: bobsReceipt.created_at,
    });
    expect(afterReceipt[1].updated_at).toBe(original.created_at);

    const beforeRead = Date.now();
    expect((await op.client.post('/mailbox/read', { ids: [original.id] }, carol.token)).status).toBe(200);
    const afterRead = Date.now();
    const carolRow = (await rows())[1];
    expect(carolRow.read).toBe(true);
    expect(carolRow.status).toBeNull();
    expect(carolRow.updated_at).toBeGreaterThanOrEqual(beforeRead);
    expect(carolRow.updated_at).toBeLessThanOrEqual(afterRead);
    // Carol's own view says the same.
    expect((await status(carol, original.id)).body.recipients).toEqual([carolRow]);

    // Bob reads after his receipt: read flips, updated_at moves to the read.
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect((await op.client.get(`/messages/${original.id}`, bob.token)).status).toBe(200);
    const bobRow = (await rows())[0];
    expect(bobRow.read).toBe(true);
    expect(bobRow.status).toBe('accepted');
    expect(bobRow.updated_at).toBeGreaterThan(bobsReceipt.created_at);
  });
});

describe('receipts are ordinary envelopes', () => {
  it('land in the sender’s mailbox with in_reply_to and the receipt header, are pushed, and a plain ASMTP client sees ordinary data envelopes', async () => {
    const { alice, bob } = await op.agents('rc11', 'alice', 'bob');
    const original = await sent(alice, envelope(bob.handle, { subject: 'ship it?' }));
    const socket = await connect(op.url, { token: alice.token });
    sockets.push(socket);
    const bobSocket = await connect(op.url, { token: bob.token });
    sockets.push(bobSocket);

    const posted = await receipt(bob, original.id, { status: 'accepted', note: 'on it' });
    await socket.until(() => socket.ids.includes(posted.id), 5_000, 'the receipt frame');
    const frame = socket.notifies.find((f) => f.id === posted.id);
    const raw = socket.raw.find((text) => JSON.parse(text).id === posted.id)!;
    expect(Object.keys(frame)).toEqual([
      'op',
      'id',
      'from',
      'to',
      'in_reply_to',
      'type_hint',
      'size_hint',
      'created_at',
      'date_ms',
      'receipt',
    ]);
    expect(frame).toMatchObject({
      op: 'envelope.notify',
      id: posted.id,
      from: bob.handle,
      to: [alice.handle],
      in_reply_to: original.id,
      type_hint: 'data',
      created_at: posted.created_at,
      receipt: { envelope_id: original.id, status: 'accepted' },
    });
    expect(Number.isInteger(frame.size_hint)).toBe(true);
    expect(Number.isInteger(frame.date_ms)).toBe(true);
    // What the ASMTP CLI requires of a frame (ASMTP.md §6.3), and nothing it must never see.
    expect([
      typeof frame.id,
      typeof frame.from,
      Array.isArray(frame.to),
      typeof frame.type_hint,
      typeof frame.created_at,
      typeof frame.date_ms,
    ]).toEqual(['string', 'string', true, 'string', 'number', 'number']);
    for (const key of [
      'direction',
      'unread',
      'references',
      'monitor',
      'received_ms',
      'content_parts',
      'flags',
      'schedule_id',
    ]) {
      expect(frame).not.toHaveProperty(key);
    }
    expect(Object.keys(frame).filter((key) => !ASMTP_HEADER_KEYS.includes(key))).toEqual(['receipt']);

    // The listing row carries the frame's fields, in the listing key order (ASMTP.md §3.5), Roost's `receipt` last.
    const listing = await op.client.get('/mailbox', alice.token);
    expect(
      (await op.client.get('/mailbox?unread=true', alice.token)).body.envelope_headers.map((h: any) => h.id),
    ).toEqual([posted.id]);
    const row = listing.body.envelope_headers.find((h: any) => h.id === posted.id);
    expect(row).toEqual(frame);
    expect(Object.keys(row)).toEqual([
      'op',
      'id',
      'from',
      'to',
      'type_hint',
      'created_at',
      'date_ms',
      'in_reply_to',
      'size_hint',
      'receipt',
    ]);
    expect(JSON.parse(raw)).toEqual(row);
    expect(ids(listing.body.envelope_headers)).toEqual([posted.id]);
    expect(Object.keys(row).filter((key) => !ASMTP_HEADER_KEYS.includes(key))).toEqual(['receipt']);

    // The body is a normal stored envelope with one data part.
    const body = await op.client.get(`/messages/${posted.id}`, alice.token);
    expect(body.status).toBe(200);
    expect(Object.keys(body.body).every((key) => ASMTP_BODY_KEYS.includes(key))).toBe(true);
    expect(body.body).toEqual({
      id: posted.id,
      from: bob.handle,
      to: [alice.handle],
      date_ms: frame.date_ms,
      content_parts: [
        { type: 'data', schema: SCHEMA, data: { envelope_id: original.id, status: 'accepted', note: 'on it' } },
      ],
      in_reply_to: original.id,
    });
    // Batch GET shows the same body.
    const batch = await op.client.get(`/messages?ids=${posted.id}`, alice.token);
    expect(batch.status).toBe(200);
    expect(JSON.stringify(batch.body)).toContain(body.text);

    // The author sees it in its out feed; no frame goes to the author (it is not a recipient).
    const out = (await headers(bob, 'out')).find((h) => h.id === posted.id);
    expect(out).toEqual({ ...frame, direction: 'out' });
    expect(bobSocket.ids).not.toContain(posted.id);
    // Read state is ASMTP's: posting the receipt did not mark bob's entry read.
    expect(
      (await op.client.get('/mailbox?unread=true', bob.token)).body.envelope_headers.map((h: any) => h.id),
    ).toEqual([original.id]);
  });

  it('a receipt through plain POST /messages is pushed with the receipt extension too', async () => {
    const { alice, bob } = await op.agents('rc12', 'alice', 'bob');
    const original = await sent(alice, envelope(bob.handle));
    const socket = await connect(op.url, { token: alice.token });
    sockets.push(socket);
    const posted = await sent(
      bob,
      envelope(alice.handle, { content_parts: [receiptPart({ envelope_id: original.id, status: 'blocked' })] }),
    );
    await socket.until(() => socket.ids.includes(posted.id), 5_000, 'the receipt frame');
    const frame = socket.notifies.find((f) => f.id === posted.id);
    expect(Object.keys(frame)).toEqual([
      'op',
      'id',
      'from',
      'to',
      'type_hint',
      'size_hint',
      'created_at',
      'date_ms',
      'receipt',
    ]);
    expect(frame.receipt).toEqual({ envelope_id: original.id, status: 'blocked' });
  });

  it('roost_receipts_total counts stored receipts by status', async () => {
    const { alice, bob } = await op.agents('rc13', 'alice', 'bob');
    const original = await sent(alice, envelope(bob.handle));
    const before = Object.fromEntries(
      await Promise.all(
        RECEIPT_STATUSES.map(async (s) => [s, await metric('roost_receipts_total', { status: s })] as const),
      ),
    );
    await receipt(bob, original.id, { status: 'accepted' });
    await receipt(bob, original.id, { status: 'applied' });
    await receipt(bob, original.id, { status: 'applied' });
    expectError(await postReceipt(bob, original.id, { status: 'maybe' }), 400, 'INVALID_RECEIPT');
    for (const s of RECEIPT_STATUSES) {
      const expected = before[s] + (s === 'accepted' ? 1 : s === 'applied' ? 2 : 0);
      expect([s, await metric('roost_receipts_total', { status: s })]).toEqual([s, expected]);
    }
    const exposition = (await op.client.get('/metrics')).text;
    const labels = [...exposition.matchAll(/^roost_receipts_total\{([^}]*)\}/gm)].map((m) => m[1]);
    for (const label of labels)
      expect(label).toMatch(/^status="(accepted|rejected|deferred|needs_confirmation|applied|blocked)"$/);
  });
});
