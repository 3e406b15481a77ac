import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openPglite, type Database, type SyncKind } from '#db';

/**
 * Embedded PGlite: a commit is on the host's disk before it returns. PGlite starts Postgres with
 * fsync off and its file layer has no fsync; DurableNodeFS turns both on, so each commit syncs the
 * WAL once (a batch of envelopes in one transaction shares it) and a checkpoint syncs data files.
 */
describe('embedded PGlite durability', () => {
  let dir: string;
  let database: Database;
  const syncs: SyncKind[] = [];
  const count = (kind: SyncKind) => syncs.filter((k) => k === kind).length;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'roost-durability-'));
    database = await openPglite(dir, undefined, (kind) => syncs.push(kind));
    await database.withSession((s) => s.exec('create table durable (id int primary key, body text)'));
  });
  afterAll(async () => {
    await database?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('syncs the WAL once per commit, before the commit resolves', async () => {
    for (let i = 0; i < 5; i++) {
      const before = count('wal');
      await database.transaction((s) => s.query('insert into durable values ($1, $2)', [i, 'x'.repeat(1000)]));
      // The sync happened inside COMMIT: by the time the promise resolves it is counted.
      expect(count('wal')).toBe(before + 1);
    }
  });

  it('a transaction of many rows costs one WAL sync', async () => {
    const before = count('wal');
    await database.transaction(async (s) => {
      for (let i = 100; i < 164; i++) await s.query('insert into durable values ($1, $2)', [i, 'y'.repeat(1000)]);
    });
    expect(count('wal')).toBe(before + 1);
  });

  it('a read-only statement syncs nothing', async () => {
    const before = syncs.length;
    await database.withSession((s) => s.query('select count(*) from durable'));
    expect(syncs.length).toBe(before);
  });

  it('a checkpoint syncs the data files and directories', async () => {
    const data = count('data');
    await database.withSession((s) => s.exec('checkpoint'));
    expect(count('data')).toBeGreaterThan(data);
  });

  it('memory:// has no disk to sync and still works', async () => {
    const memory = await openPglite('memory://');
    try {
      await memory.withSession((s) => s.exec('create table m (id int)'));
      await memory.transaction((s) => s.query('insert into m values (1)'));
    } finally {
      await memory.close();
    }
  });
});
