import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { runMigrations } from '../../apps/roost/src/migrate';
import { loadMigrations, migrate, openPostgres } from '#db';
import { createTestDatabase } from '../support/database';

// `roost migrate`: what the Helm hook Job and the compose one-shot service run.
const all = () => loadMigrations().map((m) => m.version);

/** schema_migrations as stored: one row per applied migration, in version order. */
async function appliedRows(url: string): Promise<Array<{ version: string; applied_at: string }>> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (
      await client.query<{ version: string; applied_at: string }>(
        'SELECT version, applied_at FROM schema_migrations ORDER BY version',
      )
    ).rows;
  } finally {
    await client.end();
  }
}

/** The tables the migrations create, as the server sees them. */
async function tables(url: string): Promise<string[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const result = await client.query<{ name: string }>(
      "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name",
    );
    return result.rows.map((row) => row.name);
  } finally {
    await client.end();
  }
}

const postgres =
  Boolean(process.env.ROOST_TEST_DATABASE_URL ?? process.env.DATABASE_URL) ||
  process.env.ROOST_TEST_REQUIRE_SERVICES === '1';
(postgres ? describe : describe.skip)('roost migrate on Postgres (DATABASE_URL)', () => {
  it('applies every migration without the admin token or Redis, whatever ROOST_ROLE says, and is idempotent', async () => {
    const database = await createTestDatabase('roost_migrate');
    try {
      await expect(runMigrations({ DATABASE_URL: database.url, ROOST_ROLE: 'api' })).resolves.toEqual(all());
      const first = await appliedRows(database.url);
      expect(first.map((row) => row.version)).toEqual(all());
      expect(await tables(database.url)).toEqual(
        expect.arrayContaining(['agents', 'envelopes', 'mailbox_entries', 'mailboxes', 'orgs']),
      );
      await expect(runMigrations({ DATABASE_URL: database.url })).resolves.toEqual(all());
      // The second run applied nothing: the same rows, with the times of the first.
      expect(await appliedRows(database.url)).toEqual(first);
    } finally {
      await database.drop();
    }
  });

  it('two Jobs at once apply each migration exactly once (advisory lock)', async () => {
    const database = await createTestDatabase('roost_migrate');
    try {
      await Promise.all([runMigrations({ DATABASE_URL: database.url }), runMigrations({ DATABASE_URL: database.url })]);
      expect((await appliedRows(database.url)).map((row) => row.version)).toEqual(all());
    } finally {
      await database.drop();
    }
  });

  it('two migrators at once: each migration is applied by exactly one of them', async () => {
    const database = await createTestDatabase('roost_migrate');
    const open = () => openPostgres({ url: database.url, poolSize: 2, statementTimeoutMs: 30_000 });
    const [one, two] = [open(), open()];
    try {
      const [byOne, byTwo] = await Promise.all([migrate(one), migrate(two)]);
      // What each returns is what it applied itself: together every version, none twice.
      expect([...byOne, ...byTwo].sort()).toEqual(all());
      expect((await appliedRows(database.url)).map((row) => row.version)).toEqual(all());
    } finally {
      await Promise.all([one.close(), two.close()]);
      await database.drop();
    }
  });
});

// PGlite loads its WebAssembly through a dynamic import, which jest allows only under
// --experimental-vm-modules (npm test sets it).
const vmModules = `${process.env.NODE_OPTIONS ?? ''} ${process.execArgv.join(' ')}`.includes(
  '--experimental-vm-modules',
);
(vmModules ? describe : describe.skip)('roost migrate on the embedded database (ROOST_DATA_DIR)', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'roost-migrate-'));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('applies every migration', async () => {
    await expect(runMigrations({ ROOST_DATA_DIR: dataDir, ROOST_ROLE: 'worker' })).resolves.toEqual(all());
  });
});

describe('roost migrate configuration', () => {
  it('refuses a bad DATABASE_URL, naming the variable', async () => {
    await expect(runMigrations({ DATABASE_URL: 'mysql://db/roost' })).rejects.toThrow(/DATABASE_URL/);
  });
});
