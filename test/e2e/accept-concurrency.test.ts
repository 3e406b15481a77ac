import pg from 'pg';
import { ulid, type Cursor } from '#domain';
import { TestClient, type Reply } from '../support/client';
import { createTestDatabase } from '../support/database';
import { pidAlive, startAll, stopAll, type TestProcess } from '../support/processes';

/**
 * DESIGN.md invariants 2 and 3 across two operator processes sharing one Postgres: concurrent
 * accepts are each listed exactly once, in strictly increasing `created_at`, with no gap; and the
 * same envelope id raced from both processes is stored once, replayed with the original result,
 * or refused with the right 409.
 */

// A project-level testTimeout in jest.config.js is not applied (it is a global option in Jest 30).
jest.setTimeout(60_000);

const SENDERS = 10;
const PER_SENDER = 20;
const PAGE = 7;

let database: { url: string; drop: () => Promise<void> };
let nodes: TestProcess[] = [];
let clients: TestClient[];
let db: pg.Pool;
const adminToken = `admin-${ulid()}`;

async function agent(handle: string): Promise<string> {
  const reply = await clients[0].post('/_admin/agents', { handle, policy: 'open' }, adminToken);
  if (reply.status !== 201) throw new Error(`creating ${handle}: ${reply.status} ${reply.text}`);
  return reply.body.token as string;
}

const anyNode = () => clients[Math.floor(Math.random() * clients.length)];

function message(to: string, fields: Record<string, unknown> = {}): Record<string, unknown> {
  return { id: ulid(), to: [to], date_ms: Date.now(), content_parts: [{ type: 'text', text: 'hello' }], ...fields };
}

interface Row {
  id: string;
  created_at: number;
}

/** The whole `in` feed, `PAGE` rows at a time, each page from the other process, following next_cursor. */
async function listAll(token: string, order: 'asc' | 'desc'): Promise<Row[]> {
  const rows: Row[] = [];
  let cursor: Cursor | null = null;
  for (let page = 0; ; page++) {
    const after: string = cursor
      ? `&after_created_at=${cursor.created_at}&after_envelope_id=${cursor.envelope_id}`
      : '';
    const reply: Reply = await clients[page % clients.length].get(
      `/mailbox?order=${order}&limit=${PAGE}${after}`,
      token,
    );
    expect(reply.status).toBe(200);
    const headers = reply.body.envelope_headers as Array<{ id: string; created_at: number }>;
    expect(headers.length).toBeLessThanOrEqual(PAGE);
    rows.push(...headers.map((h) => ({ id: h.id, created_at: h.created_at })));
    cursor = reply.body.next_cursor;
    if (headers.length < PAGE) expect(cursor).toBeNull();
    if (cursor === null) return rows;
    expect(cursor).toEqual({ created_at: headers.at(-1)!.created_at, envelope_id: headers.at(-1)!.id });
  }
}

/** Per-mailbox `seq` in Postgres: 1..n with no gap, in the same order as `created_at`. */
async function seqsOf(handle: string): Promise<Array<{ seq: number; envelope_id: string; created_at: number }>> {
  const { rows } = await db.query<{ seq: string; envelope_id: string; created_at: string }>(
    `select m.seq, m.envelope_id, m.created_at from mailbox_entries m join agents a on a.id = m.mailbox_id
     where a.handle = $1 order by m.seq`,
    [handle],
  );
  return rows.map((r) => ({ seq: Number(r.seq), envelope_id: r.envelope_id, created_at: Number(r.created_at) }));
}

async function envelopeCount(ids: readonly string[]): Promise<Map<string, number>> {
  const { rows } = await db.query<{ id: string; n: string }>(
    'select id, count(*) as n from envelopes where id = any($1::text[]) group by id',
    [[...ids]],
  );
  return new Map(rows.map((r) => [r.id, Number(r.n)]));
}

beforeAll(async () => {
  database = await createTestDatabase('roost_e2e');
  const env = {
    DATABASE_URL: database.url,
    ROOST_ADMIN_TOKEN: adminToken,
    ROOST_LOG_LEVEL: 'warn',
    ROOST_HOST: '127.0.0.1',
  };
  // Both start together: migrations run under an advisory lock, so neither trips on the other.
  nodes = await startAll([
    { name: 'roost-a', env },
    { name: 'roost-b', env },
  ]);
  clients = nodes.map((node) => new TestClient(node.url));
  db = new pg.Pool({ connectionString: database.url, max: 2 });
}, 60_000);

afterAll(async () => {
  const pids = nodes.map((node) => node.pid).filter((pid): pid is number => pid !== undefined);
  await stopAll(nodes, 5_000);
  await db?.end();
  await database?.drop();
  // The processes are gone, not orphaned.
  expect(pids.filter(pidAlive)).toEqual([]);
});

describe('concurrent accepts on two processes', () => {
  it('200 envelopes from 10 senders, each to a random process: every one 202, listed exactly once, no gap, both orders', async () => {
    const recipient = '@conc.inbox';
    const inbox = await agent(recipient);
    const senders = await Promise.all(Array.from({ length: SENDERS }, (_, i) => agent(`@conc.sender${i}`)));
    const bodies = senders.flatMap((token) =>
      Array.from({ length: PER_SENDER }, (_, n) => ({ token, body: message(recipient, { subject: `n${n}` }) })),
    );

    const replies = await Promise.all(bodies.map(({ token, body }) => anyNode().post('/messages', body, token)));
    expect(replies.map((r) => r.status)).toEqual(bodies.map(() => 202));
    const acked = new Map(replies.map((r) => [r.body.id as string, r.body.created_at as number]));
    expect(acked.size).toBe(SENDERS * PER_SENDER);

    const asc = await listAll(inbox, 'asc');
    expect(asc).toHaveLength(acked.size);
    expect(new Set(asc.map((r) => r.id))).toEqual(new Set(acked.keys()));
    for (let i = 1; i < asc.length; i++) expect(asc[i].created_at).toBeGreaterThan(asc[i - 1].created_at);
    // Each listing row carries the created_at its 202 announced.
    for (const row of asc) expect(row.created_at).toBe(acked.get(row.id));

    const desc = await listAll(inbox, 'desc');
    expect(desc).toEqual([...asc].reverse());

    // The mailbox sequence in Postgres: 1..200, no gap, in created_at order.
    const seqs = await seqsOf(recipient);
    expect(seqs.map((s) => s.seq)).toEqual(asc.map((_, i) => i + 1));
    expect(seqs.map((s) => s.envelope_id)).toEqual(asc.map((r) => r.id));
  });

  it('multi-recipient sends over overlapping mailboxes in random order: no deadlock, one created_at per envelope', async () => {
    const handles = ['@multi.a', '@multi.b', '@multi.c', '@multi.d'];
    const inboxes = new Map(await Promise.all(handles.map(async (h) => [h, await agent(h)] as const)));
    const sender = await agent('@multi.sender');
    const shuffled = () => [...handles].sort(() => Math.random() - 0.5);
    const bodies = Array.from({ length: 100 }, () => {
      const [first, second, third] = shuffled();
      return message(first, { cc: [second, third] });
    });
    const replies = await Promise.all(bodies.map((body) => anyNode().post('/messages', body, sender)));
    expect(replies.map((r) => r.status)).toEqual(bodies.map(() => 202));
    const acked = new Map(replies.map((r) => [r.body.id as string, r.body.created_at as number]));
    for (const handle of handles) {
      const expected = bodies
        .filter((b) => [...(b.to as string[]), ...(b.cc as string[])].includes(handle))
        .map((b) => b.id as string);
      const listed = await listAll(inboxes.get(handle)!, 'asc');
      expect(listed.map((r) => r.id).sort()).toEqual(expected.sort());
      for (let i = 1; i < listed.length; i++) expect(listed[i].created_at).toBeGreaterThan(listed[i - 1].created_at);
      // Every recipient's copy carries the envelope's one created_at.
      for (const row of listed) expect(row.created_at).toBe(acked.get(row.id));
      expect((await seqsOf(handle)).map((s) => s.envelope_id)).toEqual(listed.map((r) => r.id));
    }
  });

  it('the same envelope raced to both processes: one envelope, both 202 with the original created_at', async () => {
    const recipient = '@race.inbox';
    const inbox = await agent(recipient);
    const sender = await agent('@race.sender');
    const rounds = Array.from({ length: 50 }, (_, n) => message(recipient, { subject: `race ${n}` }));
    const pairs = await Promise.all(
      rounds.map((body) =>
        Promise.all([clients[0].post('/messages', body, sender), clients[1].post('/messages', body, sender)]),
      ),
    );
    for (const [a, b] of pairs) {
      expect([a.status, b.status]).toEqual([202, 202]);
      // An idempotent replay returns the original result (EXTENSIONS.md, quirk 1).
      expect(b.body).toEqual(a.body);
    }
    const ids = rounds.map((body) => body.id as string);
    const counts = await envelopeCount(ids);
    expect(ids.map((id) => counts.get(id))).toEqual(ids.map(() => 1));
    const listed = await listAll(inbox, 'asc');
    expect(listed.map((r) => r.id).sort()).toEqual([...ids].sort());
    expect((await seqsOf(recipient)).map((s) => s.seq)).toEqual(ids.map((_, i) => i + 1));
  });

  it('same id, same sender, different bodies raced: one 202, one 409 RETRY_MISMATCH, the winner stored', async () => {
    const recipient = '@mismatch.inbox';
    const inbox = await agent(recipient);
    const sender = await agent('@mismatch.sender');
    const rounds = Array.from({ length: 20 }, () => {
      const first = message(recipient, { subject: 'first' });
      return [first, { ...first, subject: 'second' }];
    });
    const outcomes = await Promise.all(
      rounds.map(([x, y]) =>
        Promise.all([clients[0].post('/messages', x, sender), clients[1].post('/messages', y, sender)]),
      ),
    );
    for (const [i, [a, b]] of outcomes.entries()) {
      const statuses = [a.status, b.status].sort();
      expect(statuses).toEqual([202, 409]);
      const loser = a.status === 409 ? a : b;
      expect(loser.body.error.code).toBe('RETRY_MISMATCH');
      const winner = a.status === 202 ? rounds[i][0] : rounds[i][1];
      const stored = await anyNode().get(`/messages/${winner.id as string}`, inbox);
      expect(stored.status).toBe(200);
      expect(stored.body.subject).toBe(winner.subject);
    }
    const ids = rounds.map(([x]) => x.id as string);
    const counts = await envelopeCount(ids);
    expect(ids.map((id) => counts.get(id))).toEqual(ids.map(() => 1));
    expect((await listAll(inbox, 'asc')).map((r) => r.id).sort()).toEqual([...ids].sort());
  });

  it('same id from two senders raced: one 202, one 409 ID_COLLISION, stored under the winner', async () => {
    const recipient = '@collide.inbox';
    const inbox = await agent(recipient);
    const one = await agent('@collide.one');
    const two = await agent('@collide.two');
    const rounds = Array.from({ length: 20 }, () => message(recipient));
    const outcomes = await Promise.all(
      rounds.map((body) =>
        Promise.all([clients[0].post('/messages', body, one), clients[1].post('/messages', body, two)]),
      ),
    );
    for (const [i, [a, b]] of outcomes.entries()) {
      expect([a.status, b.status].sort()).toEqual([202, 409]);
      expect((a.status === 409 ? a : b).body.error.code).toBe('ID_COLLISION');
      const stored = await anyNode().get(`/messages/${rounds[i].id as string}`, inbox);
      expect(stored.body.from).toBe(a.status === 202 ? '@collide.one' : '@collide.two');
    }
    const ids = rounds.map((body) => body.id as string);
    const counts = await envelopeCount(ids);
    expect(ids.map((id) => counts.get(id))).toEqual(ids.map(() => 1));
    expect((await listAll(inbox, 'asc')).map((r) => r.id).sort()).toEqual([...ids].sort());
  });
});
