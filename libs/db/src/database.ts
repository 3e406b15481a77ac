import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { Kysely, PostgresDialect, type CompiledQuery, type KyselyConfig, type LogEvent } from 'kysely';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import type { DB } from './schema';
import { PGliteDialect, SessionLock } from './pglite-dialect';

/** A session that can run multi-statement SQL (migrations) and simple queries on one connection. */
export interface SqlSession {
  exec(sql: string): Promise<void>;
  query<R>(sql: string, params?: unknown[]): Promise<R[]>;
  /** A compiled query as a named prepared statement on this session (plain query on PGlite). */
  prepared<R>(name: string, query: CompiledQuery): Promise<R[]>;
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
  /** Run `fn` in a transaction on one session: committed when it resolves, rolled back when it throws. */
  transaction<T>(fn: (session: SqlSession) => Promise<T>): Promise<T>;
  /**
   * Run a hot query as a named prepared statement (parsed and planned once per connection instead
   * of on every call). `name` must identify the SQL text. PGlite runs it as a plain query.
   */
  prepared<R>(name: string, query: CompiledQuery): Promise<R[]>;
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
  const database: Database = {
    db,
    kind: 'postgres',
    async withSession(fn) {
      const client = await pool.connect();
      let broken: Error | undefined;
      try {
        return await fn({
          exec: async (sql) => {
            await client.query(sql);
          },
          query: async <R>(sql: string, params: unknown[] = []) => (await client.query(sql, params)).rows as R[],
          prepared: async <R>(name: string, query: CompiledQuery) => {
            const start = performance.now();
            const result = await client.query({ name, text: query.sql, values: [...query.parameters] });
            options.onQuery?.(performance.now() - start);
            return result.rows as R[];
          },
        });
      } catch (error) {
        // A connection-level failure must not go back to the pool.
        if (!(error as { code?: string }).code?.match(/^[0-9A-Z]{5}$/)) broken = error as Error;
        throw error;
      } finally {
        client.release(broken);
      }
    },
    transaction: (fn) => database.withSession((session) => inTransaction(session, fn)),
    prepared: async <R>(name: string, query: CompiledQuery) => {
      const start = performance.now();
      const result = await pool.query({ name, text: query.sql, values: [...query.parameters] });
      options.onQuery?.(performance.now() - start);
      return result.rows as R[];
    },
    poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    close: async () => {
      await db.destroy();
    },
  };
  return database;
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
  const database: Database = {
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
          prepared: async <R>(_name: string, query: CompiledQuery) => (await pglite.query<R>(query.sql, [...query.parameters])).rows,
        });
      } finally {
        release();
      }
    },
    prepared: async <R>(_name: string, query: CompiledQuery) => (await db.executeQuery<R>(query)).rows,
    transaction: (fn) => database.withSession((session) => inTransaction(session, fn)),
    poolStats: () => ({ total: 1, idle: 1, waiting: 0 }),
    close: async () => {
      await db.destroy();
      await pglite.close();
    },
  };
  return database;
}

async function inTransaction<T>(session: SqlSession, fn: (session: SqlSession) => Promise<T>): Promise<T> {
  await session.exec('begin');
  try {
    const result = await fn(session);
    await session.exec('commit');
    return result;
  } catch (error) {
    await session.exec('rollback').catch(() => undefined);
    throw error;
  }
}
