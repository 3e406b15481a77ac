import { migrate, openPglite, openPostgres, type Database } from '#db';
import type { ScratchDatabase } from '../../bench/database';
import { createTestDatabase } from './database';

/**
 * For a suite that runs the same checks on Postgres and on PGlite (the embedded default): a fresh
 * database on the test Postgres behind one connection (so a session's views show what the suite's
 * statements did) and an in-memory PGlite, opened (and, with `migrated`, migrated) before the
 * suite's tests and closed and dropped after them. The returned function gives either, in tests.
 */
export function postgresAndPglite(
  prefix: string,
  options: { statementTimeoutMs: number; migrated?: boolean },
): (kind: 'postgres' | 'pglite') => Database {
  let scratch: ScratchDatabase | undefined;
  const opened: Database[] = [];
  beforeAll(async () => {
    scratch = await createTestDatabase(prefix);
    opened.push(openPostgres({ url: scratch.url, poolSize: 1, statementTimeoutMs: options.statementTimeoutMs }));
    opened.push(await openPglite('memory://'));
    if (options.migrated) for (const database of opened) await migrate(database);
  });
  afterAll(async () => {
    await Promise.all(opened.map((database) => database.close()));
    await scratch?.drop();
  });
  return (kind) => opened[kind === 'postgres' ? 0 : 1];
}
