import { sql } from 'kysely';
import { loadMigrations, migrate, openPglite, openPostgres, type Database } from '#db';
import { createTestDatabase } from '../support/database';

/**
 * Migration 0011: new envelope bodies, headers and search lexemes, and new uploaded files, are
 * compressed with lz4 where the server has it (Postgres here); values stored before keep pglz and
 * read back unchanged. A server without lz4 (PGlite) applies the migration and keeps pglz.
 */
const T = 1_790_000_000_000;
const ID = (n: number) => `01JZ${String(n).padStart(22, '0')}`;
/** ~3 KB of text: past the 2 KB toast threshold, so Postgres compresses the body inline. */
const BODY = JSON.stringify({
  content_parts: [{ type: 'text', text: 'status update on the migration work, rows checked. '.repeat(60) }],
});

async function open(backend: 'postgres' | 'pglite') {
  if (backend === 'pglite') return { database: await openPglite('memory://'), drop: undefined };
  const created = await createTestDatabase('roost_m11');
  const database = openPostgres({ url: created.url, poolSize: 1, poolMin: 1, statementTimeoutMs: 30_000 });
  return { database, drop: created.drop };
}

async function addEnvelope(db: Database['db'], n: number): Promise<void> {
  await sql`insert into envelopes (id, sender_id, created_at, received_ms, body, header, recipients, self_addressed, search)
            values (${ID(n)}, 1, ${T + n}, ${T + n}, ${BODY}, '{}', '{@solo.a2}', false, to_tsvector('simple', ${BODY}))`.execute(
    db,
  );
}

async function stored(db: Database['db'], n: number): Promise<{ method: string | null; body: string }> {
  const result = await sql<{ method: string | null; body: string }>`
    select pg_column_compression(body) as method, body from envelopes where id = ${ID(n)}`.execute(db);
  return result.rows[0];
}

/** Whether this server can store lz4 at all (Postgres built with it). */
async function hasLz4(db: Database['db']): Promise<boolean> {
  try {
    await db.transaction().execute(async (trx) => {
      await sql`create temp table roost_lz4_probe (v text compression lz4) on commit drop`.execute(trx);
    });
    return true;
  } catch {
    return false;
  }
}

describe.each(['postgres', 'pglite'] as const)('migration 0011 on %s: lz4 for new large values', (backend) => {
  let database: Database;
  let drop: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    ({ database, drop } = await open(backend));
  });
  afterAll(async () => {
    await database?.close();
    await drop?.();
  });

  it('compresses what is stored after it with lz4 where the server has it, and reads both back', async () => {
    const db = database.db;
    const migrations = loadMigrations();
    const before = migrations.filter((m) => m.version < '0011');
    expect(before.at(-1)?.version).toBe('0010_parent_check_generic_plans');
    await migrate(database, before);
    await sql`insert into agents (id, handle, owner, token_hash, policy, display_name, visibility, created_at, updated_at)
              overriding system value values (1, '@solo.a1', 'solo', 't1', 'open', 'A', 'public', ${T}, ${T})`.execute(
      db,
    );
    await addEnvelope(db, 1);
    expect(await stored(db, 1)).toEqual({ method: 'pglz', body: BODY });

    expect(await migrate(database, migrations.slice(0, before.length + 1))).toEqual(['0011_lz4_compression']);
    const lz4 = await hasLz4(db);
    if (backend === 'pglite') expect(lz4).toBe(false);
    const method = lz4 ? 'lz4' : 'pglz';

    await addEnvelope(db, 2);
    expect(await stored(db, 2)).toEqual({ method, body: BODY });
    expect(await stored(db, 1)).toEqual({ method: 'pglz', body: BODY }); // stored before: unchanged

    const bytes = Buffer.from('0123456789abcdef'.repeat(8192)); // 128 KiB, compressible
    await sql`insert into files (id, uploader_id, filename, content_type, size_bytes, bytes, created_at, expires_at)
              values ('F1', 1, 'a.txt', 'text/plain', ${bytes.length}, ${bytes}, ${T}, ${T + 1})`.execute(db);
    const file = await sql<{ method: string | null; bytes: Buffer }>`
      select pg_column_compression(bytes) as method, bytes from files where id = 'F1'`.execute(db);
    expect(file.rows[0].method).toBe(method);
    expect(Buffer.compare(Buffer.from(file.rows[0].bytes), bytes)).toBe(0);
  });
});
