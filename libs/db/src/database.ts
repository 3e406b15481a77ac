import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { Kysely, PostgresDialect, type KyselyConfig, type LogEvent } from 'kysely';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import type { DB } from './schema';
import { PGliteDialect, SessionLock } from './pglite-dialect';

/** A session that can run multi-statement SQL (migrations) and simple queries on one connection. */
export interface SqlSession {
  exec(sql: string): Promise<void>;
  query<R>(sql: string, params?: unknown[]): Promise<R[]>;
}

export interface PoolStats {
  total: number;
  idle: number;
  waiting: number;
}

/** The database as the rest of Roost sees it: Kysely for queries, plus what Kysely does not do. */
export interface Database {
  readonly db: Kysely<DB>;
  readonly kind: 'postgres' | 'pglite';
  /** Run `fn` on one dedicated session (advisory locks, multi-statement migrations). */
  withSession<T>(fn: (session: SqlSession) => Promise<T>): Promise<T>;
  poolStats(): PoolStats;
  close(): Promise<void>;
}

const INT8_OID = 20;
const parseInt8 = (value: string): number => Number(value);

export interface PostgresOptions {
  url: string;
  poolSize: number;
  statementTimeoutMs: number;
  applicationName?: string;
  onPoolError?: (error: Error) => void;
  /** Called with the duration of every query (metrics). */
  onQuery?: (ms: number) => void;
}

function queryLog(onQuery?: (ms: number) => void): KyselyConfig['log'] {
  if (!onQuery) return undefined;
  return (event: LogEvent) => onQuery(event.queryDurationMillis);
}

export function openPostgres(options: PostgresOptions): Database {
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.poolSize,
    connectionTimeoutMillis: 5_000,
    idleTimeoutMillis: 30_000,
    statement_timeout: options.statementTimeoutMs,
    query_timeout: options.statementTimeoutMs + 1_000,
    application_name: options.applicationName ?? 'roost',
    types: {
      getTypeParser: ((oid: number, format?: string) =>
        oid === INT8_OID ? parseInt8 : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
    },
  });
  // An idle client that loses its server emits here; without a listener the process would die.
  pool.on('error', (error) => options.onPoolError?.(error));
  // A checked-out client (a transaction, a query, a session) has no pool listener: when its
  // server goes away pg emits 'error' on the client itself, and unheard that killed the process
  // (seen with Postgres stopped under a worker). The query that held it fails (mapped to 503) and
  // the pool drops the client on release, as it is no longer queryable.
  pool.on('connect', (client) => client.on('error', () => undefined));
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }), log: queryLog(options.onQuery) });
  return {
    db,
    kind: 'postgres',
    async withSession(fn) {
      const client = await pool.connect();
      try {
        return await fn({
          exec: async (sql) => {
            await client.query(sql);
          },
          query: async <R>(sql: string, params: unknown[] = []) => (await client.query(sql, params)).rows as R[],
        });
      } finally {
        client.release();
      }
    },
    poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    close: async () => {
      await db.destroy();
    },
  };
}

/** The embedded default: PGlite persisted under `dataDir/pgdata` (or in memory for `memory://`). */
export async function openPglite(dataDir: string | 'memory://', onQuery?: (ms: number) => void): Promise<Database> {
  let location: string | undefined;
  if (dataDir !== 'memory://') {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    location = join(dataDir, 'pgdata');
  }
  const pglite = new PGlite(location, { parsers: { [INT8_OID]: parseInt8 } });
  await pglite.waitReady;
  const lock = new SessionLock();
  const db = new Kysely<DB>({ dialect: new PGliteDialect(pglite, lock), log: queryLog(onQuery) });
  return {
    db,
    kind: 'pglite',
    async withSession(fn) {
      const release = await lock.acquire();
      try {
        return await fn({
          exec: async (sql) => {
            await pglite.exec(sql);
          },
          query: async <R>(sql: string, params: unknown[] = []) => (await pglite.query<R>(sql, params)).rows,
        });
      } finally {
        release();
      }
    },
    poolStats: () => ({ total: 1, idle: 1, waiting: 0 }),
    close: async () => {
      await db.destroy();
      await pglite.close();
    },
  };
}
