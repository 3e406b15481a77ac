import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runMigrations } from '../../apps/roost/src/migrate';
import { loadMigrations } from '#db';
import { createTestDatabase } from '../support/database';

// `roost migrate`: what the Helm hook Job and the compose one-shot service run.
const all = () => loadMigrations().map((m) => m.version);

const postgres = Boolean(process.env.ROOST_TEST_DATABASE_URL ?? process.env.DATABASE_URL) || process.env.ROOST_TEST_REQUIRE_SERVICES === '1';
(postgres ? describe : describe.skip)('roost migrate on Postgres (DATABASE_URL)', () => {
  it('applies every migration without the admin token or Redis, whatever ROOST_ROLE says, and is idempotent', async () => {
    const database = await createTestDatabase('roost_migrate');
    try {
      await expect(runMigrations({ DATABASE_URL: database.url, ROOST_ROLE: 'api' })).resolves.toEqual(all());
      await expect(runMigrations({ DATABASE_URL: database.url })).resolves.toEqual(all());
    } finally {
      await database.drop();
    }
  });

  it('two Jobs at once apply each migration exactly once (advisory lock)', async () => {
    const database = await createTestDatabase('roost_migrate');
    try {
      await Promise.all([runMigrations({ DATABASE_URL: database.url }), runMigrations({ DATABASE_URL: database.url })]);
    } finally {
      await database.drop();
    }
  });
});

// PGlite loads its WebAssembly through a dynamic import, which jest allows only under
// --experimental-vm-modules (npm test sets it).
const vmModules = `${process.env.NODE_OPTIONS ?? ''} ${process.execArgv.join(' ')}`.includes('--experimental-vm-modules');
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
