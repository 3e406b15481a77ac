import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CompiledQuery } from 'kysely';
import { openPglite, type Database, type SyncKind } from '#db';

/**
 * Embedded PGlite runs `Database.prepared` as a named statement on its one session, parsed once
 * per name (PGliteStatements), as Roost's hot queries run on Postgres: same parameters, same rows,
 * same errors, and a write still syncs its commit before it resolves.
 */
describe('embedded PGlite named statements', () => {
  let dir: string;
  let database: Database;
  const syncs: SyncKind[] = [];
  const walSyncs = () => syncs.filter((kind) => kind === 'wal').length;
  const named = () =>
    database.withSession((s) =>
      s.query<{ name: string; from_sql: boolean }>('select name, from_sql from pg_prepared_statements order by name'),
    );

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'roost-statements-'));
    database = await openPglite(dir, undefined, (kind) => syncs.push(kind));
    await database.withSession((s) =>
      s.exec(`create table items (id bigint primary key, tags text[], note text, flag boolean, body jsonb)`),
    );
  }, 300_000); // a fresh data directory runs initdb: minutes on a loaded machine
  afterAll(async () => {
    await database?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const insert = (id: number, tags: string[], note: string | null) =>
    CompiledQuery.raw(
      `insert into items (id, tags, note, flag, body) values ($1, $2::text[], $3, $4, $5::jsonb)
       returning id, tags, note, flag, body`,
      [id, tags, note, id % 2 === 0, { id, tags }],
    );

  const select = (ids: number[]) =>
    CompiledQuery.raw('select note from items where id = any($1::bigint[]) order by id', [ids]);

  it('parses a statement once per name and serializes parameters and parses rows as PGlite does', async () => {
    const first = await database.prepared('test_insert', insert(1, ['a', 'b,c', 'd"e'], null));
    expect(first).toEqual([
      { id: 1, tags: ['a', 'b,c', 'd"e'], note: null, flag: false, body: { id: 1, tags: ['a', 'b,c', 'd"e'] } },
    ]);
    expect(await named()).toEqual([{ name: 'test_insert', from_sql: false }]);
    const second = await database.prepared('test_insert', insert(2, [], 'x'));
    expect(second).toEqual([{ id: 2, tags: [], note: 'x', flag: true, body: { id: 2, tags: [] } }]);
    expect(await named()).toEqual([{ name: 'test_insert', from_sql: false }]);
  });

  it('a write in its own transaction is synced to disk before it resolves', async () => {
    const before = walSyncs();
    await database.prepared('test_insert', insert(3, ['z'], 'y'));
    expect(walSyncs()).toBe(before + 1);
  });

  it('an execution error surfaces with its SQLSTATE and leaves the statement usable', async () => {
    await expect(database.prepared('test_insert', insert(3, ['again'], null))).rejects.toMatchObject({ code: '23505' });
    await expect(database.prepared('test_insert', insert(4, ['ok'], null))).resolves.toHaveLength(1);
  });

  it('a statement first parsed in a transaction that rolls back stays prepared', async () => {
    await expect(
      database.transaction(async (s) => {
        expect(await s.prepared('test_select', select([2, 3]))).toEqual([{ note: 'x' }, { note: 'y' }]);
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    expect(await database.prepared('test_select', select([2, 3]))).toEqual([{ note: 'x' }, { note: 'y' }]);
    expect((await named()).map((row) => row.name)).toEqual(['test_insert', 'test_select']);
  });

  it('a statement that fails to parse leaves its name free', async () => {
    await expect(database.prepared('test_bad', CompiledQuery.raw('select nope from items', []))).rejects.toMatchObject({
      code: '42703',
    });
    expect((await named()).map((row) => row.name)).not.toContain('test_bad');
    await expect(database.prepared('test_bad', CompiledQuery.raw('select 1 as one', []))).resolves.toEqual([
      { one: 1 },
    ]);
  });

  it('inside a transaction, a statement sees and is rolled back with the transaction', async () => {
    await expect(
      database.transaction(async (s) => {
        await s.prepared('test_insert', insert(10, [], null));
        expect(await s.prepared('test_select', select([10]))).toEqual([{ note: null }]);
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    expect(await database.withSession((s) => s.query('select id from items where id = 10'))).toEqual([]);
  });
});
