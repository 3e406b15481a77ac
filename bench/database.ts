import { randomBytes } from 'node:crypto';
import pg from 'pg';

export interface ScratchDatabase {
  url: string;
  drop: () => Promise<void>;
}

/**
 * A fresh, empty database on the Postgres `base` points at, so runs and test files never collide.
 * The one such helper: bench scenarios use it, and so do the test tiers (test/support/database.ts).
 */
export async function createDatabase(base: string, prefix: string): Promise<ScratchDatabase> {
  const name = `${prefix}_${randomBytes(4).toString('hex')}`;
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
