import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Database } from './database';

/** Any stable 64-bit key: serialises migration runs across every node sharing the database. */
const MIGRATION_LOCK_KEY = 7_245_001_117;

export interface Migration {
  version: string;
  sql: string;
}

/** `db/migrations` of this checkout or image, found by walking up from the running code. */
export function migrationsDir(from: string = __dirname): string {
  let dir = from;
  for (;;) {
    const candidate = join(dir, 'db', 'migrations');
    if (existsSync(candidate)) return candidate;
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`db/migrations not found above ${from}`);
    dir = parent;
  }
}

export function loadMigrations(dir: string = migrationsDir()): Migration[] {
  return readdirSync(dir)
    .filter((name) => /^\d{4}_[a-z0-9_]+\.sql$/.test(name))
    .sort()
    .map((name) => ({ version: name.replace(/\.sql$/, ''), sql: readFileSync(join(dir, name), 'utf8') }));
}

/**
 * Apply pending migrations in order, each in its own transaction under a transaction-level
 * advisory lock, so that nodes starting together apply each migration exactly once. Forward-only.
 *
 * The lock is transaction-scoped (`pg_advisory_xact_lock`), never a session lock: behind a
 * transaction pooler (PgBouncer `pool_mode = transaction`) consecutive transactions of one client
 * may run on different server sessions, so a session lock would be taken on one, left held on it
 * for whoever gets it next, and "released" on another. Each migration therefore re-reads
 * `schema_migrations` under the lock before it applies anything.
 */
export async function migrate(database: Database, migrations: Migration[] = loadMigrations()): Promise<string[]> {
  const lock = `SELECT pg_advisory_xact_lock(${MIGRATION_LOCK_KEY})`;
  const applied = await database.transaction(async (trx) => {
    await trx.exec(lock);
    await trx.exec(
      'CREATE TABLE IF NOT EXISTS schema_migrations (version text PRIMARY KEY, applied_at bigint NOT NULL)',
    );
    const rows = await trx.query<{ version: string }>('SELECT version FROM schema_migrations');
    return new Set(rows.map((row) => row.version));
  });
  const done: string[] = [];
  for (const migration of migrations) {
    if (applied.has(migration.version)) continue;
    const appliedHere = await database.transaction(async (trx) => {
      await trx.exec(lock);
      const rows = await trx.query('SELECT 1 FROM schema_migrations WHERE version = $1', [migration.version]);
      if (rows.length > 0) return false; // another node applied it while this one waited
      try {
        await trx.exec(migration.sql);
      } catch (error) {
        throw migrationFailed(migration, error);
      }
      await trx.query('INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)', [
        migration.version,
        Date.now(),
      ]);
      return true;
    });
    if (appliedHere) done.push(migration.version);
  }
  return done;
}

/** The migration's own SQL failed: name it, and keep the SQLSTATE (a connection loss stays a 503). */
function migrationFailed(migration: Migration, error: unknown): Error {
  const wrapped = new Error(`migration ${migration.version} failed: ${(error as Error).message}`, { cause: error });
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string') Object.assign(wrapped, { code });
  return wrapped;
}

/** True when every migration of this build is applied (readiness). */
export async function migrationsApplied(
  database: Database,
  migrations: Migration[] = loadMigrations(),
): Promise<boolean> {
  const rows = await database.db.selectFrom('schema_migrations').select('version').execute();
  const applied = new Set(rows.map((row) => row.version));
  return migrations.every((migration) => applied.has(migration.version));
}
