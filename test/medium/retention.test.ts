import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { RetentionRepository } from '#db';
import { ulid, type Cursor } from '#domain';
import { RetentionProcessor } from '../../apps/worker/src/retention.processor';
import { startOperator, type TestOperator } from '../support/operator';
import { testRedisUrl } from '../support/services';
import { connect, type Listener } from '../support/ws';

/**
 * Retention (EXTENSIONS.md §6, and `cursor.expired` of §1) on Postgres with Redis fan-out. Entries
 * are made "long ago" by sending them through the API and then moving their `created_at` into the
 * past in SQL; the purge is the worker's own `RetentionProcessor.purge()`, called by hand (its
 * timer is parked).
 */
const DAY = 24 * 60 * 60 * 1000;
const BATCH = 7;

describe('retention (EXTENSIONS.md §6)', () => {
  let op: TestOperator;
  let db: pg.Client;
  let processor: RetentionProcessor;

  beforeAll(async () => {
    op = await startOperator({
      env: {
        // Redis fan-out (streams) and BullMQ, as deployed.
        REDIS_URL: testRedisUrl(),
        ROOST_REDIS_PREFIX: `roost-test:${ulid()}:`,
        ROOST_RETENTION_INTERVAL_MS: '86400000',
        ROOST_SCHEDULE_TICK_MS: '3600000',
        ROOST_RETENTION_BATCH: String(BATCH),
        ROOST_RATE_LIMIT_PER_S: '0',
      },
    });
    db = new pg.Client({ connectionString: op.config.databaseUrl! });
    await db.connect();
    processor = op.app.get(RetentionProcessor);
  });
  afterAll(async () => {
    await db?.end();
    await op?.close();
  });

  interface TestAgent {
    handle: string;
    token: string;
  }
  const agent = async (handle: string): Promise<TestAgent> => ({ handle, token: await op.agent(handle) });
  const org = async (name: string, retentionDays: number | null) => {
    expect((await op.client.post('/_admin/orgs', { name }, op.adminToken)).status).toBe(201);
    const patched = await op.client.patch(`/_admin/orgs/${name}`, { retention_days: retentionDays }, op.adminToken);
    expect(patched.status).toBe(200);
    expect(patched.body.retention_days).toBe(retentionDays);
  };
  const agentRetention = async (handle: string, retentionDays: number | null) => {
    const patched = await op.client.patch(
      `/_admin/agents/${encodeURIComponent(handle)}`,
      { retention_days: retentionDays },
      op.adminToken,
    );
    expect(patched.status).toBe(200);
  };

  /** Send one envelope and return its id and created_at. */
  const send = async (from: TestAgent, to: string[], text: string): Promise<{ id: string; created_at: number }> => {
    const reply = await op.client.post(
      '/messages',
      { id: ulid(), to, date_ms: Date.now(), subject: text, content_parts: [{ type: 'text', text }] },
      from.token,
    );
    expect(reply.status).toBe(202);
    return { id: reply.body.id, created_at: reply.body.created_at };
  };

  /** Move envelopes (and every mailbox entry of them) `days` into the past. */
  const age = async (ids: string[], days: number) => {
    await db.query('UPDATE mailbox_entries SET created_at = created_at - $2::bigint WHERE envelope_id = ANY($1)', [
      ids,
      days * DAY,
    ]);
    await db.query(
      'UPDATE envelopes SET created_at = created_at - $2::bigint, received_ms = received_ms - $2::bigint WHERE id = ANY($1)',
      [ids, days * DAY],
    );
  };
  const positionOf = async (mailbox: string, id: string): Promise<Cursor> => {
    const { rows } = await db.query(
      'SELECT m.created_at::float8 AS created_at, m.envelope_id FROM mailbox_entries m JOIN agents a ON a.id = m.mailbox_id WHERE a.handle = $1 AND m.envelope_id = $2',
      [mailbox, id],
    );
    return rows[0] as Cursor;
  };

  const inbox = async (token: string, direction = 'in'): Promise<string[]> => {
    const reply = await op.client.get(`/mailbox?order=asc&limit=1000&direction=${direction}`, token);
    expect(reply.status).toBe(200);
    return reply.body.envelope_headers.map((h: { id: string }) => h.id);
  };
  const fetchStatus = async (token: string, id: string) => (await op.client.get(`/messages/${id}`, token)).status;
  const searchIds = async (token: string, q: string): Promise<string[]> => {
    const reply = await op.client.get(`/search/messages?q=${q}`, token);
    expect(reply.status).toBe(200);
    return reply.body.envelopes.map((e: { envelope_id: string }) => e.envelope_id);
  };
  const metric = async (name: string, labels = ''): Promise<number> => {
    const text = (await op.client.get('/metrics')).text;
    const escaped = `${name}${labels}`.replace(/[{}"[\]().*+?^$|\\]/g, '\\$&');
    const match = new RegExp(`^${escaped} (\\S+)$`, 'm').exec(text);
    return match ? Number(match[1]) : 0;
  };

  it('org retention_days purges old entries and bodies; an agent override lengthens or shortens it; newer entries are untouched', async () => {
    await org('rt1', 7);
    await org('rtkeep', null);
    const [alice, bob, carol, dave, erin] = await Promise.all([
      agent('@rt1.alice'),
      agent('@rt1.bob'),
      agent('@rt1.carol'),
      agent('@rtkeep.dave'),
      agent('@rtkeep.erin'),
    ]);
    await agentRetention(carol.handle, 30); // longer than its org's 7 days
    await agentRetention(erin.handle, 2); // an org without retention, an agent with it

    // Oldest first, so moving them back keeps every mailbox in order.
    const oldBob = [await send(alice, [bob.handle], 'wombat one'), await send(alice, [bob.handle], 'wombat two')];
    const shared = await send(alice, [bob.handle, dave.handle], 'wombat shared');
    const carol40 = await send(alice, [carol.handle], 'wombat forty');
    const carol10 = await send(alice, [carol.handle], 'wombat ten');
    const erin3 = await send(dave, [erin.handle], 'wombat erin');
    const newBob = [await send(alice, [bob.handle], 'wombat fresh'), await send(alice, [bob.handle], 'wombat fresher')];
    await age(
      [...oldBob, shared].map((e) => e.id),
      8,
    );
    await age([carol40.id], 40);
    await age([carol10.id], 10);
    await age([erin3.id], 3);
    await db.query('UPDATE mailbox_entries SET read = true WHERE envelope_id = $1', [newBob[0].id]);

    const entriesBefore = await metric('roost_retention_purged_rows_total', '{table="mailbox_entries"}');
    const envelopesBefore = await metric('roost_retention_purged_rows_total', '{table="envelopes"}');
    const purged = await processor.purge();
    // Bob: 2 old + shared; carol: the 40-day one; erin: the 3-day one. Bodies: bob's two and
    // carol's (alice keeps 7 days too); not `shared`, which dave still holds, nor erin's, whose
    // sender dave keeps everything.
    expect(purged).toEqual({ entries: 5, envelopes: 3, handles: 0 });
    expect(await metric('roost_retention_purged_rows_total', '{table="mailbox_entries"}')).toBe(entriesBefore + 5);
    expect(await metric('roost_retention_purged_rows_total', '{table="envelopes"}')).toBe(envelopesBefore + 3);

    // Gone from the listing, the body route, and search; the window is untouched, read state too.
    expect(await inbox(bob.token)).toEqual(newBob.map((e) => e.id));
    for (const e of [...oldBob, shared]) expect(await fetchStatus(bob.token, e.id)).toBe(404);
    expect((await searchIds(bob.token, 'wombat')).sort()).toEqual(newBob.map((e) => e.id).sort());
    const unread = await op.client.get('/mailbox?unread=true', bob.token);
    expect(unread.body.envelope_headers.map((h: { id: string }) => h.id)).toEqual([newBob[1].id]);
    // Purged envelopes answer 404 to their sender too, like any unknown id, and leave its out feed.
    for (const e of oldBob) expect(await fetchStatus(alice.token, e.id)).toBe(404);
    expect(await inbox(alice.token, 'out')).not.toEqual(expect.arrayContaining([oldBob[0].id]));

    // An envelope a recipient without retention still holds stays, for that recipient.
    expect(await inbox(dave.token)).toEqual([shared.id]);
    expect(await fetchStatus(dave.token, shared.id)).toBe(200);
    expect(await searchIds(dave.token, 'wombat')).toContain(shared.id);

    // Carol's 30-day override keeps the 10-day-old entry; erin's 2-day one drops a 3-day-old one.
    expect(await inbox(carol.token)).toEqual([carol10.id]);
    expect(await fetchStatus(carol.token, carol10.id)).toBe(200);
    expect(await fetchStatus(carol.token, carol40.id)).toBe(404);
    expect(await inbox(erin.token)).toEqual([]);
    expect(await fetchStatus(erin.token, erin3.id)).toBe(404);

    // A second purge finds nothing more.
    expect(await processor.purge()).toEqual({ entries: 0, envelopes: 0, handles: 0 });

    // Removing the override falls back to the org: carol's 10-day-old entry now goes.
    await agentRetention(carol.handle, null);
    expect(await processor.purge()).toEqual({ entries: 1, envelopes: 1, handles: 0 });
    expect(await inbox(carol.token)).toEqual([]);
  });

  it('a resume cursor older than the purge gets cursor.expired with the oldest retained entry, then the retained entries, then replay.complete', async () => {
    await org('rt2', 5);
    const [alice, bob] = await Promise.all([agent('@rt2.alice'), agent('@rt2.bob')]);
    const old = [];
    for (let i = 0; i < 4; i++) old.push(await send(alice, [bob.handle], `old ${i}`));
    const kept = [await send(alice, [bob.handle], 'kept 0'), await send(alice, [bob.handle], 'kept 1')];
    await age(
      old.map((e) => e.id),
      6,
    );
    const positions = await Promise.all(old.map((e) => positionOf(bob.handle, e.id)));
    const keptPositions = await Promise.all(kept.map((e) => positionOf(bob.handle, e.id)));
    await processor.purge();
    expect(await inbox(bob.token)).toEqual(kept.map((e) => e.id));

    const resume = async (cursor: Cursor): Promise<Listener> => {
      const listener = await connect(op.url, {
        token: bob.token,
        query: { after_created_at: String(cursor.created_at), after_envelope_id: cursor.envelope_id },
      });
      await listener.until(() => listener.frames.some((f) => f.op === 'replay.complete'), 5_000, 'replay.complete');
      return listener;
    };

    // A cursor inside the purged range: told it missed something, then everything retained.
    const stale = await resume(positions[1]);
    try {
      expect(stale.frames.map((f) => f.op)).toEqual([
        'cursor.expired',
        'envelope.notify',
        'envelope.notify',
        'replay.complete',
      ]);
      expect(stale.frames[0]).toEqual({ op: 'cursor.expired', oldest: keptPositions[0] });
      expect(stale.notifies.map((f) => f.id)).toEqual(kept.map((e) => e.id));
      expect(stale.frames[3]).toEqual({ op: 'replay.complete', cursor: keptPositions[1], replayed: 2 });
      // Then live frames as usual. (The pause lets the gateway's stream reader pick up the newly
      // held partition: a frame published before that is only found by the periodic sweep.)
      await sleep(400);
      const live = await send(alice, [bob.handle], 'live');
      await stale.until(() => stale.notifies.length === 3, 2_000, 'the live frame');
      expect(stale.notifies[2].id).toBe(live.id);
      kept.push(live);
      keptPositions.push(await positionOf(bob.handle, live.id));
    } finally {
      stale.close();
    }

    // The cursor from before anything was kept (a fresh client) is expired as well.
    const origin = await resume({ created_at: 0, envelope_id: `01${'0'.repeat(24)}` });
    try {
      expect(origin.frames[0]).toEqual({ op: 'cursor.expired', oldest: keptPositions[0] });
      expect(origin.notifies.map((f) => f.id)).toEqual(kept.map((e) => e.id));
    } finally {
      origin.close();
    }

    // A cursor at the newest purged entry missed nothing: no cursor.expired.
    for (const [cursor, expected] of [
      [positions[3], kept],
      [keptPositions[0], kept.slice(1)],
    ] as const) {
      const fresh = await resume(cursor);
      try {
        expect(fresh.frames.map((f) => f.op)).toEqual([...expected.map(() => 'envelope.notify'), 'replay.complete']);
        expect(fresh.notifies.map((f) => f.id)).toEqual(expected.map((e) => e.id));
      } finally {
        fresh.close();
      }
    }
  });

  it(`purges in bounded batches: with ROOST_RETENTION_BATCH=${BATCH}, 50 old entries and their unheld bodies go, 3 new stay`, async () => {
    await org('rt3', 1);
    const [alice, bob, keeper] = await Promise.all([agent('@rt3.alice'), agent('@rt3.bob'), agent('@rtkeep.keeper')]);
    // Every 5th envelope is also held by an agent without retention: its body must stay, and the
    // batches must walk past it rather than stop at a batch that deletes fewer than BATCH.
    const old = [];
    for (let i = 0; i < 50; i++)
      old.push(await send(alice, i % 5 === 0 ? [bob.handle, keeper.handle] : [bob.handle], `batch ${i}`));
    const held = old.filter((_, i) => i % 5 === 0).map((e) => e.id);
    const fresh = [
      await send(alice, [bob.handle], 'new 0'),
      await send(alice, [bob.handle], 'new 1'),
      await send(alice, [bob.handle], 'new 2'),
    ];
    await age(
      old.map((e) => e.id),
      2,
    );
    const { rows } = await db.query<{ id: string }>('SELECT id::text FROM agents WHERE handle = $1', [bob.handle]);
    const bobId = Number(rows[0].id);

    const repository = op.app.get(RetentionRepository);
    const calls: Array<{ mailbox: number; limit: number; purged: number }> = [];
    const purgeEntries = repository.purgeEntries.bind(repository);
    const spy = jest.spyOn(repository, 'purgeEntries').mockImplementation(async (mailbox, cutoff, limit) => {
      const purged = await purgeEntries(mailbox, cutoff, limit);
      calls.push({ mailbox, limit, purged });
      return purged;
    });
    const before = await metric('roost_retention_purged_rows_total', '{table="mailbox_entries"}');
    let result: { entries: number; envelopes: number };
    try {
      result = await processor.purge();
    } finally {
      spy.mockRestore();
    }
    const bobs = calls.filter((c) => Number(c.mailbox) === bobId);
    expect(bobs.every((c) => c.limit === BATCH && c.purged <= BATCH)).toBe(true);
    expect(bobs.map((c) => c.purged)).toEqual([7, 7, 7, 7, 7, 7, 7, 1]);
    expect(result).toEqual({ entries: 50, envelopes: 40, handles: 0 });
    expect(await metric('roost_retention_purged_rows_total', '{table="mailbox_entries"}')).toBe(before + 50);

    expect(await inbox(bob.token)).toEqual(fresh.map((e) => e.id));
    const { rows: left } = await db.query('SELECT id FROM envelopes WHERE id = ANY($1) ORDER BY id', [
      old.map((e) => e.id),
    ]);
    expect(left.map((r) => r.id)).toEqual([...held].sort());
    for (const e of old.slice(0, 5)) expect(await fetchStatus(bob.token, e.id)).toBe(404);
    expect(await inbox(keeper.token)).toEqual(held);
    expect(await fetchStatus(keeper.token, held[1])).toBe(200);
  });

  it(`purges what a deleted sender delivered on the recipients' schedule, in batches of ${BATCH}, and frees its handle with the last envelope (EXTENSIONS.md §5)`, async () => {
    await org('rt4', 1);
    const [gone, reader] = await Promise.all([agent('@rtgone.sender'), agent('@rt4.reader')]);
    const old = [];
    for (let i = 0; i < 20; i++) old.push(await send(gone, [reader.handle], `from the departed ${i}`));
    const young = [await send(gone, [reader.handle], 'young 0'), await send(gone, [reader.handle], 'young 1')];
    await age(
      old.map((e) => e.id),
      2,
    );
    expect((await op.client.delete(`/_admin/agents/${encodeURIComponent(gone.handle)}`, op.adminToken)).status).toBe(
      204,
    );
    const handlesBefore = await metric('roost_retention_purged_rows_total', '{table="agents"}');

    // The reader's old entries go on its org's schedule; the deleted sender's envelopes no mailbox
    // holds any more go with them (the walk over its 22 envelopes takes several batches); the two
    // young ones keep the handle taken.
    expect(await processor.purge()).toEqual({ entries: 20, envelopes: 20, handles: 0 });
    expect(await inbox(reader.token)).toEqual(young.map((e) => e.id));
    for (const e of young) expect((await op.client.get(`/messages/${e.id}`, reader.token)).body.from).toBe(gone.handle);
    const { rows: left } = await db.query('SELECT id FROM envelopes WHERE id = ANY($1) ORDER BY id', [
      [...old, ...young].map((e) => e.id),
    ]);
    expect(left.map((r) => r.id)).toEqual(young.map((e) => e.id).sort());
    expect((await op.client.post('/_admin/agents', { handle: gone.handle }, op.adminToken)).status).toBe(409);

    await age(
      young.map((e) => e.id),
      2,
    );
    expect(await processor.purge()).toEqual({ entries: 2, envelopes: 2, handles: 1 });
    expect(await metric('roost_retention_purged_rows_total', '{table="agents"}')).toBe(handlesBefore + 1);
    expect((await op.client.post('/_admin/agents', { handle: gone.handle }, op.adminToken)).status).toBe(201);
  });
});
