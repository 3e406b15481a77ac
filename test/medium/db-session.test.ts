import { CompiledQuery, sql } from 'kysely';
import { AgentsRepository, EnvelopesRepository, migrate, openPostgres, type Database } from '#db';
import { createTestDatabase } from '../support/database';

/**
 * What libs/db leaves on a Postgres session, on direct Postgres (the pooled side runs through a
 * real PgBouncer in test/e2e/pgbouncer.test.ts): the statement timeout without a pooler (a startup
 * parameter, so every statement has it), named statements only when ROOST_DB_PREPARED_STATEMENTS
 * allows them, and with ROOST_DB_POOLER=transaction a timeout that lives only inside transactions.
 */

let database: { url: string; drop: () => Promise<void> };
const opened: Database[] = [];

beforeAll(async () => {
  database = await createTestDatabase('roost_session');
});

afterAll(async () => {
  await Promise.all(opened.map((db) => db.close()));
  await database.drop();
});

function open(options: { pooler?: 'none' | 'transaction'; preparedStatements?: boolean }): Database {
  const db = openPostgres({ url: database.url, poolSize: 1, statementTimeoutMs: 4_321, ...options });
  opened.push(db);
  return db;
}

const timeout = async (db: Database) =>
  (await sql<{ statement_timeout: string }>`show statement_timeout`.execute(db.db)).rows[0].statement_timeout;
const statements = (db: Database) =>
  db.withSession(async (session) => {
    await session.prepared('roost_test_lookup', CompiledQuery.raw('select $1::int as n', [7]));
    return (await session.query<{ name: string }>('select name from pg_prepared_statements')).map((row) => row.name);
  });

test('without a pooler the timeout is a startup parameter and hot queries are named statements', async () => {
  const db = open({});
  expect(await timeout(db)).toBe('4321ms');
  expect(await statements(db)).toEqual(['roost_test_lookup']);
});

test('ROOST_DB_PREPARED_STATEMENTS=off: the same queries leave no named statement on the session', async () => {
  const db = open({ preparedStatements: false });
  expect(await statements(db)).toEqual([]);
  expect(await timeout(db)).toBe('4321ms');
});

test('ROOST_DB_POOLER=transaction: no startup timeout, SET LOCAL in both transaction paths, unnamed by default', async () => {
  const db = open({ pooler: 'transaction' });
  expect(await timeout(db)).toBe('0');
  expect(await db.transaction((trx) => trx.query<{ statement_timeout: string }>('show statement_timeout'))).toEqual([
    { statement_timeout: '4321ms' },
  ]);
  const kysely = await db.db
    .transaction()
    .execute((trx) => sql<{ statement_timeout: string }>`show statement_timeout`.execute(trx));
  expect(kysely.rows).toEqual([{ statement_timeout: '4321ms' }]);
  const serializable = await db.db
    .transaction()
    .setIsolationLevel('serializable')
    .execute((trx) => sql<{ statement_timeout: string }>`show statement_timeout`.execute(trx));
  expect(serializable.rows).toEqual([{ statement_timeout: '4321ms' }]);
  // One connection: the session the transactions ran on, back at the server's default.
  expect(await timeout(db)).toBe('0');
  expect(await statements(db)).toEqual([]);
});

test('start-up warming opens ROOST_DB_POOL_MIN connections, prepares the hot statements on each, writes nothing', async () => {
  const warmed = await createTestDatabase('roost_warm');
  const db = openPostgres({ url: warmed.url, poolSize: 4, poolMin: 2, statementTimeoutMs: 4_321 });
  try {
    await migrate(db);
    const statements = [...new AgentsRepository(db).warmStatements(), ...new EnvelopesRepository(db).warmStatements()];
    await db.warm(statements, 2);
    expect(db.poolStats()).toEqual({ total: 2, idle: 2, waiting: 0 });
    // Both pooled connections at once: each already holds every statement.
    const names = await Promise.all(
      [0, 1].map(() =>
        db.withSession(async (session) => {
          const rows = await session.query<{ name: string }>('select name from pg_prepared_statements order by name');
          await new Promise((resolve) => setTimeout(resolve, 50));
          return rows.map((row) => row.name);
        }),
      ),
    );
    const expected = statements.map((s) => s.name).sort();
    expect(names).toEqual([expected, expected]);
    expect(db.poolStats().total).toBe(2);
    const counts = await db.withSession((session) =>
      session.query<{ envelopes: number; entries: number; seqs: number }>(
        'select (select count(*) from envelopes)::int as envelopes, (select count(*) from mailbox_entries)::int as entries, ' +
          '(select coalesce(sum(last_seq), 0) from mailboxes)::int as seqs',
      ),
    );
    expect(counts).toEqual([{ envelopes: 0, entries: 0, seqs: 0 }]);
  } finally {
    await db.close();
    await warmed.drop();
  }
});
