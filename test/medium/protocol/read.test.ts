import { ulid } from '#domain';
import { envelope, startOperator, type TestOperator } from '../../support/operator';

/**
 * ASMTP.md §10 items 39–44 (reading stored envelopes) and 56–62 (read state), plus the Roost
 * sides of §9.2 quirks 2 and 3 (EXTENSIONS.md): a sender may fetch its own envelope without
 * marking anything read, and POST /mailbox/read lists only ids that went unread → read, once.
 */
describe('reading envelopes and read state', () => {
  let op: TestOperator;
  let owners = 0;

  beforeAll(async () => {
    op = await startOperator();
  });
  afterAll(async () => op?.close());

  /** Fresh agents (policy open) under an owner no other test uses. */
  const agents = <N extends string>(...names: N[]) => op.agents(`read${++owners}`, ...names);

  async function send(token: string, to: string | string[], fields: Record<string, unknown> = {}): Promise<string> {
    const reply = await op.client.post('/messages', envelope(to, fields), token);
    expect(reply.status).toBe(202);
    return reply.body.id as string;
  }

  async function ids(token: string, query: string): Promise<string[]> {
    const reply = await op.client.get(`/mailbox?${query}`, token);
    expect(reply.status).toBe(200);
    return reply.body.envelope_headers.map((header: { id: string }) => header.id);
  }

  const unreadIds = (token: string) => ids(token, 'unread=true');
  const readIds = (token: string) => ids(token, 'unread=false');

  function expectError(reply: { status: number; body: any }, status: number, code: string): void {
    expect({ status: reply.status, code: reply.body?.error?.code }).toEqual({ status, code });
  }

  describe('peek=true (Roost extension, the MCP read tool)', () => {
    it('returns the bodies without marking them read; other values are INVALID_QUERY and mark nothing', async () => {
      const { alice, bob } = await agents('alice', 'bob');
      const one = await send(alice.token, bob.handle);
      const two = await send(alice.token, bob.handle);
      expect((await op.client.get(`/messages/${one}?peek=true`, bob.token)).body.id).toBe(one);
      const batch = await op.client.get(`/messages?ids=${one},${two}&peek=true`, bob.token);
      expect(batch.body.envelopes.map((e: { id: string }) => e.id)).toEqual([one, two]);
      expectError(await op.client.get(`/messages/${one}?peek=yes`, bob.token), 400, 'INVALID_QUERY');
      expectError(await op.client.get(`/messages?ids=${one}&peek=1`, bob.token), 400, 'INVALID_QUERY');
      expect(await unreadIds(bob.token)).toEqual([one, two]);
      expect((await op.client.get(`/messages/${one}?peek=false`, bob.token)).status).toBe(200);
      expect(await unreadIds(bob.token)).toEqual([two]);
    });
  });

  describe('GET /messages/{id} and batch', () => {
    it('#39 a recipient gets the stored body: id, stamped from, to, date_ms, content_parts; optional fields only when given', async () => {
      const { alice, bob, carol } = await agents('alice', 'bob', 'carol');
      const minimal = envelope(bob.handle, {
        date_ms: 1_747_000_000_000,
        subject: null,
        monitor: null,
        references: [],
      });
      expect((await op.client.post('/messages', minimal, alice.token)).status).toBe(202);

      const plain = await op.client.get(`/messages/${minimal.id}`, bob.token);
      expect(plain.status).toBe(200);
      expect(plain.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(plain.body).toEqual({
        id: minimal.id,
        from: alice.handle,
        to: [bob.handle],
        date_ms: 1_747_000_000_000,
        content_parts: [{ type: 'text', text: 'hello' }],
      });
      expect(Object.keys(plain.body)).toEqual(['id', 'from', 'to', 'date_ms', 'content_parts']);

      const parent = ulid();
      const full = envelope([bob.handle, bob.handle], {
        cc: [carol.handle],
        subject: '',
        in_reply_to: parent,
        references: [ulid(), parent],
        monitor: 'mon_read39',
        content_parts: [
          { type: 'text', text: 'see data' },
          { type: 'data', data: { k: 1 }, schema: 'x/v1', extra: true },
          { type: 'image', url: 'https://example.com/a.png', mime_type: 'image/png' },
        ],
        unknown_field: 'dropped',
      });
      expect((await op.client.post('/messages', full, alice.token)).status).toBe(202);
      for (const reader of [bob, carol]) {
        const reply = await op.client.get(`/messages/${full.id}`, reader.token);
        expect(reply.status).toBe(200);
        expect(Object.keys(reply.body)).toEqual([
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
        ]);
        expect(reply.body).toEqual({
          id: full.id,
          from: alice.handle,
          to: [bob.handle, bob.handle],
          date_ms: full.date_ms,
          content_parts: full.content_parts,
          cc: [carol.handle],
          subject: '',
          in_reply_to: parent,
          references: full.references,
          monitor: 'mon_read39',
        });
      }
    });

    it('#40 stored bodies carry no created_at, received_ms, type_hint, size_hint or file_id', async () => {
      const { alice, bob } = await agents('alice', 'bob');
      const png = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex');
      const boundary = 'read40boundary';
      const upload = await op.client.request('POST', '/files', {
        token: alice.token,
        headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
        body: Buffer.concat([
          Buffer.from(
            `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="x.png"\r\nContent-Type: image/png\r\n\r\n`,
          ),
          png,
          Buffer.from(`\r\n--${boundary}--\r\n`),
        ]),
      });
      expect(upload.status).toBe(201);
      const id = await send(alice.token, bob.handle, {
        content_parts: [
          { type: 'text', text: 'with a file' },
          { type: 'image', file_id: upload.body.id, mime_type: 'image/png' },
        ],
      });
      const forbidden = ['created_at', 'received_ms', 'type_hint', 'size_hint', 'file_id'];
      const single = await op.client.get(`/messages/${id}`, bob.token);
      const batch = await op.client.get(`/messages?ids=${id}`, bob.token);
      for (const body of [single.body, batch.body.envelopes[0]]) {
        expect(body.id).toBe(id);
        for (const key of forbidden) {
          expect(body).not.toHaveProperty(key);
          for (const part of body.content_parts) expect(part).not.toHaveProperty(key);
        }
      }
      for (const key of forbidden) expect(single.text).not.toContain(`"${key}"`);
    });

    it('#41 a non-recipient and an unknown id get the same 404; a malformed id gets 400 INVALID_ENVELOPE_ID', async () => {
      const { alice, bob, mallory } = await agents('alice', 'bob', 'mallory');
      const id = await send(alice.token, bob.handle);

      const stranger = await op.client.get(`/messages/${id}`, mallory.token);
      const unknown = await op.client.get(`/messages/${ulid()}`, bob.token);
      for (const reply of [stranger, unknown]) {
        expect(reply.status).toBe(404);
        expect(reply.body).toEqual({ error: { code: 'NOT_FOUND', message: 'not found' } });
      }
      expect(stranger.text).toBe(unknown.text);

      for (const bad of [
        id.toLowerCase(),
        id.slice(0, 25),
        `02${id.slice(2)}`,
        `${id}0`,
        'not-an-id',
        `01${'U'.repeat(24)}`,
      ]) {
        expectError(await op.client.get(`/messages/${encodeURIComponent(bad)}`, bob.token), 400, 'INVALID_ENVELOPE_ID');
      }
      // The refused reads marked nothing.
      expect(await unreadIds(bob.token)).toEqual([id]);
    });

    it('#42 GET /messages?ids=B,A returns B then A, duplicates collapsed, unentitled and unknown ids omitted with 200', async () => {
      const { alice, bob, carol } = await agents('alice', 'bob', 'carol');
      const a = await send(alice.token, bob.handle, { subject: 'A' });
      const b = await send(alice.token, bob.handle, { subject: 'B' });
      const carolOnly = await send(alice.token, carol.handle);

      const ordered = await op.client.get(`/messages?ids=${b},${a}`, bob.token);
      expect(ordered.status).toBe(200);
      expect(ordered.body.envelopes.map((e: { id: string }) => e.id)).toEqual([b, a]);

      const mixed = await op.client.get(`/messages?ids=${a},${carolOnly},${b},${a},${ulid()},${b}`, bob.token);
      expect(mixed.status).toBe(200);
      expect(mixed.body.envelopes.map((e: { id: string }) => e.id)).toEqual([a, b]);
      expect(mixed.body.envelopes[0]).toEqual((await op.client.get(`/messages/${a}`, bob.token)).body);

      const none = await op.client.get(`/messages?ids=${carolOnly}`, bob.token);
      expect(none.status).toBe(200);
      expect(none.body).toEqual({ envelopes: [] });
      // Each element is percent-decoded; an encoded comma is not a separator.
      const decoded = await op.client.get(`/messages?ids=%30${b.slice(1)},${a}`, bob.token);
      expect(decoded.body.envelopes.map((e: { id: string }) => e.id)).toEqual([b, a]);
      expectError(await op.client.get(`/messages?ids=${a}%2C${b}`, bob.token), 400, 'INVALID_ENVELOPE_ID');
      // Bob's batch did not touch Carol's entry.
      expect(await unreadIds(carol.token)).toEqual([carolOnly]);
    });

    it('#43 GET /messages without ids, with two ids params, or with 101 ids returns 400 INVALID_QUERY', async () => {
      const { alice, bob } = await agents('alice', 'bob');
      const id = await send(alice.token, bob.handle);
      const hundred = Array.from({ length: 100 }, () => ulid());

      expectError(await op.client.get('/messages', bob.token), 400, 'INVALID_QUERY');
      expectError(await op.client.get('/messages?ids=', bob.token), 400, 'INVALID_QUERY');
      expectError(await op.client.get(`/messages?limit=5`, bob.token), 400, 'INVALID_QUERY');
      expectError(await op.client.get(`/messages?ids=${id}&ids=${id}`, bob.token), 400, 'INVALID_QUERY');
      expectError(await op.client.get(`/messages?ids=${[id, ...hundred].join(',')}`, bob.token), 400, 'INVALID_QUERY');
      // 101 elements count before de-duplication.
      expectError(
        await op.client.get(`/messages?ids=${Array(101).fill(id).join(',')}`, bob.token),
        400,
        'INVALID_QUERY',
      );
      expect(await unreadIds(bob.token)).toEqual([id]);

      const limit = await op.client.get(`/messages?ids=${[id, ...hundred.slice(1)].join(',')}`, bob.token);
      expect(limit.status).toBe(200);
      expect(limit.body.envelopes.map((e: { id: string }) => e.id)).toEqual([id]);
    });

    it('#44 GET /messages?ids=A,,B (or a trailing comma) returns 400 INVALID_ENVELOPE_ID and marks nothing', async () => {
      const { alice, bob } = await agents('alice', 'bob');
      const a = await send(alice.token, bob.handle);
      const b = await send(alice.token, bob.handle);

      expectError(await op.client.get(`/messages?ids=${a},,${b}`, bob.token), 400, 'INVALID_ENVELOPE_ID');
      expectError(await op.client.get(`/messages?ids=${a},`, bob.token), 400, 'INVALID_ENVELOPE_ID');
      expectError(await op.client.get(`/messages?ids=${a},${b.toLowerCase()}`, bob.token), 400, 'INVALID_ENVELOPE_ID');
      // The count and single-parameter rules come before element syntax.
      expectError(
        await op.client.get(`/messages?ids=${Array(101).fill('bad').join(',')}`, bob.token),
        400,
        'INVALID_QUERY',
      );
      expectError(await op.client.get('/messages?ids=bad&ids=bad', bob.token), 400, 'INVALID_QUERY');
      expect((await op.client.get(`/messages?ids=${a},,${b}`)).status).toBe(401);
      expect(await unreadIds(bob.token)).toEqual([a, b]);
    });

    it('Roost: the sender may GET its own envelope, single and batch, and that marks nothing read', async () => {
      const { alice, bob, carol } = await agents('alice', 'bob', 'carol');
      const body = envelope(bob.handle, { cc: [carol.handle], subject: 'mine' });
      expect((await op.client.post('/messages', body, alice.token)).status).toBe(202);

      const single = await op.client.get(`/messages/${body.id}`, alice.token);
      expect(single.status).toBe(200);
      expect(single.body).toMatchObject({ id: body.id, from: alice.handle, to: [bob.handle], cc: [carol.handle] });
      const batch = await op.client.get(`/messages?ids=${body.id}`, alice.token);
      expect(batch.body.envelopes.map((e: { id: string }) => e.id)).toEqual([body.id]);
      expect(batch.body.envelopes[0]).toEqual(single.body);

      // Nobody's read state moved, and the sender still has no mailbox entry for it.
      expect(await unreadIds(bob.token)).toEqual([body.id]);
      expect(await unreadIds(carol.token)).toEqual([body.id]);
      expect(await ids(alice.token, '')).toEqual([]);
      const out = await op.client.get('/mailbox?direction=both', alice.token);
      expect(out.body.envelope_headers).toEqual([expect.objectContaining({ id: body.id, direction: 'out' })]);
      expect(out.body.envelope_headers[0]).not.toHaveProperty('unread');

      // POST /mailbox/read by the sender lists nothing: the id is not in its mailbox.
      const marked = await op.client.post('/mailbox/read', { ids: [body.id] }, alice.token);
      expect(marked.status).toBe(200);
      expect(marked.body).toEqual({ read: [] });
      expect(await unreadIds(bob.token)).toEqual([body.id]);
    });

    it('Roost: a sender fetching a self-addressed envelope marks only its own entry read', async () => {
      const { alice, bob } = await agents('alice', 'bob');
      const id = await send(alice.token, [alice.handle, bob.handle]);
      expect(await unreadIds(alice.token)).toEqual([id]);
      expect((await op.client.get(`/messages/${id}`, alice.token)).status).toBe(200);
      expect(await unreadIds(alice.token)).toEqual([]);
      expect(await readIds(alice.token)).toEqual([id]);
      expect(await unreadIds(bob.token)).toEqual([id]);
    });
  });

  describe('read state', () => {
    it('#56 a new mailbox entry is unread: listed under unread=true and not under unread=false', async () => {
      const { alice, bob, carol } = await agents('alice', 'bob', 'carol');
      const id = await send(alice.token, bob.handle, { cc: [carol.handle] });
      for (const reader of [bob, carol]) {
        expect(await unreadIds(reader.token)).toEqual([id]);
        expect(await readIds(reader.token)).toEqual([]);
        const both = await op.client.get('/mailbox?direction=both', reader.token);
        expect(both.body.envelope_headers).toEqual([expect.objectContaining({ id, direction: 'in', unread: true })]);
      }
    });

    it('#57 GET /messages/{id} marks the entry read: it leaves unread=true and appears under unread=false', async () => {
      const { alice, bob } = await agents('alice', 'bob');
      const first = await send(alice.token, bob.handle);
      const second = await send(alice.token, bob.handle);

      expect((await op.client.get(`/messages/${first}`, bob.token)).status).toBe(200);
      expect(await unreadIds(bob.token)).toEqual([second]);
      expect(await readIds(bob.token)).toEqual([first]);
      const both = await op.client.get('/mailbox?direction=both', bob.token);
      expect(both.body.envelope_headers.map((h: { id: string; unread: boolean }) => [h.id, h.unread])).toEqual([
        [first, false],
        [second, true],
      ]);

      // Fetching again keeps it read; it never becomes unread again.
      expect((await op.client.get(`/messages/${first}`, bob.token)).status).toBe(200);
      expect(await readIds(bob.token)).toEqual([first]);
    });

    it('#58 batch GET /messages?ids= marks every returned envelope read, and only those', async () => {
      const { alice, bob, carol } = await agents('alice', 'bob', 'carol');
      const a = await send(alice.token, bob.handle);
      const b = await send(alice.token, bob.handle);
      const c = await send(alice.token, bob.handle);
      const notBobs = await send(alice.token, carol.handle);

      const reply = await op.client.get(`/messages?ids=${c},${a},${notBobs}`, bob.token);
      expect(reply.body.envelopes.map((e: { id: string }) => e.id)).toEqual([c, a]);
      expect(await unreadIds(bob.token)).toEqual([b]);
      expect(await readIds(bob.token)).toEqual([a, c]);
      expect(await unreadIds(carol.token)).toEqual([notBobs]);
    });

    it('#59 POST /mailbox/read returns 200 {read} with owned ids that were unread, never ids outside the mailbox', async () => {
      const { alice, bob, carol } = await agents('alice', 'bob', 'carol');
      const a = await send(alice.token, bob.handle);
      const b = await send(alice.token, bob.handle);
      const carols = await send(alice.token, carol.handle);
      const unknown = ulid();

      const reply = await op.client.post('/mailbox/read', { ids: [b, carols, unknown, a] }, bob.token);
      expect(reply.status).toBe(200);
      expect(reply.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(reply.body).toEqual({ read: [b, a] });
      expect(await unreadIds(bob.token)).toEqual([]);
      expect(await readIds(bob.token)).toEqual([a, b]);
      expect(await unreadIds(carol.token)).toEqual([carols]);
    });

    it('Roost: POST /mailbox/read lists only ids that went unread → read, each once', async () => {
      const { alice, bob } = await agents('alice', 'bob');
      const a = await send(alice.token, bob.handle);
      const b = await send(alice.token, bob.handle);
      const c = await send(alice.token, bob.handle);
      expect((await op.client.get(`/messages/${a}`, bob.token)).status).toBe(200);

      const reply = await op.client.post('/mailbox/read', { ids: [c, a, b, c, b] }, bob.token);
      expect(reply.body).toEqual({ read: [c, b] });
      const again = await op.client.post('/mailbox/read', { ids: [a, b, c] }, bob.token);
      expect(again.body).toEqual({ read: [] });
    });

    it('#60 POST /mailbox/read with ids [] (or not an array) is 400 INVALID_REQUEST; a malformed id is 400 INVALID_ENVELOPE_ID and marks nothing', async () => {
      const { alice, bob } = await agents('alice', 'bob');
      const id = await send(alice.token, bob.handle);

      for (const body of [{ ids: [] }, {}, { ids: null }, { ids: id }, { ids: { 0: id } }]) {
        expectError(await op.client.post('/mailbox/read', body, bob.token), 400, 'INVALID_REQUEST');
      }
      expectError(
        await op.client.request('POST', '/mailbox/read', { token: bob.token, body: '' }),
        400,
        'INVALID_REQUEST',
      );
      for (const bad of [id.toLowerCase(), '', 42, null, id.slice(1)]) {
        expectError(await op.client.post('/mailbox/read', { ids: [id, bad] }, bob.token), 400, 'INVALID_ENVELOPE_ID');
      }
      expect(await unreadIds(bob.token)).toEqual([id]);
    });

    it('#61 read state is per recipient: B reading (any of the three ways) leaves C unread', async () => {
      const { alice, bob, carol } = await agents('alice', 'bob', 'carol');
      const viaGet = await send(alice.token, bob.handle, { cc: [carol.handle] });
      const viaBatch = await send(alice.token, [bob.handle, carol.handle]);
      const viaMark = await send(alice.token, [carol.handle], { cc: [bob.handle] });

      expect((await op.client.get(`/messages/${viaGet}`, bob.token)).status).toBe(200);
      expect((await op.client.get(`/messages?ids=${viaBatch}`, bob.token)).body.envelopes).toHaveLength(1);
      expect((await op.client.post('/mailbox/read', { ids: [viaMark] }, bob.token)).body).toEqual({ read: [viaMark] });

      expect(await unreadIds(bob.token)).toEqual([]);
      expect(await unreadIds(carol.token)).toEqual([viaGet, viaBatch, viaMark]);
      expect(await readIds(carol.token)).toEqual([]);

      // And the other way round: C reading one leaves B's state where it was.
      expect((await op.client.post('/mailbox/read', { ids: [viaBatch] }, carol.token)).body).toEqual({
        read: [viaBatch],
      });
      expect(await unreadIds(carol.token)).toEqual([viaGet, viaMark]);
      expect(await readIds(bob.token)).toEqual([viaGet, viaBatch, viaMark]);
    });

    it('#62 GET /mailbox never changes read state, whatever the query', async () => {
      const { alice, bob } = await agents('alice', 'bob');
      const a = await send(alice.token, bob.handle);
      const b = await send(alice.token, [bob.handle, alice.handle]);
      const queries = [
        '',
        'order=desc',
        'limit=1',
        'unread=true',
        'unread=false',
        'direction=both',
        'direction=out',
        `after_created_at=0&after_envelope_id=${a}`,
      ];
      for (let round = 0; round < 2; round++) {
        for (const query of queries) {
          expect((await op.client.get(`/mailbox?${query}`, bob.token)).status).toBe(200);
          expect((await op.client.get(`/mailbox?${query}`, alice.token)).status).toBe(200);
        }
      }
      expect(await unreadIds(bob.token)).toEqual([a, b]);
      expect(await readIds(bob.token)).toEqual([]);
      expect(await unreadIds(alice.token)).toEqual([b]);
      const both = await op.client.get('/mailbox?direction=both', bob.token);
      expect(both.body.envelope_headers.every((h: { unread: boolean }) => h.unread === true)).toBe(true);
    });
  });
});
