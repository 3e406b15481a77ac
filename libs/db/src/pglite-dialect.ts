import type { PGlite } from '@electric-sql/pglite';
import {
  CompiledQuery,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type DatabaseConnection,
  type Dialect,
  type Driver,
  type Kysely,
  type QueryResult,
} from 'kysely';

/** One lock around PGlite's single session: a transaction owns it from BEGIN to COMMIT. */
export class SessionLock {
  private tail: Promise<void> = Promise.resolve();

  acquire(): Promise<() => void> {
    let release!: () => void;
    const next = new Promise<void>((resolve) => (release = resolve));
    const ready = this.tail.then(() => release);
    this.tail = this.tail.then(() => next);
    return ready;
  }
}

class PGliteConnection implements DatabaseConnection {
  constructor(
    private readonly pglite: PGlite,
    readonly release: () => void,
  ) {}

  async executeQuery<R>(compiled: CompiledQuery): Promise<QueryResult<R>> {
    const result = await this.pglite.query<R>(compiled.sql, [...compiled.parameters]);
    return {
      rows: result.rows,
      ...(result.affectedRows !== undefined ? { numAffectedRows: BigInt(result.affectedRows) } : {}),
    };
  }

  // eslint-disable-next-line require-yield -- kysely's Driver requires the generator; PGlite cannot stream
  async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error('PGlite does not stream query results');
  }
}

class PGliteDriver implements Driver {
  constructor(
    private readonly pglite: PGlite,
    private readonly lock: SessionLock,
  ) {}

  async init(): Promise<void> {
    await this.pglite.waitReady;
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    return new PGliteConnection(this.pglite, await this.lock.acquire());
  }

  async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('begin'));
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('commit'));
  }

  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('rollback'));
  }

  async releaseConnection(connection: DatabaseConnection): Promise<void> {
    (connection as PGliteConnection).release();
  }

  async destroy(): Promise<void> {
    // the owner of the PGlite instance closes it
  }
}

/** Kysely on PGlite (Postgres compiled to WASM): the embedded default. */
export class PGliteDialect implements Dialect {
  constructor(
    private readonly pglite: PGlite,
    private readonly lock: SessionLock,
  ) {}

  createAdapter() {
    return new PostgresAdapter();
  }

  createDriver(): Driver {
    return new PGliteDriver(this.pglite, this.lock);
  }

  createQueryCompiler() {
    return new PostgresQueryCompiler();
  }

  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- kysely's DialectAdapter signature
  createIntrospector(db: Kysely<any>) {
    return new PostgresIntrospector(db);
  }
}
