import { ulid } from '#domain';
import { envelope, startOperator, type TestOperator } from '../../support/operator';

interface Header {
  op: string;
  id: string;
  from: string;
  to: string[];
  cc?: string[];
  subject?: string;
  in_reply_to?: string;
  type_hint: string;
  size_hint: number;
  created_at: number;
  date_ms: number;
  direction?: 'in' | 'out' | 'self';
  unread?: boolean;
}

interface Page {
  envelope_headers: Header[];
  next_cursor: { created_at: number; envelope_id: string } | null;
}

const MIN_ID = `01${'0'.repeat(24)}`;
const MAX_ID = `01${'Z'.repeat(24)}`;

/** `(created_at, id)` tuple order, id compared by code units (byte order for ASCII ids). */
const byKey = (a: Header, b: Header): number => a.created_at - b.created_at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/**
 * ASMTP.md §10 items 45–55: `GET /mailbox` feeds, header shape, ordering, keyset paging and query
 * validation, plus Roost's strictly increasing `created_at` per mailbox (EXTENSIONS.md, §9.2.10).
 */
describe('GET /mailbox', () => {
  let op: TestOperator;
  let owners = 0;

  beforeAll(async () => {
    op = await startOperator({ env: { ROOST_RATE_LIMIT_PER_S: '0' } });
  });
  afterAll(async () => op?.close());

  /** Fresh agents (policy open) under an owner no other test uses. */
  const agents = <N extends string>(...names: N[]) => op.agents(`mbox${++owners}`, ...names);

  async function send(token: string, to: string | string[], fields: Record<string, unknown> = {}) {
    const reply = await op.client.post('/messages', envelope(to, fields), token);
    expect(reply.status).toBe(202);
    return reply.body as { id: string; created_at: number; received_ms: number };
  }

  async function page(token: string, query = ''): Promise<Page> {
    const reply = await op.client.get<Page>(`/mailbox${query === '' ? '' : `?${query}`}`, token);
    expect(reply.status).toBe(200);
    return reply.body;
  }

  /** Follow `next_cursor` to the end; returns every row and the number of requests. */
  async function walk(token: string, query: string): Promise<{ rows: Header[]; pages: number }> {
    const rows: Header[] = [];
    let cursor: Page['next_cursor'] = null;
    let pages = 0;
    do {
      const after = cursor ? `&after_created_at=${cursor.created_at}&after_envelope_id=${cursor.envelope_id}` : '';
      const current = await page(token, `${query}${after}`);
      pages++;
      rows.push(...current.envelope_headers);
      cursor = current.next_cursor;
      expect(pages).toBeLessThan(100);
    } while (cursor !== null);
    return { rows, pages };
  }

  async function expectQueryError(token: string, query: string, code: string): Promise<void> {
    const reply = await op.client.get(`/mailbox?${query}`, token);
    expect({ query, status: reply.status, code: reply.body?.error?.code }).toEqual({ query, status: 400, code });
  }

  it('#45 defaults to direction in, order asc, limit 100', async () => {
    const { alice, bob } = await agents('alice', 'bob');
    const sent = await Promise.all(Array.from({ length: 101 }, () => send(alice.token, bob.handle)));
    await send(bob.token, alice.handle); // bob's own send is not on his default (in) feed
    const expected = sent
      .map((s) => s.id)
      .sort((a, b) => {
        const x = sent.find((s) => s.id === a)!.created_at;
        const y = sent.find((s) => s.id === b)!.created_at;
        return x - y || (a < b ? -1 : 1);
      });

    const plain = await op.client.get('/mailbox', bob.token);
    expect(plain.status).toBe(200);
    expect(plain.headers.get('content-type')).toBe('application/json; charset=utf-8');
    const rows = plain.body.envelope_headers as Header[];
    expect(rows.map((h) => h.id)).toEqual(expected.slice(0, 100));
    expect(plain.body.next_cursor).toEqual({ created_at: rows[99].created_at, envelope_id: rows[99].id });

    const explicit = await op.client.get('/mailbox?direction=in&order=asc&limit=100', bob.token);
    expect(explicit.text).toBe(plain.text);
    expect((await op.client.get('/mailbox?limit=', bob.token)).text).toBe(plain.text);
  });

  it('#46 headers are envelope.notify objects: optional fields only when set, no direction/unread on the in feed', async () => {
    const { alice, bob, carol } = await agents('alice', 'bob', 'carol');
    const parent = ulid();
    const minimal = await send(alice.token, bob.handle, { date_ms: 1_747_000_000_000 });
    const full = await send(alice.token, [bob.handle, bob.handle], {
      cc: [carol.handle],
      subject: '',
      in_reply_to: parent,
      references: [parent],
      monitor: 'mon_mbox46',
      content_parts: [{ type: 'text', text: 'body text never in a header' }],
    });

    const rows = (await page(bob.token)).envelope_headers;
    expect(rows.map((h) => h.id)).toEqual([minimal.id, full.id]);
    const [first, second] = rows;
    // The reference lists headers in its own key order (ASMTP.md §3.5), not the push frame's (§6.3).
    expect(Object.keys(first)).toEqual(['op', 'id', 'from', 'to', 'type_hint', 'created_at', 'date_ms', 'size_hint']);
    expect(first).toEqual({
      op: 'envelope.notify',
      id: minimal.id,
      from: alice.handle,
      to: [bob.handle],
      type_hint: 'text',
      size_hint: expect.any(Number),
      created_at: minimal.created_at,
      date_ms: 1_747_000_000_000,
    });
    expect(Object.keys(second)).toEqual([
      'op',
      'id',
      'from',
      'to',
      'type_hint',
      'created_at',
      'date_ms',
      'cc',
      'subject',
      'in_reply_to',
      'size_hint',
    ]);
    expect(second).toMatchObject({
      to: [bob.handle, bob.handle],
      cc: [carol.handle],
      subject: '',
      in_reply_to: parent,
      created_at: full.created_at,
    });
    const raw = (await op.client.get('/mailbox', bob.token)).text;
    for (const absent of [
      '"direction"',
      '"unread"',
      '"references"',
      '"monitor"',
      '"content_parts"',
      '"received_ms"',
      'body text',
    ]) {
      expect(raw).not.toContain(absent);
    }
    // Every recipient copy carries the envelope's one created_at, equal to the 202's.
    const carolRow = (await page(carol.token)).envelope_headers[0];
    expect(carolRow).toEqual(second);
  });

  it('#47 type_hint is the single part type, or mixed for heterogeneous parts', async () => {
    const { alice, bob } = await agents('alice', 'bob');
    const cases: Array<[string, unknown[]]> = [
      [
        'text',
        [
          { type: 'text', text: 'a' },
          { type: 'text', text: 'b' },
        ],
      ],
      ['image', [{ type: 'image', url: 'https://example.com/a.png' }]],
      [
        'file',
        [
          { type: 'file', url: 'https://example.com/a.pdf', name: 'a.pdf' },
          { type: 'file', url: 'https://example.com/b' },
        ],
      ],
      ['data', [{ type: 'data', data: { k: 1 } }]],
      [
        'mixed',
        [
          { type: 'text', text: 'a' },
          { type: 'data', data: {} },
        ],
      ],
      [
        'mixed',
        [
          { type: 'image', url: 'https://example.com/a.png' },
          { type: 'file', url: 'https://example.com/a.pdf' },
        ],
      ],
    ];
    const ids: string[] = [];
    for (const [, parts] of cases) ids.push((await send(alice.token, bob.handle, { content_parts: parts })).id);
    const rows = (await page(bob.token)).envelope_headers;
    expect(rows.map((h) => h.id)).toEqual(ids);
    expect(rows.map((h) => h.type_hint)).toEqual(cases.map(([hint]) => hint));
  });

  it('#48 order=asc lists oldest first and order=desc newest first by (created_at, id)', async () => {
    const { alice, bob, carol } = await agents('alice', 'bob', 'carol');
    const sent = [];
    for (let i = 0; i < 4; i++) sent.push(await send(alice.token, bob.handle));
    sent.push(
      ...(await Promise.all([
        send(alice.token, bob.handle),
        send(carol.token, bob.handle),
        send(alice.token, bob.handle),
      ])),
    );
    const asc = (await page(bob.token, 'order=asc')).envelope_headers;
    const desc = (await page(bob.token, 'order=desc')).envelope_headers;

    expect(asc).toHaveLength(7);
    expect([...asc].sort(byKey)).toEqual(asc);
    expect(asc.slice(0, 4).map((h) => h.id)).toEqual(sent.slice(0, 4).map((s) => s.id));
    expect(new Set(asc.map((h) => h.id))).toEqual(new Set(sent.map((s) => s.id)));
    expect(desc).toEqual([...asc].reverse());
  });

  it('#49 paging with next_cursor visits every entry exactly once in both orders', async () => {
    const { alice, bob, carol } = await agents('alice', 'bob', 'carol');
    await Promise.all(Array.from({ length: 6 }, () => send(alice.token, bob.handle)));
    await Promise.all(Array.from({ length: 6 }, () => send(carol.token, bob.handle)));
    await Promise.all(
      Array.from({ length: 5 }, (_, i) => send(bob.token, i % 2 ? alice.handle : [bob.handle, carol.handle])),
    );

    for (const direction of ['in', 'out', 'both']) {
      const all = (await page(bob.token, `direction=${direction}&limit=1000`)).envelope_headers;
      expect(all.length).toBe({ in: 15, out: 5, both: 17 }[direction]);
      for (const order of ['asc', 'desc']) {
        const expected = order === 'asc' ? [...all].sort(byKey) : [...all].sort(byKey).reverse();
        for (const limit of [1, 4, 5, 7]) {
          const { rows, pages } = await walk(bob.token, `direction=${direction}&order=${order}&limit=${limit}`);
          expect({ direction, order, limit, ids: rows.map((h) => h.id) }).toEqual({
            direction,
            order,
            limit,
            ids: expected.map((h) => h.id),
          });
          expect(rows).toEqual(expected);
          expect(pages).toBe(Math.floor(all.length / limit) + 1);
        }
      }
    }
  });

  it('#49 the cursor is the strict (created_at, envelope_id) tuple and need not name an existing envelope', async () => {
    const { alice, bob } = await agents('alice', 'bob');
    for (let i = 0; i < 3; i++) await send(alice.token, bob.handle);
    const [x, y, z] = (await page(bob.token)).envelope_headers;
    const after = (createdAt: number, id: string, order: string) =>
      page(bob.token, `order=${order}&after_created_at=${createdAt}&after_envelope_id=${id}`).then((p) =>
        p.envelope_headers.map((h) => h.id),
      );

    expect(await after(y.created_at, y.id, 'asc')).toEqual([z.id]);
    expect(await after(y.created_at, MIN_ID, 'asc')).toEqual([y.id, z.id]);
    expect(await after(y.created_at, MAX_ID, 'asc')).toEqual([z.id]);
    expect(await after(y.created_at, y.id, 'desc')).toEqual([x.id]);
    expect(await after(y.created_at, MAX_ID, 'desc')).toEqual([y.id, x.id]);
    expect(await after(y.created_at, MIN_ID, 'desc')).toEqual([x.id]);
    expect(await after(0, MIN_ID, 'asc')).toEqual([x.id, y.id, z.id]);
    expect(await after(z.created_at, z.id, 'asc')).toEqual([]);
    expect(await after(x.created_at, x.id, 'desc')).toEqual([]);
    expect(await after(Number.MAX_SAFE_INTEGER, MAX_ID, 'desc')).toEqual([z.id, y.id, x.id]);
  });

  it('#50 next_cursor is {created_at, envelope_id} of the last row on a full page and explicit null otherwise', async () => {
    const { alice, bob, carol } = await agents('alice', 'bob', 'carol');
    const empty = await op.client.get('/mailbox', carol.token);
    expect(empty.text).toBe('{"envelope_headers":[],"next_cursor":null}');

    for (let i = 0; i < 4; i++) await send(alice.token, bob.handle);
    const short = await op.client.get('/mailbox?limit=5', bob.token);
    expect(short.body.envelope_headers).toHaveLength(4);
    expect(short.text).toMatch(/"next_cursor":null}$/);

    for (const order of ['asc', 'desc']) {
      const full = await page(bob.token, `order=${order}&limit=2`);
      const last = full.envelope_headers[1];
      expect(Object.keys(full.next_cursor!)).toEqual(['created_at', 'envelope_id']);
      expect(full.next_cursor).toEqual({ created_at: last.created_at, envelope_id: last.id });

      // A full final page still yields a cursor; the page after it is empty with null.
      const finalPage = await page(
        bob.token,
        `order=${order}&limit=2&after_created_at=${last.created_at}&after_envelope_id=${last.id}`,
      );
      expect(finalPage.envelope_headers).toHaveLength(2);
      expect(finalPage.next_cursor).not.toBeNull();
      const end = await op.client.get(
        `/mailbox?order=${order}&limit=2&after_created_at=${finalPage.next_cursor!.created_at}&after_envelope_id=${finalPage.next_cursor!.envelope_id}`,
        bob.token,
      );
      expect(end.text).toBe('{"envelope_headers":[],"next_cursor":null}');
    }
  });

  it('#51 limit=0, limit=1001, limit=01, order=up, direction=sideways, unread=yes each return 400 INVALID_QUERY', async () => {
    const { alice, bob } = await agents('alice', 'bob');
    await send(alice.token, bob.handle);
    for (const query of [
      'limit=0',
      'limit=1001',
      'limit=01',
      'limit=-1',
      'limit=%2B5',
      'limit=1.0',
      'limit=1e2',
      'limit=ten',
      'order=up',
      'order=ASC',
      'direction=sideways',
      'direction=IN',
      'unread=yes',
      'unread=1',
      'unread=',
    ]) {
      await expectQueryError(bob.token, query, 'INVALID_QUERY');
    }
    // Authentication comes before query validation.
    expect((await op.client.get('/mailbox?limit=0')).status).toBe(401);
    expect((await page(bob.token, 'limit=1000')).envelope_headers).toHaveLength(1);
    expect((await page(bob.token, 'limit=1')).envelope_headers).toHaveLength(1);
    // First occurrence wins.
    expect((await page(bob.token, 'limit=1&limit=0')).envelope_headers).toHaveLength(1);
    await expectQueryError(bob.token, 'limit=0&limit=1', 'INVALID_QUERY');
  });

  it('#52 only one of after_created_at/after_envelope_id returns 400 INVALID_QUERY', async () => {
    const { alice, bob } = await agents('alice', 'bob');
    const { id, created_at: createdAt } = await send(alice.token, bob.handle);
    await expectQueryError(bob.token, `after_created_at=${createdAt}`, 'INVALID_QUERY');
    await expectQueryError(bob.token, `after_envelope_id=${id}`, 'INVALID_QUERY');
    // Pairing is checked before the values themselves.
    await expectQueryError(bob.token, 'after_envelope_id=nope', 'INVALID_QUERY');
    // With both present, each value is validated.
    await expectQueryError(bob.token, `after_created_at=0${createdAt}&after_envelope_id=${id}`, 'INVALID_QUERY');
    await expectQueryError(bob.token, `after_created_at=-1&after_envelope_id=${id}`, 'INVALID_QUERY');
    await expectQueryError(bob.token, `after_created_at=x&after_envelope_id=${id}`, 'INVALID_QUERY');
    await expectQueryError(
      bob.token,
      `after_created_at=${createdAt}&after_envelope_id=${id.toLowerCase()}`,
      'INVALID_ENVELOPE_ID',
    );
    // Validation order: limit, then pairing, then after_created_at, then after_envelope_id.
    await expectQueryError(bob.token, 'after_created_at=-1&after_envelope_id=bad', 'INVALID_QUERY');
    await expectQueryError(bob.token, `limit=0&after_created_at=${createdAt}&after_envelope_id=bad`, 'INVALID_QUERY');
    expect((await page(bob.token, `after_created_at=0&after_envelope_id=${MIN_ID}`)).envelope_headers).toHaveLength(1);
  });

  it('#53 unread=true with direction=out or both returns 400 INVALID_QUERY; unread=false there is ignored', async () => {
    const { alice, bob } = await agents('alice', 'bob');
    await send(alice.token, bob.handle);
    await send(bob.token, alice.handle);
    await expectQueryError(bob.token, 'direction=out&unread=true', 'INVALID_QUERY');
    await expectQueryError(bob.token, 'direction=both&unread=true', 'INVALID_QUERY');
    await expectQueryError(bob.token, 'unread=true&direction=both', 'INVALID_QUERY');
    for (const direction of ['out', 'both']) {
      const ignored = await op.client.get(`/mailbox?direction=${direction}&unread=false`, bob.token);
      expect(ignored.status).toBe(200);
      expect(ignored.text).toBe((await op.client.get(`/mailbox?direction=${direction}`, bob.token)).text);
      expect(ignored.body.envelope_headers.length).toBe(direction === 'out' ? 1 : 2);
    }
  });

  it('#54 direction=out lists the caller’s sent envelopes tagged out, or self when it was also a recipient', async () => {
    const { alice, bob, carol } = await agents('alice', 'bob', 'carol');
    const toBob = await send(alice.token, bob.handle, { subject: 'out' });
    const toSelfAndBob = await send(alice.token, [bob.handle, alice.handle]);
    const ccSelf = await send(alice.token, carol.handle, { cc: [alice.handle] });
    const onlySelf = await send(alice.token, alice.handle);
    await send(bob.token, alice.handle); // received, not sent: not on alice's out feed
    await send(bob.token, carol.handle); // someone else's

    const reply = await op.client.get('/mailbox?direction=out', alice.token);
    const rows = reply.body.envelope_headers as Header[];
    expect(rows.map((h) => [h.id, h.direction])).toEqual([
      [toBob.id, 'out'],
      [toSelfAndBob.id, 'self'],
      [ccSelf.id, 'self'],
      [onlySelf.id, 'self'],
    ]);
    for (const row of rows) {
      expect(row.from).toBe(alice.handle);
      expect(row).not.toHaveProperty('unread');
      expect(Object.keys(row).slice(-1)).toEqual(['direction']);
    }
    expect(rows[0]).toEqual({
      op: 'envelope.notify',
      id: toBob.id,
      from: alice.handle,
      to: [bob.handle],
      subject: 'out',
      type_hint: 'text',
      size_hint: expect.any(Number),
      created_at: toBob.created_at,
      date_ms: expect.any(Number),
      direction: 'out',
    });
    expect(rows.map((h) => h.created_at)).toEqual([toBob, toSelfAndBob, ccSelf, onlySelf].map((s) => s.created_at));
    expect((await page(carol.token, 'direction=out')).envelope_headers).toEqual([]);
    // The same header minus the extension fields is what the recipient's in feed shows.
    const bobRow = (await page(bob.token)).envelope_headers.find((h) => h.id === toBob.id)!;
    const { direction: _direction, ...plain } = rows[0];
    expect(bobRow).toEqual(plain);
  });

  it('#55 direction=both lists each envelope once with direction in/out/self and unread only on recipient rows', async () => {
    const { alice, bob } = await agents('alice', 'bob');
    const out = await send(alice.token, bob.handle);
    const self = await send(alice.token, [alice.handle, bob.handle], { cc: [alice.handle] });
    const inbound = await send(bob.token, alice.handle);
    const read = await send(bob.token, alice.handle);
    expect((await op.client.post('/mailbox/read', { ids: [read.id] }, alice.token)).body).toEqual({ read: [read.id] });

    const rows = (await page(alice.token, 'direction=both')).envelope_headers;
    expect(rows.map((h) => [h.id, h.direction, h.unread])).toEqual([
      [out.id, 'out', undefined],
      [self.id, 'self', true],
      [inbound.id, 'in', true],
      [read.id, 'in', false],
    ]);
    expect(rows[0]).not.toHaveProperty('unread');
    for (const row of rows.slice(1)) expect(Object.keys(row).slice(-2)).toEqual(['direction', 'unread']);

    expect((await op.client.get(`/messages/${self.id}`, alice.token)).status).toBe(200);
    const after = (await page(alice.token, 'direction=both&order=desc')).envelope_headers;
    expect(after.map((h) => [h.id, h.direction, h.unread])).toEqual([
      [read.id, 'in', false],
      [inbound.id, 'in', true],
      [self.id, 'self', false],
      [out.id, 'out', undefined],
    ]);
    // Bob's view of the same envelopes.
    const bobs = (await page(bob.token, 'direction=both')).envelope_headers;
    expect(bobs.map((h) => [h.id, h.direction, h.unread])).toEqual([
      [out.id, 'in', true],
      [self.id, 'in', true],
      [inbound.id, 'out', undefined],
      [read.id, 'out', undefined],
    ]);
  });

  it('Roost: created_at is strictly increasing per mailbox, even for 50 envelopes sent at once', async () => {
    const { alice, bob, carol, dave } = await agents('alice', 'bob', 'carol', 'dave');
    const senders = [alice, bob, carol];
    const accepted = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        send(senders[i % 3].token, i % 5 === 0 ? [dave.handle, alice.handle] : dave.handle),
      ),
    );
    const rows = (await page(dave.token, 'order=asc&limit=1000')).envelope_headers;
    expect(rows).toHaveLength(50);
    for (let i = 1; i < rows.length; i++) expect(rows[i].created_at).toBeGreaterThan(rows[i - 1].created_at);
    const createdAt = new Map(accepted.map((a) => [a.id, a.created_at]));
    for (const row of rows) expect(row.created_at).toBe(createdAt.get(row.id));
    // Alice's mailbox shares some of those envelopes, and is strictly increasing too.
    const alices = (await page(alice.token, 'order=asc&limit=1000')).envelope_headers;
    expect(alices).toHaveLength(10);
    for (let i = 1; i < alices.length; i++) expect(alices[i].created_at).toBeGreaterThan(alices[i - 1].created_at);
    // created_at never runs behind the accept clock.
    for (const a of accepted) expect(a.created_at).toBeGreaterThanOrEqual(a.received_ms);
  });
});
