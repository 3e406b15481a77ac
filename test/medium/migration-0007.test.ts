import { sql } from 'kysely';
import {
  AgentsRepository,
  EnvelopesRepository,
  loadMigrations,
  migrate,
  openPglite,
  openPostgres,
  type Database,
} from '#db';
import { createTestDatabase, tableRows } from '../support/database';

/**
 * Migration 0007 (mailbox_entries without row-level foreign keys: issue 16) on a database that
 * holds data written under 0001–0006: every row survives, and afterwards the rules the foreign keys
 * kept still hold, per statement: no entry can be inserted without its mailbox or envelope, and no
 * entry outlives its envelope (retention, the receipt cascade) or its mailbox (agent deletion, a
 * direct delete). On Postgres and on PGlite.
 */
const TABLES = ['agents', 'mailboxes', 'envelopes', 'mailbox_entries', 'retention_marks'];
const T = 1_790_000_000_000;
const ID = (n: number) => `01JZ${String(n).padStart(22, '0')}`;

async function writeOldData(database: Database): Promise<void> {
  const db = database.db;
  await sql`insert into agents (id, handle, owner, token_hash, policy, display_name, visibility, created_at, updated_at)
            overriding system value values
              (1, '@solo.x', 'solo', 't1', 'open', 'X', 'public', ${T}, ${T}),
              (2, '@solo.y', 'solo', 't2', 'open', 'Y', 'public', ${T}, ${T}),
              (3, '@solo.z', 'solo', 't3', 'open', 'Z', 'public', ${T}, ${T})`.execute(db);
  await sql`insert into mailboxes (agent_id, last_seq, last_created_at) values (1, 2, ${T + 5}), (2, 3, ${T + 4}), (3, 1, ${T + 3})`.execute(
    db,
  );
  // x → y (1, 2), x → y+z (3), x → x (4), y → x receipt for 1 (5).
  const envelope = (n: number, sender: number, recipients: string[], receiptFor: string | null = null) =>
    sql`(${ID(n)}, ${sender}, ${T + n}, ${T + n}, ${`{"id":"${ID(n)}"}`}, ${`{"op":"envelope.notify","id":"${ID(n)}"}`},
         ${recipients}::text[], ${n === 4}, to_tsvector('simple', ${`text ${n}`}), ${receiptFor},
         ${receiptFor ? 'accepted' : null}, null)`;
  await sql`insert into envelopes (id, sender_id, created_at, received_ms, body, header, recipients, self_addressed, search,
                                   receipt_for, receipt_status, guard_override)
            values ${sql.join([
              envelope(1, 1, ['@solo.y']),
              envelope(2, 1, ['@solo.y']),
              envelope(3, 1, ['@solo.y', '@solo.z']),
              envelope(4, 1, ['@solo.x']),
              envelope(5, 2, ['@solo.x'], ID(1)),
            ])}`.execute(db);
  await sql`insert into mailbox_entries (mailbox_id, seq, envelope_id, created_at, kind, read, read_at) values
              (2, 1, ${ID(1)}, ${T + 1}, 'to', true, ${T + 9}), (2, 2, ${ID(2)}, ${T + 2}, 'to', false, null),
              (2, 3, ${ID(3)}, ${T + 3}, 'to', false, null), (3, 1, ${ID(3)}, ${T + 3}, 'cc', false, null),
              (1, 1, ${ID(4)}, ${T + 4}, 'to', false, null), (1, 2, ${ID(5)}, ${T + 5}, 'to', false, null)`.execute(db);
  await sql`insert into retention_marks (mailbox_id, purged_created_at, purged_envelope_id) values (2, ${T}, ${ID(0)})`.execute(
    db,
  );
}

const snapshot = (database: Database) => tableRows(database, TABLES);

/** Entries as `mailbox:seq`, in order. */
async function entries(database: Database): Promise<string[]> {
  const result = await sql<{
    k: string;
  }>`select mailbox_id || ':' || seq as k from mailbox_entries order by mailbox_id, seq`.execute(database.db);
  return result.rows.map((row) => row.k);
}

/** Entries whose envelope or mailbox is gone: must always be 0. */
async function orphans(database: Database): Promise<number> {
  const result = await sql<{ n: number }>`
    select count(*)::int as n from mailbox_entries m
    where not exists (select 1 from envelopes e where e.id = m.envelope_id)
       or not exists (select 1 from mailboxes b where b.agent_id = m.mailbox_id)`.execute(database.db);
  return result.rows[0].n;
}

describe.each(['postgres', 'pglite'] as const)('migration 0007 on %s: entry rules per statement', (backend) => {
  let database: Database;
  let drop: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    if (backend === 'postgres') {
      const created = await createTestDatabase('roost_m7');
      drop = created.drop;
      database = openPostgres({ url: created.url, poolSize: 2, statementTimeoutMs: 30_000 });
    } else {
      database = await openPglite('memory://');
    }
    const migrations = loadMigrations().filter((m) => m.version < '0008');
    const old = migrations.filter((m) => m.version < '0007');
    expect(old.at(-1)?.version).toBe('0006_agent_search');
    await migrate(database, old);
    await writeOldData(database);
    const before = await snapshot(database);
    expect(await migrate(database, migrations)).toEqual(['0007_entries_without_row_fks']);
    expect(await snapshot(database)).toEqual(before);
  });
  afterAll(async () => {
    await database?.close();
    await drop?.();
  });

  it('replaces the row-level foreign keys of mailbox_entries', async () => {
    const fks = await sql<{ conname: string }>`
      select conname from pg_constraint where conrelid = 'mailbox_entries'::regclass and contype = 'f'`.execute(
      database.db,
    );
    expect(fks.rows).toEqual([]);
  });

  it('refuses an entry without its mailbox or its envelope (23503), and writes nothing', async () => {
    const before = await entries(database);
    await expect(
      sql`insert into mailbox_entries (mailbox_id, seq, envelope_id, created_at, kind)
          values (2, 4, ${ID(2)}, ${T + 6}, 'to'), (99, 1, ${ID(2)}, ${T + 6}, 'to')`.execute(database.db),
    ).rejects.toMatchObject({ code: '23503' });
    await expect(
      sql`insert into mailbox_entries (mailbox_id, seq, envelope_id, created_at, kind)
          values (2, 4, ${ID(2)}, ${T + 6}, 'to'), (3, 2, ${ID(99)}, ${T + 6}, 'to')`.execute(database.db),
    ).rejects.toMatchObject({ code: '23503' });
    expect(await entries(database)).toEqual(before);
  });

  it('the accept statement to a mailbox that is gone writes nothing and says stale', async () => {
    const envelopes = new EnvelopesRepository(database);
    const row = {
      id: ID(50),
      sender_id: 1,
      created_at: T + 50,
      received_ms: T + 50,
      body: '{}',
      header: '{}',
      recipients: ['@solo.gone'],
      self_addressed: false,
      search_text: 'gone',
      receipt_for: null,
      receipt_status: null,
      guard_override: null,
    };
    // Today's statement also checks the policy epoch: its function (0009) on this 0007 schema.
    const policyEpoch = loadMigrations().filter((m) => m.version === '0009_policy_epoch');
    expect(await migrate(database, policyEpoch)).toEqual(['0009_policy_epoch']);
    // No mailbox state to advance (as if the planner never saw it): the parent check alone refuses.
    expect(
      await envelopes.insertAllIfCurrent(
        [row],
        [{ mailbox_id: 98, seq: 1, envelope_id: ID(50), created_at: T + 50, kind: 'to' }],
        [],
        [],
      ),
    ).toBe('stale');
    expect((await sql`select 1 from envelopes where id = ${ID(50)}`.execute(database.db)).rows).toEqual([]);
  });

  it('deleting an envelope deletes its entries, and those of the receipts that answer it', async () => {
    // 1 is held by y (2:1); receipt 5 answers it and is held by x (1:2).
    await sql`delete from mailbox_entries where envelope_id = ${ID(1)}`.execute(database.db);
    expect(await entries(database)).toEqual(['1:1', '1:2', '2:2', '2:3', '3:1']);
    await sql`delete from envelopes where id = ${ID(1)}`.execute(database.db);
    expect(await entries(database)).toEqual(['1:1', '2:2', '2:3', '3:1']);
    // Deleting several envelopes in one statement deletes all their entries (3 is in two mailboxes).
    await sql`delete from envelopes where id in (${ID(2)}, ${ID(3)})`.execute(database.db);
    expect(await entries(database)).toEqual(['1:1']);
    expect(await orphans(database)).toBe(0);
  });

  it('deleting a mailbox (agent deletion, or the agent row) deletes its entries', async () => {
    const db = database.db;
    await sql`insert into envelopes (id, sender_id, created_at, received_ms, body, header, recipients, self_addressed, search)
              values (${ID(6)}, 1, ${T + 6}, ${T + 6}, '{}', '{}', '{@solo.y,@solo.z}', false, to_tsvector('simple', 'six'))`.execute(
      db,
    );
    await sql`insert into mailbox_entries (mailbox_id, seq, envelope_id, created_at, kind)
              values (2, 4, ${ID(6)}, ${T + 6}, 'to'), (3, 2, ${ID(6)}, ${T + 6}, 'to')`.execute(db);
    expect(await entries(database)).toEqual(['1:1', '2:4', '3:2']);
    // Through the repository: z's mailbox goes, its entry with it; y keeps envelope 6.
    expect(await new AgentsRepository(database).delete(3, T + 100)).toBe(true);
    expect(await entries(database)).toEqual(['1:1', '2:4']);
    // A direct delete of the agent row cascades to its mailbox, and on to the entries.
    await sql`delete from agents where id = 2`.execute(db);
    expect(await entries(database)).toEqual(['1:1']);
    await sql`delete from mailboxes where agent_id = 1`.execute(db);
    expect(await entries(database)).toEqual([]);
    expect(await orphans(database)).toBe(0);
  });
});
