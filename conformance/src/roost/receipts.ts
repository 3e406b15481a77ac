import { caps } from '../caps';
import { eq, expectError, expectStatus, hasNoKey, ok } from '../assert';
import type { T } from '../runner';
import { ulid } from '#client';
import { envelope } from '../wire';
import { unread } from '../asmtp/helpers';
import { roost } from './quirks';

/** EXTENSIONS.md §2: receipts (decision and action states), separate from read state. */

const receiptTest = (id: string, title: string, run: (t: T) => Promise<void>) =>
  roost(id, title, async (t) => {
    await t.need(caps.receipts(t.run));
    await run(t);
  });

const SCHEMA = 'roost.receipt/v1';

receiptTest(
  'receipts.post',
  'POST /messages/{id}/receipts by a recipient → 201; the receipt is an envelope to the sender with in_reply_to, the receipt part, and receipt in its header and frame; read state is untouched',
  async (t) => {
    const { alice, bob } = await t.agents('alice', 'bob');
    const original = await t.sent(alice, envelope(bob.handle, { subject: 'please deploy' }));
    const aliceSocket = await t.listen(alice);
    const reply = await t.http.post(
      `/messages/${original.id}/receipts`,
      { status: 'accepted', note: 'on it' },
      bob.token,
    );
    expectStatus(reply, 201);
    eq(
      { ...reply.body, id: 0, created_at: 0 },
      { id: 0, envelope_id: original.id, from: bob.handle, status: 'accepted', note: 'on it', created_at: 0 },
      'the receipt object',
    );
    const frame = await aliceSocket.notifyOf(reply.body.id, t.options.frameTimeoutMs);
    eq(frame.receipt, { envelope_id: original.id, status: 'accepted' }, 'receipt in the push frame');
    eq(frame.in_reply_to, original.id, 'in_reply_to of the frame');
    const header = (await t.http.get('/mailbox', alice.token)).body.envelope_headers.find(
      (h: { id: string }) => h.id === reply.body.id,
    );
    eq(header, frame, 'the listing header equals the frame');
    const body = (await t.http.get(`/messages/${reply.body.id}`, alice.token)).body;
    eq([body.from, body.to, body.in_reply_to], [bob.handle, [alice.handle], original.id], 'the receipt envelope');
    eq(
      body.content_parts,
      [{ type: 'data', schema: SCHEMA, data: { envelope_id: original.id, status: 'accepted', note: 'on it' } }],
      'the receipt part',
    );
    eq(await unread(t, bob), [original.id], 'bob’s entry is still unread (a receipt is not a read)');
  },
);

receiptTest(
  'receipts.idempotent',
  'a receipt with a client id is idempotent: the same retry → the same receipt; another status under that id → 409',
  async (t) => {
    const { alice, bob } = await t.agents('alice', 'bob');
    const original = await t.sent(alice, envelope(bob.handle));
    const id = ulid();
    const first = await t.http.post(`/messages/${original.id}/receipts`, { status: 'deferred', id }, bob.token);
    expectStatus(first, 201);
    eq(first.body.id, id, 'the receipt id');
    const again = await t.http.post(`/messages/${original.id}/receipts`, { status: 'deferred', id }, bob.token);
    expectStatus(again, 201, 'the retry');
    eq(again.body, first.body, 'the retried receipt');
    expectError(
      await t.http.post(`/messages/${original.id}/receipts`, { status: 'applied', id }, bob.token),
      409,
      'RETRY_MISMATCH',
      'another status',
    );
    const receipts = (await t.http.get(`/messages/${original.id}/receipts`, alice.token)).body.receipts;
    eq(
      receipts.map((r: { id: string }) => r.id),
      [id],
      'receipts listed once',
    );
  },
);

receiptTest(
  'receipts.refused',
  'receipts are refused: a bad status or a note over 2000 chars (400), a non-recipient or the sender (404), a malformed id (400)',
  async (t) => {
    const { alice, bob, mallory } = await t.agents('alice', 'bob', 'mallory');
    const original = await t.sent(alice, envelope(bob.handle));
    const path = `/messages/${original.id}/receipts`;
    expectError(await t.http.post(path, { status: 'maybe' }, bob.token), 400, 'INVALID_RECEIPT', 'status maybe');
    expectError(await t.http.post(path, {}, bob.token), 400, 'INVALID_RECEIPT', 'no status');
    expectError(
      await t.http.post(path, { status: 'accepted', note: 'n'.repeat(2001) }, bob.token),
      400,
      'INVALID_RECEIPT',
      'a 2001-char note',
    );
    expectError(await t.http.post(path, { status: 'accepted' }, mallory.token), 404, 'NOT_FOUND', 'a non-recipient');
    expectError(await t.http.post(path, { status: 'accepted' }, alice.token), 404, 'NOT_FOUND', 'the sender');
    expectError(
      await t.http.post(`/messages/${ulid()}/receipts`, { status: 'accepted' }, bob.token),
      404,
      'NOT_FOUND',
      'an unknown envelope',
    );
    expectError(
      await t.http.post('/messages/nope/receipts', { status: 'accepted' }, bob.token),
      400,
      'INVALID_ENVELOPE_ID',
      'a malformed id',
    );
    expectStatus(
      await t.http.post(path, { status: 'accepted', note: 'n'.repeat(2000) }, bob.token),
      201,
      'a 2000-char note',
    );
  },
);

receiptTest(
  'receipts.plain-post',
  'a plain POST /messages carrying a roost.receipt/v1 part is validated the same way (400 INVALID_RECEIPT) and, when valid, is a receipt',
  async (t) => {
    const { alice, bob, carol } = await t.agents('alice', 'bob', 'carol');
    const original = await t.sent(alice, envelope(bob.handle));
    const part = (data: Record<string, unknown>) => ({ content_parts: [{ type: 'data', schema: SCHEMA, data }] });
    expectError(
      await t.send(bob, envelope(alice.handle, part({ envelope_id: original.id, status: 'maybe' }))),
      400,
      'INVALID_RECEIPT',
      'a bad status',
    );
    expectError(
      await t.send(carol, envelope(alice.handle, part({ envelope_id: original.id, status: 'accepted' }))),
      400,
      'INVALID_RECEIPT',
      'from a non-recipient',
    );
    expectError(
      await t.send(bob, envelope(carol.handle, part({ envelope_id: original.id, status: 'accepted' }))),
      400,
      'INVALID_RECEIPT',
      'to someone other than the sender',
    );
    const valid = await t.sent(
      bob,
      envelope(alice.handle, { ...part({ envelope_id: original.id, status: 'rejected' }), in_reply_to: original.id }),
    );
    const header = (await t.http.get('/mailbox', alice.token)).body.envelope_headers.find(
      (h: { id: string }) => h.id === valid.id,
    );
    eq(header?.receipt, { envelope_id: original.id, status: 'rejected' }, 'the header of a posted receipt');
    const status = await t.http.get(`/messages/${original.id}/status`, alice.token);
    eq(
      status.body.recipients.map((r: { status: string }) => r.status),
      ['rejected'],
      'the delivery status',
    );
  },
);

receiptTest(
  'receipts.list-and-status',
  'GET /messages/{id}/receipts (oldest first; a recipient sees its own) and /status (read, latest status, per recipient); others 404',
  async (t) => {
    const { alice, bob, carol, dave } = await t.agents('alice', 'bob', 'carol', 'dave');
    const original = await t.sent(alice, envelope([bob.handle, carol.handle]));
    const post = (status: string) => t.http.post(`/messages/${original.id}/receipts`, { status }, bob.token);
    const deferred = (await post('deferred')).body;
    const applied = (await post('applied')).body;
    expectStatus(await t.http.get(`/messages/${original.id}`, carol.token), 200, 'carol reads it');
    const all = await t.http.get(`/messages/${original.id}/receipts`, alice.token);
    expectStatus(all, 200);
    eq(
      all.body.receipts.map((r: { id: string; status: string }) => [r.id, r.status]),
      [
        [deferred.id, 'deferred'],
        [applied.id, 'applied'],
      ],
      'the sender sees every receipt, oldest first',
    );
    eq((await t.http.get(`/messages/${original.id}/receipts`, bob.token)).body.receipts.length, 2, 'bob sees his own');
    eq((await t.http.get(`/messages/${original.id}/receipts`, carol.token)).body, { receipts: [] }, 'carol has none');
    expectError(await t.http.get(`/messages/${original.id}/receipts`, dave.token), 404, 'NOT_FOUND', 'a non-party');
    const status = await t.http.get(`/messages/${original.id}/status`, alice.token);
    expectStatus(status, 200);
    eq(status.body.envelope_id, original.id, 'envelope_id');
    const rows = status.body.recipients.map((r: any) => [r.handle, r.read, r.status]);
    eq(
      rows,
      [
        [bob.handle, false, 'applied'],
        [carol.handle, true, null],
      ],
      'per-recipient status (latest receipt wins)',
    );
    const own = await t.http.get(`/messages/${original.id}/status`, carol.token);
    eq(
      own.body.recipients.map((r: { handle: string }) => r.handle),
      [carol.handle],
      'a recipient sees its own row',
    );
    expectError(await t.http.get(`/messages/${original.id}/status`, dave.token), 404, 'NOT_FOUND', 'a non-party');
    for (const row of status.body.recipients) hasNoKey(row, 'note');
    ok(
      status.body.recipients.every((r: { updated_at: number }) => typeof r.updated_at === 'number'),
      'updated_at',
    );
  },
);
