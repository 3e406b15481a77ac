import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, chmodSync, constants, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { freePort } from './processes';

/**
 * A private PgBouncer (Debian's `pgbouncer` package, installed in CI by .ci/pgbouncer.sh) on a free
 * loopback port, in front of the test Postgres. Tests get their own process with their own
 * configuration and kill only it; the shared Postgres is never touched beyond the databases the
 * test created.
 */

/** The pgbouncer binary: /usr/sbin (Debian) or PATH; null when it is not installed. */
export function pgbouncerBinary(): string | null {
  const dirs = ['/usr/sbin', '/usr/local/sbin', ...(process.env.PATH ?? '').split(delimiter)];
  for (const dir of dirs) {
    const candidate = join(dir, 'pgbouncer');
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return null;
}

export interface PgBouncerDatabase {
  /** The database on the upstream Postgres. */
  dbname: string;
  /** Server connections for this database (PgBouncer `pool_size`). */
  poolSize?: number;
}

export interface PgBouncerOptions {
  /** The upstream Postgres (user, password, host, port); its path is ignored. */
  upstream: string;
  /** Database name clients use → upstream database. */
  databases: Record<string, PgBouncerDatabase>;
  poolMode?: 'session' | 'transaction' | 'statement';
  /** PgBouncer `ignore_startup_parameters` (none by default: it refuses what it does not track). */
  ignoreStartupParameters?: string[];
  /** Server connections per database unless the database says otherwise. */
  defaultPoolSize?: number;
  maxClientConn?: number;
}

const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

const ident = (value: string) => {
  if (!/^[A-Za-z0-9_.-]+$/.test(value)) throw new Error(`unsafe pgbouncer identifier: ${value}`);
  return value;
};

export class PgBouncer {
  readonly output: string[] = [];
  private exit: Promise<void> = Promise.resolve();

  private constructor(
    private readonly child: ChildProcess,
    readonly port: number,
    private readonly user: string,
    private readonly password: string,
    private readonly dir: string,
  ) {}

  /** Start and wait until a client gets through to the first database; throws with its log. */
  static async start(options: PgBouncerOptions): Promise<PgBouncer> {
    const binary = pgbouncerBinary();
    if (!binary)
      throw new Error('pgbouncer is not installed (Debian package "pgbouncer"; CI installs it with .ci/pgbouncer.sh)');
    const upstream = new URL(options.upstream);
    const user = decodeURIComponent(upstream.username || 'postgres');
    const password = decodeURIComponent(upstream.password);
    const port = await freePort();
    // pgbouncer refuses to run as root: it drops to `nobody`, which must read these files.
    const dir = mkdtempSync(join(tmpdir(), 'roost-pgbouncer-'));
    chmodSync(dir, 0o755);
    const host = upstream.hostname.replace(/^\[|\]$/g, '');
    const databases = Object.entries(options.databases).map(
      ([alias, db]) =>
        `${ident(alias)} = host=${ident(host)} port=${Number(upstream.port || 5432)} dbname=${ident(db.dbname)}` +
        (db.poolSize ? ` pool_size=${db.poolSize}` : ''),
    );
    const ini = [
      '[databases]',
      ...databases,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${join(dir, 'users.txt')}`,
      `pool_mode = ${options.poolMode ?? 'transaction'}`,
      `default_pool_size = ${options.defaultPoolSize ?? 10}`,
      `max_client_conn = ${options.maxClientConn ?? 500}`,
      `ignore_startup_parameters = ${(options.ignoreStartupParameters ?? []).map(ident).join(',')}`,
      'logfile =',
      'pidfile =',
      'log_connections = 0',
      'log_disconnections = 0',
      'log_pooler_errors = 1',
      '',
    ].join('\n');
    writeFileSync(join(dir, 'pgbouncer.ini'), ini, { mode: 0o644 });
    writeFileSync(join(dir, 'users.txt'), `"${user}" "${password.replace(/"/g, '""')}"\n`, { mode: 0o644 });
    const args = [...(process.getuid?.() === 0 ? ['-u', 'nobody'] : []), join(dir, 'pgbouncer.ini')];
    const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const bouncer = new PgBouncer(child, port, user, password, dir);
    live.add(child);
    bouncer.exit = new Promise((done) =>
      child.once('close', () => {
        live.delete(child);
        done();
      }),
    );
    const keep = (chunk: Buffer) => {
      bouncer.output.push(
        ...chunk
          .toString()
          .split('\n')
          .filter((line) => line !== ''),
      );
      if (bouncer.output.length > 200) bouncer.output.splice(0, bouncer.output.length - 200);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    child.once('error', (error) => bouncer.output.push(`spawn error: ${error.message}`));
    const first = Object.keys(options.databases)[0];
    const deadline = Date.now() + 10_000;
    for (;;) {
      if (child.exitCode !== null || child.signalCode !== null) {
        bouncer.cleanup();
        throw new Error(`pgbouncer exited during start-up:\n${bouncer.output.join('\n')}`);
      }
      const client = new pg.Client({ connectionString: bouncer.url(first), connectionTimeoutMillis: 1_000 });
      client.on('error', () => undefined);
      try {
        await client.connect();
        await client.query('select 1');
        return bouncer;
      } catch (error) {
        if (Date.now() > deadline) {
          await bouncer.stop();
          throw new Error(`pgbouncer on ${port} not ready: ${(error as Error).message}\n${bouncer.output.join('\n')}`, {
            cause: error,
          });
        }
      } finally {
        await client.end().catch(() => undefined);
      }
      await sleep(50);
    }
  }

  /** The URL a client uses for one of the configured databases. */
  url(alias: string): string {
    const auth = this.password
      ? `${encodeURIComponent(this.user)}:${encodeURIComponent(this.password)}`
      : encodeURIComponent(this.user);
    return `postgres://${auth}@127.0.0.1:${this.port}/${alias}`;
  }

  /** SIGTERM (PgBouncer's immediate shutdown; SIGINT would wait for clients), SIGKILL after 3 s; removes its files. */
  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      this.child.kill('SIGTERM');
      const timer = setTimeout(() => this.child.kill('SIGKILL'), 3_000);
      await this.exit;
      clearTimeout(timer);
    }
    this.cleanup();
  }

  private cleanup(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}
