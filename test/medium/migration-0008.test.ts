import { sql } from 'kysely';
import pg from 'pg';
import { loadMigrations, migrate, openPglite, openPostgres, type Database } from '#db';
import { createTestDatabase } from '../support/database';

/**
 * Migration 0008 (the parent check of mailbox entries, roost_entries_check_parents of 0007):
 * (a) on a database that grew from empty, the check finds parents by primary key, never by a
 *     sequential scan, even once plpgsql has kept a generic plan made while the tables were tiny
 *     (0007's did scan `envelopes` whole, on every statement, as it grew). Postgres and PGlite;
 * (b) it reads the parents FOR KEY SHARE, so an entry inserted while another transaction deletes
 *     its envelope or mailbox is never left without it: the delete waits for the insert (and then
 *     deletes the entry), or the insert waits for the delete and fails (23503). Postgres only: PGlite
 *     has one connection, so nothing runs concurrently there.
 */
const T = 1_790_000_000_000;
const ID = (n: number) => `01JZ${String(n).padStart(22, '0')}`;

/** Agents 1..n, each with its mailbox, and envelopes ID(from..to) sent by agent 1. */
async function seedAgents(db: Database['db'], n: number): Promise<void> {
  await sql`insert into agents (id, handle, owner, token_hash, policy, display_name, visibility, created_at, updated_at)
            overriding system value
            select g, '@solo.a' || g, 'solo', 't' || g, 'open', 'A', 'public', ${T}, ${T} from generate_series(1, ${n}::int) g`.execute(
    db,
  );
  await sql`insert into mailboxes (agent_id, last_seq, last_created_at) select id, 0, 0 from agents`.execute(db);
}

async function addEnvelopes(db: Database['db'], from: number, to: number): Promise<void> {
  await sql`insert into envelopes (id, sender_id, created_at, received_ms, body, header, recipients, self_addressed, search)
            select '01JZ' || lpad(g::text, 22, '0'), 1, ${T}::bigint + g, ${T}::bigint + g, '{}', '{}', '{@solo.a2}', false,
                   to_tsvector('simple', 'text ' || g)
            from generate_series(${from}::int, ${to}::int) g`.execute(db);
}

const entrySql = (mailbox: number, seq: number, envelope: number) =>
  `insert into mailbox_entries (mailbox_id, seq, envelope_id, created_at, kind)
   values (${mailbox}, ${seq}, '${ID(envelope)}', ${T + envelope}, 'to')`;

/** Entries whose envelope or mailbox is gone: must always be 0. */
async function orphans(db: Database['db']): Promise<number> {
  const result = await sql<{ n: number }>`
    select count(*)::int as n from mailbox_entries m
    where not exists (select 1 from envelopes e where e.id = m.envelope_id)
       or not exists (select 1 from mailboxes b where b.agent_id = m.mailbox_id)`.execute(db);
  return result.rows[0].n;
}

async function open(backend: 'postgres' | 'pglite', prefix: string) {
  if (backend === 'pglite') return { database: await openPglite('memory://'), url: '', drop: undefined };
  const created = await createTestDatabase(prefix);
  // One connection: plpgsql keeps its plans per connection.
  const database = openPostgres({ url: created.url, poolSize: 1, poolMin: 1, statementTimeoutMs: 30_000 });
  return { database, url: created.url, drop: created.drop };
}

describe.each(['postgres', 'pglite'] as const)('migration 0008 on %s: the parent check probes by key', (backend) => {
  let database: Database;
  let drop: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    ({ database, drop } = await open(backend, 'roost_m8a'));
    const migrations = loadMigrations();
    const old = migrations.filter((m) => m.version < '0008');
    expect(old.at(-1)?.version).toBe('0007_entries_without_row_fks');
    await migrate(database, old);
    expect(await migrate(database, migrations.slice(0, old.length + 1))).toEqual(['0008_entries_parent_check_locks']);
  });
  afterAll(async () => {
    await database?.close();
    await drop?.();
  });

  it('keeps finding parents by primary key after the tables grow from empty', async () => {
    const db = database.db;
    // A young database: one mailbox, a few envelopes, analyzed (as autovacuum does early on), so
    // that a sequential scan is the cheapest plan for the check's queries ...
    await seedAgents(db, 2);
    await addEnvelopes(db, 1, 20);
    await sql`analyze envelopes`.execute(db);
    await sql`analyze mailboxes`.execute(db);
    // ... and enough checks on this connection for plpgsql to keep a generic plan.
    for (let n = 1; n <= 12; n++) await sql.raw(entrySql(2, n, n)).execute(db);
    // The tables grow; nothing makes plpgsql plan again.
    await addEnvelopes(db, 21, 20_000);
    const counts = async (trx: typeof db) =>
      (
        await sql<{ relname: string; seq_scan: number; idx_scan: number }>`
          select relname, seq_scan::int, coalesce(idx_scan, 0)::int as idx_scan from pg_stat_xact_user_tables
          where relname in ('envelopes', 'mailboxes') order by relname`.execute(trx)
      ).rows;
    const scans = await db.transaction().execute(async (trx) => {
      const before = await counts(trx);
      for (let n = 13; n <= 17; n++) await sql.raw(entrySql(2, n, n)).execute(trx);
      // The scans of these five checks only (the inserts themselves read neither table).
      return (await counts(trx)).map((row, i) => ({
        relname: row.relname,
        seq_scan: row.seq_scan - before[i].seq_scan,
        idx_scan: row.idx_scan - before[i].idx_scan,
      }));
    });
    expect(scans).toEqual([
      { relname: 'envelopes', seq_scan: 0, idx_scan: 5 },
      { relname: 'mailboxes', seq_scan: 0, idx_scan: 5 },
    ]);
    // And the rule still holds: an entry without its envelope or mailbox fails.
    await expect(sql.raw(entrySql(2, 18, 20_001)).execute(db)).rejects.toMatchObject({ code: '23503' });
    await expect(sql.raw(entrySql(3, 1, 1)).execute(db)).rejects.toMatchObject({ code: '23503' });
    expect(await orphans(db)).toBe(0);
  });
});

describe('migration 0008 on postgres: an entry inserted while its parent is deleted', () => {
  let database: Database;
  let url: string;
  let drop: (() => Promise<void>) | undefined;
  const clients: pg.Client[] = [];

  const client = async (): Promise<pg.Client> => {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    clients.push(c);
    return c;
  };
  const pidOf = async (c: pg.Client) => (await c.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0].pid;

  /** 'waiting' once `pid` waits for a lock, 'done' if `work` settles first. */
  async function waitsOrSettles(admin: pg.Client, pid: number, work: Promise<unknown>): Promise<'waiting' | 'done'> {
    let settled = false;
    work.then(
      () => (settled = true),
      () => (settled = true),
    );
    for (let i = 0; i < 500; i++) {
      if (settled) return 'done';
      const row = await admin.query<{ w: string | null }>(
        'select wait_event_type as w from pg_stat_activity where pid = $1',
        [pid],
      );
      if (row.rows[0]?.w === 'Lock') return 'waiting';
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    throw new Error('neither settled nor waiting on a lock');
  }

  beforeAll(async () => {
    ({ database, url, drop } = await open('postgres', 'roost_m8b'));
    await migrate(database);
    await seedAgents(database.db, 4);
    await addEnvelopes(database.db, 1, 10);
  });
  afterAll(async () => {
    for (const c of clients) await c.end().catch(() => undefined);
    await database?.close();
    await drop?.();
  });

  it('a delete of the envelope waits for the inserting transaction, then deletes its entry', async () => {
    const [inserter, deleter, admin] = [await client(), await client(), await client()];
    await inserter.query('begin');
    await inserter.query(entrySql(2, 1, 1));
    const pid = await pidOf(deleter);
    const deleting = deleter.query('delete from envelopes where id = $1', [ID(1)]);
    expect(await waitsOrSettles(admin, pid, deleting)).toBe('waiting');
    await inserter.query('commit');
    expect((await deleting).rowCount).toBe(1);
    const left = await admin.query('select 1 from mailbox_entries where envelope_id = $1', [ID(1)]);
    expect(left.rows).toEqual([]);
    expect(await orphans(database.db)).toBe(0);
  });

  it('an insert for a mailbox being deleted waits for the delete, then fails (23503)', async () => {
    const [inserter, deleter, admin] = [await client(), await client(), await client()];
    await deleter.query('begin');
    expect((await deleter.query('delete from mailboxes where agent_id = 3')).rowCount).toBe(1);
    const pid = await pidOf(inserter);
    const inserting = inserter.query(entrySql(3, 1, 2));
    expect(await waitsOrSettles(admin, pid, inserting)).toBe('waiting');
    await deleter.query('commit');
    await expect(inserting).rejects.toMatchObject({ code: '23503' });
    expect(await orphans(database.db)).toBe(0);
  });

  it('an insert for an envelope being deleted waits for the delete, then fails (23503)', async () => {
    const [inserter, deleter, admin] = [await client(), await client(), await client()];
    await deleter.query('begin');
    expect((await deleter.query('delete from envelopes where id = $1', [ID(3)])).rowCount).toBe(1);
    const pid = await pidOf(inserter);
    const inserting = inserter.query(entrySql(4, 1, 3));
    expect(await waitsOrSettles(admin, pid, inserting)).toBe('waiting');
    await deleter.query('commit');
    await expect(inserting).rejects.toMatchObject({ code: '23503' });
    expect(await orphans(database.db)).toBe(0);
  });

  it('a delete of the mailbox waits for the inserting transaction, then deletes its entry', async () => {
    const [inserter, deleter, admin] = [await client(), await client(), await client()];
    await inserter.query('begin');
    await inserter.query(entrySql(4, 1, 4));
    const pid = await pidOf(deleter);
    const deleting = deleter.query('delete from mailboxes where agent_id = 4');
    expect(await waitsOrSettles(admin, pid, deleting)).toBe('waiting');
    await inserter.query('commit');
    expect((await deleting).rowCount).toBe(1);
    expect((await admin.query('select 1 from mailbox_entries where mailbox_id = 4')).rows).toEqual([]);
    expect(await orphans(database.db)).toBe(0);
  });
});
