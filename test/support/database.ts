import { createDatabase, type ScratchDatabase } from '../../bench/database';
import { testDatabaseUrl } from './services';

/** A fresh, empty database on the test Postgres, so test files and runs never collide. */
export const createTestDatabase = (prefix = 'roost_t'): Promise<ScratchDatabase> =>
  createDatabase(testDatabaseUrl(), `${prefix}_${process.pid}`);
