import { sql } from 'kysely';
import type { Database } from '#db';
import { createDatabase, type ScratchDatabase } from '../../bench/database';
import { testDatabaseUrl } from './services';

/** A fresh, empty database on the test Postgres, so test files and runs never collide. */
export const createTestDatabase = (prefix = 'roost_t'): Promise<ScratchDatabase> =>
  createDatabase(testDatabaseUrl(), `${prefix}_${process.pid}`);

/**
 * Every row of `tables` as JSON, in a stable order, without the `omit` columns: what a migration
 * test compares before and after a migration.
 */
export async function tableRows(
  database: Database,
  tables: readonly string[],
  omit: readonly string[] = [],
): Promise<Record<string, unknown[]>> {
  const out: Record<string, unknown[]> = {};
  for (const table of tables) {
    const result = await sql<{ j: string }>`
      select to_jsonb(t)::text as j from ${sql.table(table)} t order by 1`.execute(database.db);
    out[table] = result.rows.map((row) => {
      const value = JSON.parse(row.j) as Record<string, unknown>;
      for (const column of omit) delete value[column];
      return value;
    });
  }
  return out;
}
