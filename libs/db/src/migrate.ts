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
 * Apply pending migrations in order, each in its own transaction, under a session advisory lock
 * so that nodes starting together apply each migration exactly once. Forward-only.
 */
export async function migrate(database: Database, migrations: Migration[] = loadMigrations()): Promise<string[]> {
  return database.withSession(async (session) => {
    await session.exec(`SELECT pg_advisory_lock(${MIGRATION_LOCK_KEY})`);
    try {
      await session.exec(
        'CREATE TABLE IF NOT EXISTS schema_migrations (version text PRIMARY KEY, applied_at bigint NOT NULL)',
      );
      const applied = new Set(
        (await session.query<{ version: string }>('SELECT version FROM schema_migrations')).map((row) => row.version),
      );
      const done: string[] = [];
      for (const migration of migrations) {
        if (applied.has(migration.version)) continue;
        await session.exec('BEGIN');
        try {
          await session.exec(migration.sql);
          await session.query('INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)', [
            migration.version,
            Date.now(),
          ]);
          await session.exec('COMMIT');
        } catch (error) {
          await session.exec('ROLLBACK');
          throw new Error(`migration ${migration.version} failed: ${(error as Error).message}`);
        }
        done.push(migration.version);
      }
      return done;
    } finally {
      await session.exec(`SELECT pg_advisory_unlock(${MIGRATION_LOCK_KEY})`);
    }
  });
}

/** True when every migration of this build is applied (readiness). */
export async function migrationsApplied(database: Database, migrations: Migration[] = loadMigrations()): Promise<boolean> {
  const rows = await database.db.selectFrom('schema_migrations').select('version').execute();
  const applied = new Set(rows.map((row) => row.version));
  return migrations.every((migration) => applied.has(migration.version));
}
