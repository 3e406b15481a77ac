import pg from 'pg';
import { startOperator, envelope, type TestOperator } from '../support/operator';

/**
 * Two api nodes on one database, both writing to the same mailboxes. Each node writes against the
 * newer of the mailbox state its own commits left and the one the sender's lookup read (one
 * statement, no lock); when the other node moved a mailbox on since, that statement must fail
 * whole and the batch take the locking path, so the mailbox stays gapless and ordered, with
 * nothing lost or doubled. Both nodes look every send up afresh (ROOST_ACCEPT_KEEP_LOOKUPS_MS=0,
 * the setting for pods taking turns on hot mailboxes): a kept lookup carries no mailbox state
 * (test/medium/kept-lookups.test.ts covers two nodes with kept lookups).
 */
describe('accept path with two api nodes writing to one mailbox', () => {
  let a: TestOperator;
  let b: TestOperator;
  let db: pg.Client;

  beforeAll(async () => {
    a = await startOperator({ backend: 'postgres', env: { ROOST_ACCEPT_KEEP_LOOKUPS_MS: '0' } });
    b = await startOperator({
      backend: 'postgres',
      databaseUrl: a.config.databaseUrl!,
      env: { ROOST_ADMIN_TOKEN: a.adminToken, ROOST_ACCEPT_KEEP_LOOKUPS_MS: '0' },
    });
    db = new pg.Client({ connectionString: a.config.databaseUrl! });
    await db.connect();
  });

  afterAll(async () => {
    await db?.end();
    await b?.close();
    await a?.close();
  });

  const fallbacks = async (op: TestOperator): Promise<number> => {
    const text = (await op.client.get('/metrics')).text;
    return Number(/^roost_accept_lock_fallbacks_total (\d+)/m.exec(text)?.[1] ?? NaN);
  };

  /** Bob's mailbox rows in seq order, checked gapless from 1 and strictly increasing in created_at. */
  const mailboxOf = async (handle: string): Promise<string[]> => {
    const { rows } = await db.query<{ seq: number; created_at: string; envelope_id: string }>(
      `select e.seq::int as seq, e.created_at, e.envelope_id from mailbox_entries e
       join agents g on g.id = e.mailbox_id where g.handle = $1 order by e.seq`,
      [handle],
    );
    rows.forEach((row, i) => expect(row.seq).toBe(i + 1));
    for (let i = 1; i < rows.length; i++)
      expect(BigInt(rows[i].created_at)).toBeGreaterThan(BigInt(rows[i - 1].created_at));
    const { rows: state } = await db.query<{ last_seq: number }>(
      'select m.last_seq::int as last_seq from mailboxes m join agents g on g.id = m.agent_id where g.handle = $1',
      [handle],
    );
    expect(state[0].last_seq).toBe(rows.length);
    return rows.map((row) => row.envelope_id);
  };

  it('alternating and concurrent sends through both nodes land once each, gapless and in created_at order', async () => {
    const alice = await a.agent('@n2.alice');
    const bob = await a.agent('@n2.bob');
    const before = (await fallbacks(a)) + (await fallbacks(b));
    const sent: string[] = [];
    const send = async (op: TestOperator) => {
      const body = envelope('@n2.bob');
      const reply = await op.client.post('/messages', body, alice);
      expect(reply.status).toBe(202);
      sent.push(body.id as string);
    };
    // Taking turns: each node's memory is stale at every switch, but the sender's lookup read the
    // other node's commit, so no statement fails and nothing falls back to the lock.
    for (let i = 0; i < 10; i++) await send(i % 2 === 0 ? a : b);
    expect((await fallbacks(a)) + (await fallbacks(b))).toBe(before);
    // At once: a lookup may be beaten by the other node's commit (a fallback, never a loss).
    await Promise.all(Array.from({ length: 60 }, (_, i) => send(i % 2 === 0 ? a : b)));
    const stored = await mailboxOf('@n2.bob');
    expect([...stored].sort()).toEqual([...sent].sort());
    // The listing (created_at order) agrees with the seq order.
    const listed = await b.client.get('/mailbox?limit=1000', bob);
    const ids = listed.body.envelope_headers.map((header: { id: string }) => header.id);
    expect(
      ids.length === stored.length && (ids.join() === stored.join() || ids.join() === [...stored].reverse().join()),
    ).toBe(true);
  });

  it("taking turns with the sender's own copy: its mailbox state comes with its lookup, so no fallback either", async () => {
    const alice = await a.agent('@n5.alice');
    await a.agent('@n5.bob');
    const before = (await fallbacks(a)) + (await fallbacks(b));
    const sent: string[] = [];
    for (let i = 0; i < 6; i++) {
      const body = envelope(['@n5.bob', '@n5.alice']);
      expect((await (i % 2 === 0 ? a : b).client.post('/messages', body, alice)).status).toBe(202);
      sent.push(body.id as string);
    }
    expect((await fallbacks(a)) + (await fallbacks(b))).toBe(before);
    expect(await mailboxOf('@n5.alice')).toEqual(sent);
    expect(await mailboxOf('@n5.bob')).toEqual(sent);
  });

  it('a node whose remembered state went stale still answers retries and collisions exactly', async () => {
    const alice = await a.agent('@n3.alice');
    const mallory = await a.agent('@n3.mallory');
    await a.agent('@n3.bob');
    const first = envelope('@n3.bob', { subject: 'first' });
    expect((await a.client.post('/messages', first, alice)).status).toBe(202); // a remembers bob
    const second = envelope('@n3.bob', { subject: 'second' });
    expect((await b.client.post('/messages', second, alice)).status).toBe(202); // b moves bob on
    // Through a (its memory stale, the lookups not): an identical retry replays, a changed body or
    // another sender is refused.
    const replay = await a.client.post('/messages', second, alice);
    expect(replay.status).toBe(202);
    expect(replay.body.id).toBe(second.id);
    expect((await a.client.post('/messages', { ...second, subject: 'changed' }, alice)).body.error.code).toBe(
      'RETRY_MISMATCH',
    );
    expect((await a.client.post('/messages', second, mallory)).body.error.code).toBe('ID_COLLISION');
    const third = envelope('@n3.bob', { subject: 'third' });
    expect((await a.client.post('/messages', third, alice)).status).toBe(202);
    expect(await mailboxOf('@n3.bob')).toEqual([first.id, second.id, third.id]);
    // Only a writes to carol, so its states stay current: a retry or a collision is no contention.
    await a.agent('@n3.carol');
    const counted = await fallbacks(a);
    const toCarol = envelope('@n3.carol');
    expect((await a.client.post('/messages', toCarol, alice)).status).toBe(202);
    expect((await a.client.post('/messages', toCarol, alice)).status).toBe(202);
    expect((await a.client.post('/messages', toCarol, mallory)).body.error.code).toBe('ID_COLLISION');
    const next = envelope('@n3.carol');
    expect((await a.client.post('/messages', next, alice)).status).toBe(202);
    expect(await fallbacks(a)).toBe(counted);
    expect(await mailboxOf('@n3.carol')).toEqual([toCarol.id, next.id]);
  });
  it('times each stage of a send once (roost_accept_stage_seconds), and no other route as a send', async () => {
    const alice = await a.agent('@n4.alice');
    const bob = await a.agent('@n4.bob');
    const stages = ['auth', 'prepare', 'queue', 'write', 'publish'];
    const counts = async () => {
      const text = (await a.client.get('/metrics')).text;
      return stages.map((stage) =>
        Number(new RegExp(`^roost_accept_stage_seconds_count\\{stage="${stage}"\\} (\\d+)`, 'm').exec(text)?.[1] ?? 0),
      );
    };
    const before = await counts();
    expect((await a.client.post('/messages', envelope('@n4.bob'), alice)).status).toBe(202);
    expect((await a.client.get('/mailbox', bob)).status).toBe(200); // an agent route that is not a send
    expect(await counts()).toEqual(before.map((n) => n + 1));
  });
});
