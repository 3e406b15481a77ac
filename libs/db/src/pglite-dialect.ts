import { parse, protocol, type PGlite, type Results } from '@electric-sql/pglite';
import { pgliteValue } from './array-params';
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

const { serialize } = protocol;

function concat(parts: readonly Uint8Array[]): Uint8Array {
  const message = new Uint8Array(parts.reduce((length, part) => length + part.length, 0));
  let offset = 0;
  for (const part of parts) {
    message.set(part, offset);
    offset += part.length;
  }
  return message;
}

/**
 * Named prepared statements on PGlite's one session, as Roost's hot queries are on Postgres
 * (`Database.prepared`). `PGlite.query` parses, analyses and plans its SQL on every call and
 * speaks to the WASM backend six times (parse, describe, bind, describe, execute, sync); the
 * accept path's statements are large CTEs over ~20 array parameters, where that parse and plan
 * was a good part of each batch's cost. Here a statement is parsed once per name (and described,
 * for its parameter types), then each call is one exchange: bind, describe, execute, sync.
 *
 * Parameters are serialized exactly as `PGlite.query` does (its serializer for each parameter's
 * type, else `toString`), rows parsed with its parsers. Callers hold the session (SessionLock).
 */
export class PGliteStatements {
  /** Parameter type oids of each statement this session has parsed, by name. */
  private readonly prepared = new Map<string, number[]>();

  constructor(private readonly pglite: PGlite) {}

  async query<R>(name: string, sql: string, params: readonly unknown[]): Promise<Results<R>> {
    const types = this.prepared.get(name) ?? (await this.prepare(name, sql));
    const values = params.map((raw, i) => {
      const param = pgliteValue(raw);
      if (param === null || param === undefined) return null;
      const serializer = this.pglite.serializers[types[i]];
      return serializer ? serializer(param) : (param as { toString(): string }).toString();
    });
    const { messages } = await this.pglite.execProtocol(
      concat([
        serialize.bind({ statement: name, values }),
        serialize.describe({ type: 'P' }),
        serialize.execute({}),
        serialize.sync(),
      ]),
    );
    return parse.parseResults(messages, this.pglite.parsers)[0] as Results<R>;
  }

  /** Parse and describe `name` once; a failure leaves no statement behind under that name. */
  private async prepare(name: string, sql: string): Promise<number[]> {
    try {
      const { messages } = await this.pglite.execProtocol(
        concat([serialize.parse({ name, text: sql }), serialize.describe({ type: 'S', name }), serialize.sync()]),
        { syncToFs: false },
      );
      const types = parse.parseDescribeStatementResults(messages);
      this.prepared.set(name, types);
      return types;
    } catch (error) {
      // A parse that succeeded before a later message failed would keep the name taken.
      await this.pglite
        .execProtocol(concat([serialize.close({ type: 'S', name }), serialize.sync()]), { syncToFs: false })
        .catch(() => undefined);
      throw error;
    }
  }
}

class PGliteConnection implements DatabaseConnection {
  constructor(
    private readonly pglite: PGlite,
    readonly release: () => void,
  ) {}

  async executeQuery<R>(compiled: CompiledQuery): Promise<QueryResult<R>> {
    const result = await this.pglite.query<R>(compiled.sql, compiled.parameters.map(pgliteValue));
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
