import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { testDatabaseUrl } from './services';

/** A fresh, empty database on the test Postgres, so test files and runs never collide. */
export async function createTestDatabase(prefix = 'roost_t'): Promise<{ url: string; drop: () => Promise<void> }> {
  const base = testDatabaseUrl();
  const name = `${prefix}_${process.pid}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(base);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const client = new pg.Client({ connectionString: base });
      await client.connect();
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await client.end();
    },
  };
}
