import { caps } from '../caps';
import { eq, expectError, expectStatus, Failure, hasNoKey, ok } from '../assert';
import type { Agent, T } from '../runner';
import { ulid } from '#client';
import { compareKeys } from '../util';
import { envelope, ORIGIN } from '../wire';
import { item } from './item';

/** ASMTP.md §10 items 45–55: GET /mailbox feeds, header shape, ordering, keyset paging, validation. */

interface Header {
  id: string;
  created_at: number;
  [key: string]: unknown;
}

interface Page {
  envelope_headers: Header[];
  next_cursor: { created_at: number; envelope_id: string } | null;
}

async function page(t: T, agent: Agent, query = ''): Promise<Page> {
  const reply = await t.http.get<Page>(`/mailbox${query ? `?${query}` : ''}`, agent.token);
  expectStatus(reply, 200, `GET /mailbox?${query}`);
  return reply.body;
}

/** Send `n` envelopes from `from` to `to`, `concurrency` at a time; the 202 bodies. */
async function sendMany(t: T, from: Agent, to: Agent, n: number, concurrency = 8) {
  const out: Array<{ id: string; created_at: number }> = [];
  for (let i = 0; i < n; i += concurrency) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(concurrency, n - i) }, () => t.sent(from, envelope(to.handle))),
    );
    out.push(...batch);
  }
  return out;
}

const sortedKeys = (rows: Array<{ id: string; created_at: number }>) => [...rows].sort(compareKeys).map((r) => r.id);

async function expectQueryError(t: T, agent: Agent, query: string, code: string): Promise<void> {
  expectError(await t.http.get(`/mailbox?${query}`, agent.token), 400, code, query);
}

item(45, 'GET /mailbox defaults to direction in, order asc, limit 100', async (t) => {
  const { alice, bob } = await t.agents('alice', 'bob');
  const sent = await sendMany(t, alice, bob, 101);
  await t.sent(bob, envelope(alice.handle)); // bob's own send is not on his default (in) feed
  const plain = await t.http.get('/mailbox', bob.token);
  expectStatus(plain, 200);
  const rows = plain.body.envelope_headers as Header[];
  eq(rows.length, 100, 'default page size');
  eq(
    rows.map((r) => r.id),
    sortedKeys(sent).slice(0, 100),
    'the oldest 100 received, oldest first',
  );
  const explicit = await t.http.get('/mailbox?direction=in&order=asc&limit=100', bob.token);
  eq(explicit.body, plain.body, 'GET /mailbox equals ?direction=in&order=asc&limit=100');
});

item(
  46,
  'GET /mailbox headers have op envelope.notify, id, from, to, type_hint, created_at, date_ms, optional fields only when set, and no direction/unread on the in feed',
  async (t) => {
    const { alice, bob, carol } = await t.agents('alice', 'bob', 'carol');
    const parent = ulid();
    const minimal = await t.sent(alice, envelope(bob.handle, { date_ms: 1_747_000_000_000 }));
    const full = await t.sent(
      alice,
      envelope(bob.handle, {
        cc: [carol.handle],
        subject: '',
        in_reply_to: parent,
        references: [parent],
        monitor: 'mon_cf46',
        content_parts: [{ type: 'text', text: 'body text never in a header' }],
      }),
    );
    const reply = await t.http.get('/mailbox', bob.token);
    const [first, second] = reply.body.envelope_headers as Header[];
    eq(
      first,
      {
        op: 'envelope.notify',
        id: minimal.id,
        from: alice.handle,
        to: [bob.handle],
        type_hint: 'text',
        size_hint: first?.size_hint,
        created_at: minimal.created_at,
        date_ms: 1_747_000_000_000,
      },
      'a minimal header',
    );
    ok(typeof first.size_hint === 'number', 'size_hint is a number');
    eq(
      { ...second, size_hint: 0, date_ms: 0 },
      {
        op: 'envelope.notify',
        id: full.id,
        from: alice.handle,
        to: [bob.handle],
        cc: [carol.handle],
        subject: '',
        in_reply_to: parent,
        type_hint: 'text',
        size_hint: 0,
        created_at: full.created_at,
        date_ms: 0,
      },
      'a full header',
    );
    for (const absent of [
      '"direction"',
      '"unread"',
      '"references"',
      '"monitor"',
      '"content_parts"',
      '"received_ms"',
      'body text',
    ]) {
      ok(!reply.text.includes(absent), `the in feed carries ${absent}`);
    }
  },
);

item(47, 'type_hint is the single part type, or mixed for heterogeneous parts', async (t) => {
  const { alice, bob } = await t.agents('alice', 'bob');
  const cases: Array<[string, unknown[]]> = [
    [
      'text',
      [
        { type: 'text', text: 'a' },
        { type: 'text', text: 'b' },
      ],
    ],
    ['image', [{ type: 'image', url: 'https://example.com/a.png' }]],
    ['file', [{ type: 'file', url: 'https://example.com/a.pdf' }]],
    ['data', [{ type: 'data', data: {} }]],
    [
      'mixed',
      [
        { type: 'text', text: 'a' },
        { type: 'data', data: { k: 1 } },
      ],
    ],
  ];
  const ids: string[] = [];
  for (const [, parts] of cases) ids.push((await t.sent(alice, envelope(bob.handle, { content_parts: parts }))).id);
  const rows = (await page(t, bob, 'limit=1000')).envelope_headers;
  eq(
    ids.map((id) => rows.find((r) => r.id === id)?.type_hint),
    cases.map(([hint]) => hint),
    'type_hint per envelope',
  );
});

item(48, 'order=asc returns oldest first and order=desc newest first by (created_at, id)', async (t) => {
  const { alice, bob } = await t.agents('alice', 'bob');
  const sent = await sendMany(t, alice, bob, 6, 3);
  const asc = (await page(t, bob, 'order=asc')).envelope_headers.map((h) => h.id);
  const desc = (await page(t, bob, 'order=desc')).envelope_headers.map((h) => h.id);
  eq(asc, sortedKeys(sent), 'order=asc');
  eq(desc, sortedKeys(sent).reverse(), 'order=desc');
});

item(
  49,
  'paging with after_created_at/after_envelope_id from next_cursor visits every entry exactly once in both orders',
  async (t) => {
    const { alice, bob } = await t.agents('alice', 'bob');
    const sent = await sendMany(t, alice, bob, 7, 4);
    for (const order of ['asc', 'desc']) {
      const seen: string[] = [];
      let cursor: Page['next_cursor'] = null;
      for (let pages = 0; ; pages++) {
        if (pages > 10) throw new Failure(`order=${order}: paging did not end after 10 pages`);
        const after: string = cursor
          ? `&after_created_at=${cursor.created_at}&after_envelope_id=${cursor.envelope_id}`
          : '';
        const current = await page(t, bob, `order=${order}&limit=2${after}`);
        seen.push(...current.envelope_headers.map((h) => h.id));
        cursor = current.next_cursor;
        if (cursor === null) break;
      }
      const expected = order === 'asc' ? sortedKeys(sent) : sortedKeys(sent).reverse();
      eq(seen, expected, `order=${order} pages`);
    }
    // The cursor is a strict tuple and need not name an existing envelope.
    const all = (await page(t, bob, 'order=asc')).envelope_headers;
    const before = await page(t, bob, `after_created_at=${all[2].created_at}&after_envelope_id=${ORIGIN.envelope_id}`);
    eq(
      before.envelope_headers.map((h) => h.id),
      all.filter((h) => h.created_at >= all[2].created_at).map((h) => h.id),
      'after a cursor naming no envelope',
    );
  },
);

item(
  50,
  'next_cursor is a {created_at, envelope_id} object when the page is full and explicit null otherwise',
  async (t) => {
    const { alice, bob, carol } = await t.agents('alice', 'bob', 'carol');
    const empty = await t.http.get('/mailbox', carol.token);
    ok(
      'next_cursor' in empty.body && empty.body.next_cursor === null,
      `an empty mailbox: next_cursor must be explicit null, got ${empty.text}`,
    );
    await sendMany(t, alice, bob, 4, 4);
    const short = await t.http.get('/mailbox?limit=5', bob.token);
    ok(
      'next_cursor' in short.body && short.body.next_cursor === null,
      `a short page: next_cursor must be explicit null, got ${short.text.slice(-80)}`,
    );
    for (const order of ['asc', 'desc']) {
      const full = await page(t, bob, `order=${order}&limit=2`);
      const last = full.envelope_headers[1];
      eq(
        full.next_cursor,
        { created_at: last.created_at, envelope_id: last.id },
        `order=${order}: the cursor of a full page`,
      );
      const final = await page(
        t,
        bob,
        `order=${order}&limit=2&after_created_at=${last.created_at}&after_envelope_id=${last.id}`,
      );
      eq(final.envelope_headers.length, 2, `order=${order}: the final (full) page`);
      ok(final.next_cursor !== null, `order=${order}: a full final page still has a cursor`);
      const end = await page(
        t,
        bob,
        `order=${order}&limit=2&after_created_at=${final.next_cursor.created_at}&after_envelope_id=${final.next_cursor.envelope_id}`,
      );
      eq(end, { envelope_headers: [], next_cursor: null }, `order=${order}: the page after the last`);
    }
  },
);

item(
  51,
  'limit=0, limit=1001, limit=01, order=up, direction=sideways, unread=yes each return 400 INVALID_QUERY',
  async (t) => {
    const bob = await t.agent('bob');
    for (const query of [
      'limit=0',
      'limit=1001',
      'limit=01',
      'limit=-1',
      'limit=ten',
      'order=up',
      'direction=sideways',
      'unread=yes',
      'unread=1',
    ]) {
      await expectQueryError(t, bob, query, 'INVALID_QUERY');
    }
    for (const query of ['limit=1', 'limit=1000', 'order=desc', 'unread=false'])
      expectStatus(await t.http.get(`/mailbox?${query}`, bob.token), 200, query);
  },
);

item(52, 'supplying only one of after_created_at/after_envelope_id returns 400 INVALID_QUERY', async (t) => {
  const bob = await t.agent('bob');
  await expectQueryError(t, bob, `after_created_at=${Date.now()}`, 'INVALID_QUERY');
  await expectQueryError(t, bob, `after_envelope_id=${ulid()}`, 'INVALID_QUERY');
  await expectQueryError(t, bob, `after_created_at=x&after_envelope_id=${ulid()}`, 'INVALID_QUERY');
  await expectQueryError(t, bob, `after_created_at=0&after_envelope_id=${ulid().toLowerCase()}`, 'INVALID_ENVELOPE_ID');
  expectStatus(
    await t.http.get(`/mailbox?after_created_at=0&after_envelope_id=${ORIGIN.envelope_id}`, bob.token),
    200,
    'both',
  );
});

item(53, 'unread=true with direction=out or both returns 400 INVALID_QUERY', async (t) => {
  const bob = await t.agent('bob');
  await expectQueryError(t, bob, 'direction=out&unread=true', 'INVALID_QUERY');
  await expectQueryError(t, bob, 'direction=both&unread=true', 'INVALID_QUERY');
  await expectQueryError(t, bob, 'unread=true&direction=both', 'INVALID_QUERY');
});

item(
  54,
  'direction=out lists envelopes sent by the caller tagged out, or self when the caller was also a recipient',
  async (t) => {
    await t.need(caps.outFeed(t.run));
    const { alice, bob, carol } = await t.agents('alice', 'bob', 'carol');
    const toBob = await t.sent(alice, envelope(bob.handle, { subject: 'out' }));
    const toSelfAndBob = await t.sent(alice, envelope([bob.handle, alice.handle]));
    const ccSelf = await t.sent(alice, envelope(carol.handle, { cc: [alice.handle] }));
    await t.sent(bob, envelope(alice.handle));
    await t.sent(bob, envelope(carol.handle));
    const rows = (await page(t, alice, 'direction=out')).envelope_headers;
    eq(
      rows.map((h) => [h.id, h.direction]),
      [
        [toBob.id, 'out'],
        [toSelfAndBob.id, 'self'],
        [ccSelf.id, 'self'],
      ],
      'alice’s out feed',
    );
    for (const row of rows) {
      eq(row.from, alice.handle, 'from');
      hasNoKey(row, 'unread', 'an out row');
    }
    eq((await page(t, carol, 'direction=out')).envelope_headers, [], 'carol’s out feed');
  },
);

item(
  55,
  'direction=both lists each envelope once with direction in/out/self and unread only on rows where the caller is a recipient',
  async (t) => {
    await t.need(caps.outFeed(t.run));
    const { alice, bob } = await t.agents('alice', 'bob');
    const out = await t.sent(alice, envelope(bob.handle));
    const self = await t.sent(alice, envelope([alice.handle, bob.handle], { cc: [alice.handle] }));
    const inbound = await t.sent(bob, envelope(alice.handle));
    const rows = (await page(t, alice, 'direction=both')).envelope_headers;
    eq(
      rows.map((h) => [h.id, h.direction, h.unread]),
      [
        [out.id, 'out', undefined],
        [self.id, 'self', true],
        [inbound.id, 'in', true],
      ],
      'alice’s both feed',
    );
    hasNoKey(rows[0], 'unread', 'the out row');
    expectStatus(await t.http.get(`/messages/${inbound.id}`, alice.token), 200);
    const after = (await page(t, alice, 'direction=both&order=desc')).envelope_headers;
    eq(
      after.map((h) => [h.id, h.direction, h.unread]),
      [
        [inbound.id, 'in', false],
        [self.id, 'self', true],
        [out.id, 'out', undefined],
      ],
      'after reading the inbound one (desc)',
    );
  },
);
