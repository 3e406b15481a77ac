import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from '../../test/e2e/cluster';
import { sleep } from './util';

/**
 * A private Postgres in a temp folder that the chaos runner may crash and restart: `initdb` with the
 * Debian binaries, trust auth on 127.0.0.1, a free port, `fsync` on (durability is what is tested).
 * It never touches the machine's own cluster. Run as root, the server runs as the `postgres` user.
 */

function binDir(): string {
  const base = '/usr/lib/postgresql';
  const versions = existsSync(base)
    ? readdirSync(base)
        .filter((v) => existsSync(join(base, v, 'bin', 'postgres')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions.length === 0) throw new Error(`no Postgres server binaries under ${base}/*/bin`);
  return join(base, versions[0], 'bin');
}

function postgresUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined; // not root: run as ourselves
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((entry) => entry.startsWith('postgres:'));
  if (!line) throw new Error('running as root needs a "postgres" user to run the private Postgres as');
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

/** Pids of the direct children of `pid` (backends and auxiliaries of a postmaster). */
function childrenOf(pid: number): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) found.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

export class PrivatePostgres {
  readonly output: string[] = [];
  private child: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();
  /** Backends left behind by a kill -9 of their postmaster: waited for (and killed) by pid. */
  private orphans: number[] = [];
  private readonly bin = binDir();
  private readonly user = postgresUser();

  private constructor(
    readonly root: string,
    readonly port: number,
  ) {}

  get dataDir(): string {
    return join(this.root, 'pgdata');
  }

  /** The URL of the `postgres` database (admin) or of `database`. */
  url(database = 'postgres'): string {
    return `postgres://postgres@127.0.0.1:${this.port}/${database}`;
  }

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** initdb into `root/pgdata` (root must exist and be traversable by the server's user). */
  static async create(root: string): Promise<PrivatePostgres> {
    const server = new PrivatePostgres(root, await freePort());
    for (const dir of [server.dataDir, join(root, 'sock')]) {
      mkdirSync(dir, { mode: 0o700 });
      if (server.user) chownSync(dir, server.user.uid, server.user.gid);
    }
    const init = spawnSync(
      join(server.bin, 'initdb'),
      ['-D', server.dataDir, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--no-locale', '--no-sync'],
      { cwd: root, env: { PATH: process.env.PATH ?? '', LANG: 'C' }, encoding: 'utf8', ...(server.user ?? {}) },
    );
    if (init.status !== 0) throw new Error(`initdb failed (${init.status}):\n${init.stdout}\n${init.stderr}`);
    return server;
  }

  /** Start the postmaster and wait until it accepts queries (crash recovery included). */
  async start(timeoutMs = 60_000): Promise<void> {
    if (this.running) throw new Error('postgres is already running');
    await this.reapOrphans();
    const child = spawn(
      join(this.bin, 'postgres'),
      [
        '-D',
        this.dataDir,
        '-p',
        String(this.port),
        '-c',
        'listen_addresses=127.0.0.1',
        '-c',
        `unix_socket_directories=${join(this.root, 'sock')}`,
        '-c',
        'fsync=on',
        '-c',
        'synchronous_commit=on',
        '-c',
        'full_page_writes=on',
        '-c',
        'max_connections=300',
        '-c',
        'shared_buffers=64MB',
        '-c',
        'log_connections=off',
      ],
      {
        cwd: this.root,
        env: { PATH: process.env.PATH ?? '', LANG: 'C' },
        stdio: ['ignore', 'pipe', 'pipe'],
        ...(this.user ?? {}),
      },
    );
    this.child = child;
    this.exited = new Promise((done) => child.once('exit', () => done()));
    const keep = (chunk: Buffer) => {
      this.output.push(
        ...chunk
          .toString()
          .split('\n')
          .filter((line) => line !== ''),
      );
      if (this.output.length > 200) this.output.splice(0, this.output.length - 200);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (!this.running) throw new Error(`postgres exited during start-up:\n${this.output.slice(-30).join('\n')}`);
      const client = new pg.Client({ connectionString: this.url(), connectionTimeoutMillis: 1_000 });
      client.on('error', () => undefined);
      try {
        await client.connect();
        await client.query('select 1');
        return;
      } catch {
        // starting up or recovering
      } finally {
        await client.end().catch(() => undefined);
      }
      if (Date.now() > deadline) {
        await this.crash('kill9');
        throw new Error(`postgres not ready after ${timeoutMs} ms:\n${this.output.slice(-30).join('\n')}`);
      }
      await sleep(100);
    }
  }

  /**
   * A crash: `immediate` is `pg_ctl stop -m immediate` (SIGQUIT: backends quit, no checkpoint, crash
   * recovery on the next start); `kill9` SIGKILLs the postmaster alone (its backends notice and die).
   */
  async crash(mode: 'immediate' | 'kill9'): Promise<void> {
    if (!this.running) return;
    const pid = this.child!.pid!;
    if (mode === 'kill9') this.orphans.push(...childrenOf(pid));
    this.child!.kill(mode === 'kill9' ? 'SIGKILL' : 'SIGQUIT');
    await this.exited;
  }

  /** A clean, fast shutdown (SIGINT), SIGKILL if it lingers. */
  async stop(graceMs = 10_000): Promise<void> {
    if (this.running) {
      const child = this.child!;
      child.kill('SIGINT');
      const timer = setTimeout(() => {
        this.orphans.push(...childrenOf(child.pid!));
        child.kill('SIGKILL');
      }, graceMs);
      await this.exited;
      clearTimeout(timer);
    }
    await this.reapOrphans();
  }

  /** Wait for backends orphaned by a kill -9 to exit (they notice postmaster death); SIGKILL stragglers. */
  private async reapOrphans(timeoutMs = 5_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.orphans.some(alive) && Date.now() < deadline) await sleep(50);
    for (const pid of this.orphans.filter(alive)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    this.orphans = [];
  }

  /** Last resort on exit: no server left behind. */
  killNow(): void {
    if (this.running) {
      this.orphans.push(...childrenOf(this.child!.pid!));
      this.child!.kill('SIGKILL');
    }
    for (const pid of this.orphans) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
  }
}
