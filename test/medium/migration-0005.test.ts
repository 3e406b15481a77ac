import { sql } from 'kysely';
import { AgentsRepository, loadMigrations, migrate, openPglite, openPostgres, type Database } from '#db';
import { createTestDatabase, tableRows } from '../support/database';

/**
 * Migration 0005 (deletion keeps what was delivered, EXTENSIONS.md §5) on a database that holds
 * data written under 0001–0004: every row survives unchanged, and afterwards the new rule holds
 * (the database refuses to drop a sender with stored envelopes; deleting one through the
 * repository keeps what it delivered and its handle). On Postgres and on PGlite.
 */
const TABLES = [
  'orgs',
  'agents',
  'blocks',
  'mailboxes',
  'envelopes',
  'mailbox_entries',
  'files',
  'schedules',
  'retention_marks',
];
const T = 1_790_000_000_000;
const ID = (n: number) => `01JZ${String(n).padStart(22, '0')}`;

/** Schema 0001–0004 as a running Roost left it: two orgs, four agents, envelopes of every kind. */
async function writeOldData(database: Database): Promise<void> {
  const db = database.db;
  await sql`insert into orgs (name, admin_token_hash, retention_days, content_guard, max_agents, created_at, updated_at)
            values ('oa', 'h-oa', null, 'warn', null, ${T}, ${T}), ('ob', 'h-ob', 30, 'block', 10, ${T}, ${T})`.execute(
    db,
  );
  await sql`insert into agents (id, handle, owner, token_hash, policy, allowlist, display_name, description, card_body, visibility,
                                content_guard, retention_days, created_at, updated_at)
            overriding system value values
              (1, '@oa.x', 'oa', 't1', 'open', '{}', 'X', 'desc', '# card', 'public', null, null, ${T}, ${T}),
              (2, '@ob.y', 'ob', 't2', 'allowlist', '{@oa.*}', 'Y', null, null, 'private', 'off', 7, ${T}, ${T}),
              (3, '@ob.z', 'ob', 't3', 'open', '{}', '@ob.z', null, null, 'private', null, null, ${T}, ${T}),
              (4, '@solo.w', 'solo', 't4', 'open', '{}', '@solo.w', null, null, 'private', null, null, ${T}, ${T})`.execute(
    db,
  );
  await sql`insert into blocks (agent_id, blocked_handle, created_at) values (1, '@ob.z', ${T}), (3, '@oa.x', ${T})`.execute(
    db,
  );
  await sql`insert into mailboxes (agent_id, last_seq, last_created_at) values (1, 2, ${T + 5}), (2, 3, ${T + 4}), (3, 1, ${T + 4}), (4, 0, 0)`.execute(
    db,
  );
  // x → y (1, 2), x → y+z (3), x → x (4), y → x receipt for 1 (5).
  const envelope = (n: number, sender: number, recipients: string[], receiptFor: string | null = null) =>
    sql`(${ID(n)}, ${sender}, ${T + n}, ${T + n}, ${`{"id":"${ID(n)}"}`}, ${`{"op":"envelope.notify","id":"${ID(n)}"}`},
         ${recipients}::text[], ${recipients.length === 1 && recipients[0] === '@oa.x' && sender === 1},
         to_tsvector('simple', ${`text ${n}`}), ${receiptFor}, ${receiptFor ? 'accepted' : null}, null)`;
  await sql`insert into envelopes (id, sender_id, created_at, received_ms, body, header, recipients, self_addressed, search,
                                   receipt_for, receipt_status, guard_override)
            values ${sql.join([
              envelope(1, 1, ['@ob.y']),
              envelope(2, 1, ['@ob.y']),
              envelope(3, 1, ['@ob.y', '@ob.z']),
              envelope(4, 1, ['@oa.x']),
              envelope(5, 2, ['@oa.x'], ID(1)),
            ])}`.execute(db);
  await sql`insert into mailbox_entries (mailbox_id, seq, envelope_id, created_at, kind, read, read_at) values
              (2, 1, ${ID(1)}, ${T + 1}, 'to', true, ${T + 9}), (2, 2, ${ID(2)}, ${T + 2}, 'to', false, null),
              (2, 3, ${ID(3)}, ${T + 3}, 'to', false, null), (3, 1, ${ID(3)}, ${T + 3}, 'cc', false, null),
              (1, 1, ${ID(4)}, ${T + 4}, 'to', false, null), (1, 2, ${ID(5)}, ${T + 5}, 'to', false, null)`.execute(db);
  await sql`insert into files (id, uploader_id, filename, content_type, size_bytes, bytes, envelope_id, created_at, expires_at) values
              ('file_1', 1, 'a.png', 'image/png', 3, '\\x010203'::bytea, ${ID(2)}, ${T}, ${T + 1000}),
              ('file_2', 1, 'b.png', 'image/png', 1, '\\x04'::bytea, null, ${T}, ${T + 1000})`.execute(db);
  await sql`insert into schedules (id, owner_id, status, envelope, interval_ms, next_run_at, created_at, updated_at)
            values ('sch_1', 1, 'active', '{}', 60000, ${T + 60000}, ${T}, ${T})`.execute(db);
  await sql`insert into retention_marks (mailbox_id, purged_created_at, purged_envelope_id) values (2, ${T}, ${ID(0)})`.execute(
    db,
  );
}

/** Every row of every table as JSON, in a stable order (agents without the column 0005 adds). */
// deleted_at: the column 0005 adds (null on every row it keeps).
const snapshot = (database: Database) => tableRows(database, TABLES, ['deleted_at']);

describe.each(['postgres', 'pglite'] as const)('migration 0005 on %s: deletion keeps what was delivered', (backend) => {
  let database: Database;
  let drop: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    if (backend === 'postgres') {
      const created = await createTestDatabase('roost_m5');
      drop = created.drop;
      database = openPostgres({ url: created.url, poolSize: 2, statementTimeoutMs: 30_000 });
    } else {
      database = await openPglite('memory://');
    }
  });
  afterAll(async () => {
    await database?.close();
    await drop?.();
  });

  it('keeps every row written under 0001–0004, then enforces the new rule', async () => {
    // Up to 0005 only: later migrations are not what this test is about.
    const migrations = loadMigrations().filter((m) => m.version < '0006');
    const old = migrations.filter((m) => m.version < '0005');
    expect(old.map((m) => m.version)).toEqual([
      '0001_initial',
      '0002_schedules_retention',
      '0003_receipts_guard',
      '0004_accept_without_lock',
    ]);
    await migrate(database, old);
    await writeOldData(database);
    const before = await snapshot(database);
    expect(Object.values(before).map((rows) => rows.length)).toEqual([2, 4, 2, 4, 5, 6, 2, 1, 1]);

    expect(await migrate(database, migrations)).toEqual(['0005_deletion_keeps_delivered']);
    expect(await snapshot(database)).toEqual(before);
    const live = await sql<{
      n: number;
    }>`select count(*)::int as n from agents where deleted_at is null and token_hash is not null`.execute(database.db);
    expect(live.rows[0].n).toBe(4);

    // The database refuses to drop a sender whose envelopes are stored (no more cascade)…
    await expect(sql`delete from agents where id = 1`.execute(database.db)).rejects.toMatchObject({ code: '23503' });
    // …and a live agent must hold a token, a deleted one must not.
    await expect(sql`update agents set token_hash = null where id = 3`.execute(database.db)).rejects.toMatchObject({
      code: '23514',
    });
    expect(await snapshot(database)).toEqual(before);

    // Deleting @oa.x the new way: y's and z's entries and the envelopes they hold stay, with the
    // file and the receipt; x's own entries, self-addressed envelope, blocks, schedule and
    // pending file go; the handle stays taken.
    const agents = new AgentsRepository(database);
    expect(await agents.delete(1, T + 100)).toBe(true);
    const after = await snapshot(database);
    expect(after.mailbox_entries).toEqual(before.mailbox_entries.filter((row: any) => row.mailbox_id !== 1));
    expect((after.envelopes as any[]).map((row) => row.id)).toEqual([ID(1), ID(2), ID(3), ID(5)]);
    expect((after.files as any[]).map((row) => row.id)).toEqual(['file_1']);
    expect(after.blocks).toEqual(before.blocks.filter((row: any) => row.agent_id !== 1));
    expect(after.schedules).toEqual([]);
    expect((after.mailboxes as any[]).map((row) => row.agent_id)).toEqual([2, 3, 4]);
    const tombstone =
      await sql<any>`select handle, token_hash, deleted_at, allowlist, card_body from agents where id = 1`.execute(
        database.db,
      );
    expect(tombstone.rows).toEqual([
      { handle: '@oa.x', token_hash: null, deleted_at: T + 100, allowlist: [], card_body: null },
    ]);
    expect(await agents.findByHandle('@oa.x')).toBeUndefined();
    expect(
      await agents.create({
        handle: '@oa.x',
        owner: 'oa',
        token_hash: 'new',
        policy: 'open',
        display_name: '@oa.x',
        description: null,
        card_body: null,
        visibility: 'private',
        content_guard: null,
        retention_days: null,
        created_at: T + 200,
      }),
    ).toBe('exists');
    // An agent that delivered nothing is gone outright: its handle is free at once.
    expect(await agents.delete(4, T + 100)).toBe(true);
    expect((await sql`select 1 from agents where id = 4`.execute(database.db)).rows).toEqual([]);
  });
});
