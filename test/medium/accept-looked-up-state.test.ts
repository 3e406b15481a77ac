import { sql } from 'kysely';
import { AcceptBatcher, type AcceptJob } from '#core';
import { loadConfig } from '#config';
import { AgentsRepository, EnvelopesRepository, migrate, openPglite, openPostgres, type Database } from '#db';
import { Metrics } from '#metrics';
import { createTestDatabase } from '../support/database';

/**
 * The lock-free accept path fed by the sender lookup's mailbox states (issue 16): the lookup
 * (`findSendersAndRecipients`) reads each recipient's `last_seq` with its `last_created_at`, and a
 * batcher writes against the newer of that and what its own commits left, so a fresh node and two
 * nodes taking turns on a mailbox write in one statement; a state another writer beat still ends
 * gapless, ordered, each envelope once, through the locking path. Real Postgres (two pools as two
 * nodes) and embedded PGlite.
 */
const T = 1_790_000_000_000;
let n = 0;

interface Node {
  batcher: AcceptBatcher;
  calls: { lockFree: number; locked: number };
  metrics: Metrics;
}

function node(database: Database, embedded: boolean): Node {
  const config = loadConfig({
    DATABASE_URL: embedded ? '' : 'postgres://postgres@127.0.0.1:5432/unused',
    ROOST_ADMIN_TOKEN: 'admin-token-for-the-test',
  });
  const envelopes = new EnvelopesRepository(database);
  const calls = { lockFree: 0, locked: 0 };
  const insertAllIfCurrent = envelopes.insertAllIfCurrent.bind(envelopes);
  envelopes.insertAllIfCurrent = (...args) => (calls.lockFree++, insertAllIfCurrent(...args));
  const transaction = envelopes.transaction.bind(envelopes);
  envelopes.transaction = (fn) => (calls.locked++, transaction(fn));
  const metrics = new Metrics();
  return { batcher: new AcceptBatcher(envelopes, metrics, config), calls, metrics };
}

describe.each(['postgres', 'pglite'] as const)('accept with looked-up mailbox states on %s', (backend) => {
  let database: Database;
  let second: Database | undefined;
  let drop: (() => Promise<void>) | undefined;
  let agents: AgentsRepository;

  beforeAll(async () => {
    if (backend === 'postgres') {
      const created = await createTestDatabase('roost_seed');
      drop = created.drop;
      database = openPostgres({ url: created.url, poolSize: 4, statementTimeoutMs: 30_000 });
      second = openPostgres({ url: created.url, poolSize: 4, statementTimeoutMs: 30_000 });
    } else {
      database = await openPglite('memory://');
    }
    await migrate(database);
    agents = new AgentsRepository(database);
    await sql`insert into agents (handle, owner, token_hash, policy, display_name, visibility, created_at, updated_at)
              values ('@s.alice', 's', 'tok-alice', 'open', 'A', 'public', ${T}, ${T}),
                     ('@s.bob', 's', 'tok-bob', 'open', 'B', 'public', ${T}, ${T}),
                     ('@s.carol', 's', 'tok-carol', 'open', 'C', 'public', ${T}, ${T})`.execute(database.db);
    await sql`insert into mailboxes (agent_id) select id from agents`.execute(database.db);
  });
  afterAll(async () => {
    await second?.close();
    await database?.close();
    await drop?.();
  });

  /** What the accept path does per send: look the recipients up with the sender, then build the job. */
  async function lookedUpJob(handles: string[], selfAddressed = false): Promise<AcceptJob> {
    const { senders, recipients } = await agents.findSendersAndRecipients(['tok-alice'], handles);
    const sender = senders.get('tok-alice')!.agent;
    const id = `01JZSEED${String(++n).padStart(18, '0')}`;
    return {
      envelopeId: id,
      senderId: sender.id,
      recipients: handles.map((handle) => {
        const r = recipients.get(handle)!;
        return {
          agentId: r.id,
          handle,
          kind: 'to' as const,
          lastSeq: r.last_seq ?? undefined,
          lastCreatedAt: r.last_created_at ?? undefined,
        };
      }),
      stored: {
        id,
        from: '@s.alice',
        to: handles,
        date_ms: T,
        content_parts: [{ type: 'text', text: 'x' }],
      },
      body: JSON.stringify({ id }),
      derived: { type_hint: 'text', size_hint: 1 },
      extensions: {},
      selfAddressed,
      searchText: 'x',
      fileIds: [],
    };
  }

  /** A mailbox's entries in seq order: gapless from 1, created_at strictly increasing, matching its state. */
  async function mailbox(handle: string): Promise<string[]> {
    const rows = (
      await sql<{ seq: number; created_at: number; envelope_id: string }>`
        select e.seq, e.created_at, e.envelope_id from mailbox_entries e join agents a on a.id = e.mailbox_id
        where a.handle = ${handle} order by e.seq`.execute(database.db)
    ).rows;
    rows.forEach((row, i) => expect(Number(row.seq)).toBe(i + 1));
    for (let i = 1; i < rows.length; i++)
      expect(Number(rows[i].created_at)).toBeGreaterThan(Number(rows[i - 1].created_at));
    const state = (
      await sql<{ last_seq: number; last_created_at: number }>`
        select m.last_seq, m.last_created_at from mailboxes m join agents a on a.id = m.agent_id
        where a.handle = ${handle}`.execute(database.db)
    ).rows[0];
    expect(Number(state.last_seq)).toBe(rows.length);
    if (rows.length > 0) expect(Number(state.last_created_at)).toBe(Number(rows.at(-1)!.created_at));
    return rows.map((row) => row.envelope_id);
  }

  it('the lookup returns each recipient mailbox state, the sender itself included when named', async () => {
    const { senders, recipients } = await agents.findSendersAndRecipients(['tok-alice'], ['@s.bob', '@s.alice']);
    expect(recipients.get('@s.bob')).toMatchObject({ last_seq: 0, last_created_at: 0 });
    expect(recipients.get('@s.alice')).toMatchObject({ last_seq: 0, last_created_at: 0 });
    expect(senders.get('tok-alice')).not.toHaveProperty('last_seq');
  });

  it("a fresh node writes a mailbox's first envelope (and a self-addressed copy) in one statement", async () => {
    const a = node(database, backend === 'pglite');
    const job = await lookedUpJob(['@s.bob', '@s.alice'], true);
    await expect(a.batcher.submit(job)).resolves.toMatchObject({ kind: 'stored', entries: [{ seq: 1 }, { seq: 1 }] });
    expect(a.calls).toEqual({ lockFree: 1, locked: 0 });
    expect(await mailbox('@s.bob')).toEqual([job.envelopeId]);
    expect(await mailbox('@s.alice')).toEqual([job.envelopeId]);
  });

  if (backend === 'pglite') return;

  it('two nodes taking turns on a mailbox stay lock-free; a state another node beat falls back to the lock, gapless', async () => {
    const a = node(database, false);
    const b = node(second!, false);
    const sent: string[] = [];
    for (let i = 0; i < 10; i++) {
      const job = await lookedUpJob(['@s.carol']);
      await (i % 2 === 0 ? a : b).batcher.submit(job);
      sent.push(job.envelopeId);
    }
    expect([a.calls, b.calls]).toEqual([
      { lockFree: 5, locked: 0 },
      { lockFree: 5, locked: 0 },
    ]);
    // a's lookup read carol's state, then b wrote to carol: a's statement fails whole, the lock writes.
    const stale = await lookedUpJob(['@s.carol']);
    const between = await lookedUpJob(['@s.carol']);
    await b.batcher.submit(between);
    await expect(a.batcher.submit(stale)).resolves.toMatchObject({ kind: 'stored', entries: [{ seq: 12 }] });
    sent.push(between.envelopeId, stale.envelopeId);
    expect(a.calls).toEqual({ lockFree: 6, locked: 1 });
    expect((await a.metrics.acceptLockFallbacks.get()).values[0].value).toBe(1);
    expect(await mailbox('@s.carol')).toEqual(sent);
  });

  it('two nodes writing one mailbox at once store every envelope once, gapless and in created_at order', async () => {
    const a = node(database, false);
    const b = node(second!, false);
    const before = await mailbox('@s.bob');
    const ids = await Promise.all(
      Array.from({ length: 60 }, async (_, i) => {
        const job = await lookedUpJob(i % 3 === 0 ? ['@s.bob', '@s.carol'] : ['@s.bob']);
        await expect((i % 2 === 0 ? a : b).batcher.submit(job)).resolves.toMatchObject({ kind: 'stored' });
        return job.envelopeId;
      }),
    );
    const stored = await mailbox('@s.bob');
    expect(stored.slice(0, before.length)).toEqual(before);
    expect([...stored.slice(before.length)].sort()).toEqual([...ids].sort());
    await mailbox('@s.carol');
  });
});
