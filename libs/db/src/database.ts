import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import {
  CompiledQuery,
  Kysely,
  PostgresDialect,
  PostgresDriver,
  type DatabaseConnection,
  type Driver,
  type KyselyConfig,
  type LogEvent,
  type PostgresDialectConfig,
  type TransactionSettings,
} from 'kysely';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { isUnavailable } from '#domain';
import type { DB } from './schema';
import { PGliteDialect, PGliteStatements, SessionLock } from './pglite-dialect';
import { DurableNodeFS, durableStartParams, type SyncKind } from './pglite-durable-fs';

/** A session that can run multi-statement SQL (migrations) and simple queries on one connection. */
export interface SqlSession {
  exec(sql: string): Promise<void>;
  query<R>(sql: string, params?: unknown[]): Promise<R[]>;
  /**
   * A compiled query as a named prepared statement on this session, or as the protocol's unnamed
   * statement when named statements are off (plain query on PGlite).
   */
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
  /**
   * Run `fn` on one dedicated connection. Behind a transaction pooler (`ROOST_DB_POOLER`) only a
   * transaction keeps its server session: nothing may rely on session state between transactions
   * (session advisory locks, `SET`, `LISTEN`, temporary tables, named statements).
   */
  withSession<T>(fn: (session: SqlSession) => Promise<T>): Promise<T>;
  /**
   * Run `fn` in a transaction on one session: committed when it resolves, rolled back when it
   * throws. Behind a transaction pooler it starts with `SET LOCAL statement_timeout`.
   */
  transaction<T>(fn: (session: SqlSession) => Promise<T>): Promise<T>;
  /**
   * Run a hot query as a named prepared statement (parsed and planned once per connection instead
   * of on every call), or unnamed when `ROOST_DB_PREPARED_STATEMENTS` is off. `name` must identify
   * the SQL text. PGlite too parses it once per name (PGliteStatements).
   */
  prepared<R>(name: string, query: CompiledQuery): Promise<R[]>;
  /**
   * Start-up: open `connections` pooled connections at once and run each statement (named, as
   * `prepared` does) on every one, so the first requests of a fresh process find connections open
   * and statements parsed and planned. The statements must write and lock nothing.
   */
  warm(statements: ReadonlyArray<{ name: string; query: CompiledQuery }>, connections: number): Promise<void>;
  poolStats(): PoolStats;
  close(): Promise<void>;
}

const INT8_OID = 20;
const parseInt8 = (value: string): number => Number(value);

/**
 * `none`: Roost talks to Postgres itself (or through a session pooler that passes startup
 * parameters). `transaction`: through a transaction pooler (PgBouncer `pool_mode = transaction`),
 * which hands each transaction, not each connection, a server session.
 */
export type Pooler = 'none' | 'transaction';

export interface PostgresOptions {
  url: string;
  poolSize: number;
  /** Connections kept open when idle (and opened by `warm`); default 0. */
  poolMin?: number;
  statementTimeoutMs: number;
  /** Default `none`. */
  pooler?: Pooler;
  /** Hot queries as named prepared statements (default: on without a pooler, off behind one). */
  preparedStatements?: boolean;
  applicationName?: string;
  onPoolError?: (error: Error) => void;
  /** A misconfiguration seen at run time (said once per kind, not per query). */
  onWarning?: (message: string) => void;
  /** Called with the duration of every query (metrics). */
  onQuery?: (ms: number) => void;
}

function queryLog(onQuery?: (ms: number) => void): KyselyConfig['log'] {
  if (!onQuery) return undefined;
  return (event: LogEvent) => onQuery(event.queryDurationMillis);
}

/**
 * SQLSTATEs of a named statement the server session does not have (26000) or already has (42P05):
 * what a transaction pooler produces when statements are named, since the next transaction may run
 * on another server session.
 */
const NAMED_STATEMENT_LOST = new Set(['26000', '42P05']);

export function openPostgres(options: PostgresOptions): Database {
  const pooler = options.pooler ?? 'none';
  const named = options.preparedStatements ?? pooler === 'none';
  // Without a pooler the timeout is a startup parameter: every statement of every session, at no
  // cost. A transaction pooler refuses startup parameters it does not track (PgBouncer:
  // "unsupported startup parameter") or drops them (ignore_startup_parameters), and a `SET` would
  // leak to whichever client gets that server session next: Roost's own transactions start with
  // `SET LOCAL` instead (in the same round trip as `begin`), and single statements run with the
  // server's default for the role (checked at start: checkStatementTimeout in db.module.ts).
  const setLocal = `set local statement_timeout = ${options.statementTimeoutMs}`;
  const begin = pooler === 'none' ? 'begin' : `begin; ${setLocal}`;
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.poolSize,
    // Kept through quiet spells: a burst after one must not pay connection set-up and re-parsing.
    min: Math.min(options.poolMin ?? 0, options.poolSize),
    connectionTimeoutMillis: 5_000,
    idleTimeoutMillis: 30_000,
    ...(pooler === 'none' ? { statement_timeout: options.statementTimeoutMs } : {}),
    query_timeout: options.statementTimeoutMs + 1_000,
    application_name: options.applicationName ?? 'roost',
    types: {
      getTypeParser: ((oid: number, format?: string) =>
        oid === INT8_OID
          ? parseInt8
          : (pg.types.getTypeParser(oid, format as 'text') as (
              value: string,
            ) => unknown)) as typeof pg.types.getTypeParser,
    },
  });
  // An idle client that loses its server emits here; without a listener the process would die.
  pool.on('error', (error) => options.onPoolError?.(error));
  // A checked-out client (a transaction, a query, a session) has no pool listener: when its
  // server goes away pg emits 'error' on the client itself, and unheard that killed the process
  // (seen with Postgres stopped under a worker). The query that held it fails (mapped to 503) and
  // the pool drops the client on release, as it is no longer queryable.
  pool.on('connect', (client) => client.on('error', () => undefined));
  const dialectConfig: PostgresDialectConfig = { pool };
  const dialect =
    pooler === 'none' ? new PostgresDialect(dialectConfig) : new LocalTimeoutDialect(dialectConfig, setLocal);
  const db = new Kysely<DB>({ dialect, log: queryLog(options.onQuery) });
  let warnedLost = false;
  const runPrepared = async <R>(client: pg.Pool | pg.PoolClient, name: string, query: CompiledQuery): Promise<R[]> => {
    const start = performance.now();
    const values = [...query.parameters];
    try {
      const result = await client.query(named ? { name, text: query.sql, values } : { text: query.sql, values });
      options.onQuery?.(performance.now() - start);
      return result.rows as R[];
    } catch (error) {
      if (named && !warnedLost && NAMED_STATEMENT_LOST.has((error as { code?: string }).code ?? '')) {
        warnedLost = true;
        const fix =
          pooler === 'none'
            ? 'DATABASE_URL looks like a transaction pooler: set ROOST_DB_POOLER=transaction'
            : 'this pooler does not keep named statements across server sessions (PgBouncer before 1.21, or ' +
              'max_prepared_statements = 0): set ROOST_DB_PREPARED_STATEMENTS=off';
        options.onWarning?.(`named prepared statement "${name}" failed (${(error as Error).message}): ${fix}`);
      }
      throw error;
    }
  };
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
          prepared: <R>(name: string, query: CompiledQuery) => runPrepared<R>(client, name, query),
        });
      } catch (error) {
        // A connection-level failure must not go back to the pool.
        if (!hasSqlState(error)) broken = error as Error;
        throw error;
      } finally {
        client.release(broken);
      }
    },
    transaction: (fn) => database.withSession((session) => inTransaction(session, fn, begin, true)),
    prepared: <R>(name: string, query: CompiledQuery) => runPrepared<R>(pool, name, query),
    async warm(statements, connections) {
      const clients = await Promise.all(
        Array.from({ length: Math.min(connections, options.poolSize) }, () => pool.connect()),
      );
      try {
        await Promise.all(
          clients.map(async (client) => {
            for (const { name, query } of statements) await runPrepared(client, name, query);
          }),
        );
      } finally {
        for (const client of clients) client.release();
      }
    },
    poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    close: async () => {
      await db.destroy();
    },
  };
  return database;
}

/**
 * Kysely's Postgres dialect whose transactions start with `SET LOCAL statement_timeout` (in the
 * same round trip as `begin`): the timeout a transaction pooler lets a client set.
 */
class LocalTimeoutDialect extends PostgresDialect {
  constructor(
    private readonly dialectConfig: PostgresDialectConfig,
    private readonly setLocal: string,
  ) {
    super(dialectConfig);
  }

  override createDriver(): Driver {
    return new LocalTimeoutDriver(this.dialectConfig, this.setLocal);
  }
}

class LocalTimeoutDriver extends PostgresDriver {
  constructor(
    config: PostgresDialectConfig,
    private readonly setLocal: string,
  ) {
    super(config);
  }

  override async beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    if (settings.isolationLevel || settings.accessMode) {
      await super.beginTransaction(connection, settings);
      await connection.executeQuery(CompiledQuery.raw(this.setLocal));
    } else {
      // One simple-protocol message: the transaction and its timeout in one round trip.
      await connection.executeQuery(CompiledQuery.raw(`begin; ${this.setLocal}`));
    }
  }
}

/** The embedded default: PGlite persisted under `dataDir/pgdata` (or in memory for `memory://`). */
/**
 * PGlite under `dataDir` (or in memory). On disk a commit is synced to the host's disk before it
 * returns (DurableNodeFS: Postgres' fsync on, made real); `onSync` sees each sync.
 */
export async function openPglite(
  dataDir: string, // a folder, or 'memory://'
  onQuery?: (ms: number) => void,
  onSync?: (kind: SyncKind) => void,
): Promise<Database> {
  const parsers = { [INT8_OID]: parseInt8 };
  // pg_trgm: the console's agent search index (db/migrations/0006); the package ships it as ESM only.
  const { pg_trgm } = await import('@electric-sql/pglite/contrib/pg_trgm');
  const extensions = { pg_trgm };
  let pglite: PGlite;
  if (dataDir === 'memory://') {
    pglite = new PGlite({ parsers, extensions });
  } else {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    const location = join(dataDir, 'pgdata');
    pglite = new PGlite({
      fs: new DurableNodeFS(location, onSync),
      startParams: durableStartParams(),
      parsers,
      extensions,
    });
  }
  await pglite.waitReady;
  const lock = new SessionLock();
  const db = new Kysely<DB>({ dialect: new PGliteDialect(pglite, lock), log: queryLog(onQuery) });
  // Hot queries as named statements, parsed once (as on Postgres); counted as Kysely counts its own.
  const statements = new PGliteStatements(pglite);
  const runPrepared = async <R>(name: string, query: CompiledQuery): Promise<R[]> => {
    const start = performance.now();
    try {
      return (await statements.query<R>(name, query.sql, query.parameters)).rows;
    } finally {
      onQuery?.(performance.now() - start);
    }
  };
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
          prepared: <R>(name: string, query: CompiledQuery) => runPrepared<R>(name, query),
        });
      } finally {
        release();
      }
    },
    async prepared<R>(name: string, query: CompiledQuery) {
      const release = await lock.acquire();
      try {
        return await runPrepared<R>(name, query);
      } finally {
        release();
      }
    },
    async warm(statements) {
      // One session: running each once loads the catalog entries its first real use would.
      for (const { name, query } of statements) await database.prepared(name, query);
    },
    transaction: (fn) => database.withSession((session) => inTransaction(session, fn)),
    poolStats: () => ({ total: 1, idle: 1, waiting: 0 }),
    close: async () => {
      await db.destroy();
      await pglite.close();
    },
  };
  return database;
}

async function inTransaction<T>(
  session: SqlSession,
  fn: (session: SqlSession) => Promise<T>,
  begin = 'begin',
  lostConnection = false,
): Promise<T> {
  await session.exec(begin);
  try {
    const result = await fn(session);
    await session.exec('commit');
    return result;
  } catch (error) {
    // A lost or stalled connection (no SQLSTATE: reset, query_timeout) is destroyed on release,
    // which ends the transaction server-side; a rollback on it would only stall one more timeout.
    if (!(lostConnection && isUnavailable(error) && !hasSqlState(error)))
      await session.exec('rollback').catch(() => undefined);
    throw error;
  }
}

/** A server error (SQLSTATE) leaves the connection usable; anything else (EPIPE too) does not. */
function hasSqlState(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && code !== 'EPIPE';
}
