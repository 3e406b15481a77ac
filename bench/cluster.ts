import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import Redis from 'ioredis';
import pg from 'pg';
import WebSocket from 'ws';
import { openRawWebSocket } from './raw-socket';
import { ulid } from '#domain';
import { embeddedStore, freePort, profileArgs, rateLimitEnv, request, requireEnv, scratchDatabase } from './support';

/**
 * Multi-process bench clusters: api and gateway processes (`ROOST_ROLE`) on one scratch database
 * and one fresh Redis key prefix, with the file descriptor limit raised to the hard limit for every
 * child. `close()` stops the processes, drops the database and deletes the prefix's keys.
 *
 * `ROOST_BENCH_CPU_PROF=<dir>` starts api and gateway processes with `--cpu-prof` into that folder
 * (written when they exit after SIGTERM), to find where their time goes.
 */

const MAIN = join(__dirname, '..', 'apps', 'roost', 'src', 'main.js');

export type Role = 'api' | 'gateway' | 'all';

/** The soft limit on open files of this process (the bench's own sockets count against it). */
export function openFileLimit(pid: number | 'self' = 'self'): number {
  const line = readFileSync(`/proc/${pid}/limits`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('Max open files'));
  const soft = line?.split(/\s{2,}/)[1];
  return soft === undefined || soft === 'unlimited' ? Infinity : Number(soft);
}

/** VmRSS of a process, in bytes. */
export function rssBytes(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('VmRSS:'));
  if (!line) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(/(\d+)/.exec(line)![1]) * 1024;
}

/** One Roost process of one role; it keeps its port across stop and start. */
export class RoostNode {
  readonly url: string;
  child: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();
  /** The process's last 40 output lines. */
  readonly output: string[] = [];

  constructor(
    readonly role: Role,
    readonly port: number,
    private readonly env: Record<string, string>,
  ) {
    this.url = `http://127.0.0.1:${port}`;
  }

  get pid(): number {
    if (!this.child?.pid) throw new Error(`${this.role} is not running`);
    return this.child.pid;
  }

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Spawn (file descriptor limit raised to the hard limit) and wait for /healthz. */
  async start(timeoutMs = 60_000): Promise<void> {
    if (this.running) throw new Error(`${this.role} on port ${this.port} is already running`);
    const nodeArgs = profileArgs(`${this.role}-${this.port}`);
    // Through the bash wrapper a profiled process once wrote no profile at all (Node 20, cause not
    // found): profiled processes start directly and inherit the bench's own limit instead.
    const command =
      nodeArgs.length > 0
        ? [process.execPath, ...nodeArgs, MAIN]
        : ['/bin/bash', '-c', 'ulimit -n "$(ulimit -Hn)"; exec "$0" "$@"', process.execPath, MAIN];
    const child = spawn(command[0], command.slice(1), {
      env: {
        ...process.env,
        ROOST_METRICS_PORT: '0',
        ...this.env,
        ROOST_ROLE: this.role,
        PORT: String(this.port),
        ROOST_HOST: '127.0.0.1',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
    // ROOST_BENCH_OUTPUT_DIR: each operator's whole stdout and stderr are also appended to a file
    // there (`<role>-<port>.log`, the folder made if missing), e.g. with ROOST_BENCH_NODE_ARGS=--trace-gc.
    const outputDir = process.env.ROOST_BENCH_OUTPUT_DIR;
    if (outputDir) mkdirSync(outputDir, { recursive: true });
    const file = outputDir
      ? createWriteStream(join(outputDir, `${this.role}-${this.port}.log`), { flags: 'a' })
      : undefined;
    child.once('close', () => file?.end());
    const keep = (chunk: Buffer) => {
      file?.write(chunk);
      this.output.push(
        ...chunk
          .toString()
          .split('\n')
          .filter((line) => line !== ''),
      );
      if (this.output.length > 40) this.output.splice(0, this.output.length - 40);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (!this.running) throw new Error(`${this.role} exited during start-up:\n${this.output.join('\n')}`);
      try {
        if ((await fetch(`${this.url}/healthz`)).ok) return;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        throw new Error(`${this.role} not healthy after ${timeoutMs} ms:\n${this.output.join('\n')}`);
      }
      await sleep(20);
    }
  }

  /** SIGTERM (graceful drain: sockets close with 1012), SIGKILL after `graceMs`. */
  async stop(graceMs = 15_000): Promise<void> {
    if (!this.running) return this.exited;
    this.child!.kill('SIGTERM');
    const timer = setTimeout(() => this.child?.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }

  /** The text of the process's /metrics. */
  async metrics(): Promise<string> {
    return (await request(this.url, 'GET', '/metrics', undefined)).text;
  }
}

export interface BenchClusterOptions {
  api?: number;
  gateway?: number;
  env?: Record<string, string>;
  /**
   * One `ROOST_ROLE=all` process serving as both api and gateway: `postgres` on a scratch
   * database and Redis (the README's simplest production start), `embedded` with neither (PGlite
   * in a temporary folder, the in-process bus: `npm start`).
   */
  single?: 'postgres' | 'embedded';
}

/** N api + M gateway processes on one scratch database and one Redis key prefix. */
export class BenchCluster {
  private constructor(
    readonly apis: RoostNode[],
    readonly gateways: RoostNode[],
    readonly adminToken: string,
    readonly databaseUrl: string,
    readonly redisUrl: string,
    readonly prefix: string,
    private readonly dropDatabase: () => Promise<void>,
  ) {}

  static async start(options: BenchClusterOptions = {}): Promise<BenchCluster> {
    if (options.single === 'embedded') return BenchCluster.startEmbedded(options);
    const redisUrl = requireEnv('REDIS_URL');
    const database = await scratchDatabase('roost_bench');
    const prefix = `roost-bench:${ulid()}:`;
    const adminToken = `bench-admin-${randomBytes(8).toString('hex')}`;
    const env = {
      DATABASE_URL: database.url,
      REDIS_URL: redisUrl,
      ROOST_REDIS_PREFIX: prefix,
      ROOST_ADMIN_TOKEN: adminToken,
      ROOST_LOG_LEVEL: process.env.ROOST_BENCH_LOG_LEVEL ?? 'warn',
      ...rateLimitEnv(),
      ...options.env,
    };
    const make = async (role: Role) => new RoostNode(role, await freePort(), env);
    const single = options.single === 'postgres' ? [await make('all')] : undefined;
    const apis = single ?? (await Promise.all(Array.from({ length: options.api ?? 1 }, () => make('api'))));
    const gateways = single ?? (await Promise.all(Array.from({ length: options.gateway ?? 1 }, () => make('gateway'))));
    const cluster = new BenchCluster(apis, gateways, adminToken, database.url, redisUrl, prefix, database.drop);
    try {
      // The first api applies the migrations; the others start after it. In single mode the one
      // node is both api and gateway: starting it twice left an orphan serving the port while a
      // second copy booted beside it (its CPU in the first seconds of every push-all run), failed
      // to listen and became the pid that CPU, RSS and profiles were read from.
      await apis[0]?.start();
      await Promise.all(
        [...new Set([...apis.slice(1), ...gateways])].filter((node) => node !== apis[0]).map((node) => node.start()),
      );
    } catch (error) {
      await cluster.close();
      throw error;
    }
    return cluster;
  }

  /** One embedded `ROOST_ROLE=all` process: no DATABASE_URL, no REDIS_URL, PGlite in a temporary folder. */
  private static async startEmbedded(options: BenchClusterOptions): Promise<BenchCluster> {
    const store = embeddedStore();
    const adminToken = `bench-admin-${randomBytes(8).toString('hex')}`;
    const env = {
      ...store.env,
      ROOST_ADMIN_TOKEN: adminToken,
      ROOST_LOG_LEVEL: process.env.ROOST_BENCH_LOG_LEVEL ?? 'warn',
      ...rateLimitEnv(),
      ...options.env,
    };
    const node = new RoostNode('all', await freePort(), env);
    const cluster = new BenchCluster([node], [node], adminToken, '', '', '', async () => store.drop());
    try {
      await node.start(120_000);
    } catch (error) {
      await cluster.close();
      throw error;
    }
    return cluster;
  }

  get nodes(): RoostNode[] {
    return [...new Set([...this.apis, ...this.gateways])];
  }

  /** Open-policy agents through the admin API, `concurrency` requests in flight; tokens in order. */
  async createAgents(handles: readonly string[], concurrency = 16): Promise<string[]> {
    const tokens = new Array<string>(handles.length);
    let next = 0;
    const worker = async () => {
      while (next < handles.length) {
        const i = next++;
        const api = this.apis[i % this.apis.length];
        const reply = await request(
          api.url,
          'POST',
          '/_admin/agents',
          this.adminToken,
          JSON.stringify({ handle: handles[i], policy: 'open' }),
        );
        if (reply.status !== 201) throw new Error(`create ${handles[i]}: ${reply.status} ${reply.text}`);
        tokens[i] = (JSON.parse(reply.text) as { token: string }).token;
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
    return tokens;
  }

  /** A Redis connection for the bench itself. */
  redis(): Redis {
    const redis = new Redis(this.redisUrl, { maxRetriesPerRequest: 1 });
    redis.on('error', () => undefined);
    return redis;
  }

  async close(): Promise<void> {
    await Promise.all(this.nodes.map((node) => node.stop()));
    await this.dropDatabase().catch((error: unknown) =>
      process.stderr.write(`bench: dropping the database failed: ${String(error)}\n`),
    );
    if (this.redisUrl === '') return;
    const redis = new Redis(this.redisUrl, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    redis.on('error', () => undefined);
    try {
      await redis.connect();
      let cursor = '0';
      do {
        const [nextCursor, keys] = await redis.scan(cursor, 'MATCH', `${this.prefix}*`, 'COUNT', 1000);
        cursor = nextCursor;
        if (keys.length > 0) await redis.del(...keys);
      } while (cursor !== '0');
    } finally {
      redis.disconnect();
    }
  }
}

/** `ws://` URL of a node's /connect endpoint. */
export const connectUrl = (node: RoostNode) => `ws://127.0.0.1:${node.port}/connect`;

/**
 * One authenticated `/connect` socket; resolves once open. Frames are handed over raw (UTF-8 is not
 * validated: the bench only reads the envelope id at a fixed offset).
 */
export function openSocket(url: string, token: string, onMessage?: (data: Buffer) => void): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, {
      headers: { authorization: `Bearer ${token}` },
      perMessageDeflate: false,
      skipUTF8Validation: true,
    });
    if (onMessage) ws.on('message', (data: Buffer) => onMessage(data));
    const fail = (error: Error) => {
      ws.removeListener('open', ok);
      reject(error);
    };
    const ok = () => {
      ws.removeListener('error', fail);
      ws.on('error', () => undefined);
      resolve(ws);
    };
    ws.once('open', ok);
    ws.once('error', fail);
    ws.once('unexpected-response', (_req, res) => {
      ws.removeListener('error', fail);
      ws.on('error', () => undefined);
      reject(new Error(`/connect refused: ${res.statusCode}`));
      ws.terminate();
    });
  });
}

/** A bench listener: a `ws` client or a light raw one (`ROOST_BENCH_LISTENER`). */
export interface ListenerSocket {
  on(event: 'close', listener: (code: number) => void): unknown;
  terminate(): void;
}

/** `ROOST_BENCH_LISTENER`: `ws` (default, the ordinary client) or `raw` (bench/raw-socket.ts). */
export function benchListener(): 'ws' | 'raw' {
  const kind = process.env.ROOST_BENCH_LISTENER ?? 'ws';
  if (kind !== 'ws' && kind !== 'raw') throw new Error(`ROOST_BENCH_LISTENER must be ws or raw, not ${kind}`);
  return kind;
}

/** `openSocket` with the client `kind` chose: the same handshake, frames handed over raw. */
export function openListener(
  kind: 'ws' | 'raw',
  url: string,
  token: string,
  onMessage?: (data: Buffer) => void,
): Promise<ListenerSocket> {
  if (kind === 'ws') return openSocket(url, token, onMessage);
  return openRawWebSocket(url, { authorization: `Bearer ${token}` }, (ws) => {
    if (onMessage) ws.on('message', onMessage);
  });
}

/** Open `count` sockets with at most `concurrency` handshakes in flight. */
export async function openSockets<S = WebSocket>(
  count: number,
  concurrency: number,
  open: (i: number) => Promise<S>,
): Promise<S[]> {
  const sockets = new Array<S>(count);
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      sockets[i] = await open(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
  return sockets;
}

/** `{"op":"envelope.notify","id":"` — the id of a notify frame is the 26 bytes after it. */
const NOTIFY_PREFIX = Buffer.from('{"op":"envelope.notify","id":"');

/** The envelope id of an `envelope.notify` frame, else undefined (cheap: no JSON parse). */
export function notifyId(data: Buffer): string | undefined {
  if (
    data.length < NOTIFY_PREFIX.length + 26 ||
    data.compare(NOTIFY_PREFIX, 0, NOTIFY_PREFIX.length, 0, NOTIFY_PREFIX.length) !== 0
  )
    return undefined;
  return data.toString('latin1', NOTIFY_PREFIX.length, NOTIFY_PREFIX.length + 26);
}

/** User and system CPU seconds of a `/proc/…/stat` file (a process's, or one of its threads'). */
function statTimes(path: string): { user: number; system: number } {
  const stat = readFileSync(path, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // fields[11] and [12] are utime and stime (fields 14 and 15 of proc(5)), in clock ticks.
  return { user: Number(fields[11]) / 100, system: Number(fields[12]) / 100 };
}

/** CPU seconds (user + system) a process has used so far. */
export function cpuSeconds(pid: number): number {
  const { user, system } = statTimes(`/proc/${pid}/stat`);
  return user + system;
}

/**
 * Counters of a process summed over its threads, from /proc: user and system CPU seconds, the
 * main thread's share of them (the rest is V8's helper threads: optimizing compiler, concurrent
 * GC; and libuv's pool), syscalls (read-like + write-like, /proc/<pid>/io) and context switches
 * (voluntary: it blocked or slept; involuntary: the scheduler took the core away). Zeros once the
 * process is gone.
 */
export function processCounters(pid: number): {
  userS: number;
  systemS: number;
  mainThreadS: number;
  /** The main thread's time runnable but waiting for a CPU (schedstat). */
  mainThreadRunQueueS: number;
  syscalls: number;
  voluntarySwitches: number;
  involuntarySwitches: number;
} {
  const counters = {
    userS: 0,
    systemS: 0,
    mainThreadS: 0,
    mainThreadRunQueueS: 0,
    syscalls: 0,
    voluntarySwitches: 0,
    involuntarySwitches: 0,
  };
  try {
    const { user, system } = statTimes(`/proc/${pid}/stat`);
    counters.userS = user;
    counters.systemS = system;
    const main = statTimes(`/proc/${pid}/task/${pid}/stat`);
    counters.mainThreadS = main.user + main.system;
    counters.mainThreadRunQueueS =
      Number(readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ')[1]) / 1e9;
    const io = readFileSync(`/proc/${pid}/io`, 'utf8');
    counters.syscalls = Number(/syscr: (\d+)/.exec(io)?.[1] ?? 0) + Number(/syscw: (\d+)/.exec(io)?.[1] ?? 0);
    for (const task of readdirSync(`/proc/${pid}/task`)) {
      const status = readFileSync(`/proc/${pid}/task/${task}/status`, 'utf8');
      counters.voluntarySwitches += Number(/\nvoluntary_ctxt_switches:\s+(\d+)/.exec(status)?.[1] ?? 0);
      counters.involuntarySwitches += Number(/\nnonvoluntary_ctxt_switches:\s+(\d+)/.exec(status)?.[1] ?? 0);
    }
  } catch {
    // gone, or a thread exited while we read: partial counts, as for cpuSeconds
  }
  return counters;
}

/** Machine-wide CPU time counters (all cores), in clock ticks, by /proc/stat column. */
export function machineCpu(): {
  user: number;
  nice: number;
  system: number;
  idle: number;
  iowait: number;
  irq: number;
  softirq: number;
  steal: number;
  total: number;
} {
  const [user, nice, system, idle, iowait, irq, softirq, steal] = readFileSync('/proc/stat', 'utf8')
    .split('\n')[0]
    .trim()
    .split(/\s+/)
    .slice(1, 9)
    .map(Number);
  return {
    user,
    nice,
    system,
    idle,
    iowait,
    irq,
    softirq,
    steal,
    total: user + nice + system + idle + iowait + irq + softirq + steal,
  };
}

/** The share of all cores' time not idle (nor waiting on I/O) between two `machineCpu` readings. */
export function machineBusyShare(before: ReturnType<typeof machineCpu>, after: ReturnType<typeof machineCpu>): number {
  const total = after.total - before.total;
  return total > 0 ? 1 - (after.idle - before.idle + after.iowait - before.iowait) / total : 0;
}

/** CPU ticks of every process on the machine, by pid, with its command name. */
function processTicks(): Map<number, { comm: string; ticks: number }> {
  const out = new Map<number, { comm: string; ticks: number }>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.set(Number(entry), { comm, ticks: Number(fields[11]) + Number(fields[12]) });
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

/**
 * CPU use over a window, in % of one core: the named processes, every other process grouped by
 * command name (Postgres backends and background writers, redis-server, …, those above 2%), and the
 * machine's busy share of all cores split by kind (user, system, softirq, steal). `begin()`, `end()`.
 */
export function cpuWindow(named: Record<string, number>) {
  let start = 0;
  let before = processTicks();
  let machine = machineCpu();
  return {
    begin(): void {
      start = performance.now();
      before = processTicks();
      machine = machineCpu();
    },
    end(): Record<string, number> {
      const seconds = (performance.now() - start) / 1000;
      const after = processTicks();
      const pct = (ticks: number) => Math.round((ticks / 100 / seconds) * 100);
      const names = new Map(Object.entries(named).map(([name, pid]) => [pid, name]));
      const byName = new Map<string, number>();
      for (const [pid, { comm, ticks }] of after) {
        const delta = ticks - (before.get(pid)?.ticks ?? 0);
        const name = pid === process.pid ? 'bench' : (names.get(pid) ?? comm);
        byName.set(name, (byName.get(name) ?? 0) + delta);
      }
      const out: Record<string, number> = {};
      for (const name of [...Object.keys(named), 'bench']) out[name] = pct(byName.get(name) ?? 0);
      for (const [name, ticks] of [...byName].sort((a, b) => b[1] - a[1])) {
        if (!(name in out) && pct(ticks) >= 2) out[name] = pct(ticks);
      }
      const now = machineCpu();
      const total = now.total - machine.total;
      const busyTicks = total - (now.idle - machine.idle) - (now.iowait - machine.iowait);
      const listed = Object.values(out).reduce((sum, value) => sum + value, 0);
      // Kernel work outside any process (softirq), and processes that exited during the window.
      out.other = Math.max(0, pct(busyTicks) - listed);
      const share = (key: 'user' | 'system' | 'softirq' | 'steal' | 'iowait') =>
        Math.round(((now[key] - machine[key]) / total) * 100);
      out.machine_busy_pct = Math.round(machineBusyShare(machine, now) * 100);
      out.machine_user_pct = share('user') + Math.round(((now.nice - machine.nice) / total) * 100);
      out.machine_system_pct = share('system');
      out.machine_softirq_pct = share('softirq');
      out.machine_steal_pct = share('steal');
      return out;
    },
  };
}

/** A TcpExt counter of /proc/net/netstat (machine-wide), e.g. ListenOverflows. */
export function tcpExt(name: string): number {
  const lines = readFileSync('/proc/net/netstat', 'utf8').split('\n');
  for (let i = 0; i + 1 < lines.length; i += 2) {
    if (!lines[i].startsWith('TcpExt:')) continue;
    const names = lines[i].split(/\s+/);
    const values = lines[i + 1].split(/\s+/);
    const index = names.indexOf(name);
    return index < 0 ? NaN : Number(values[index]);
  }
  return NaN;
}

/**
 * CPU seconds so far of the Postgres backends serving the scratch database, by pid, and of the
 * Redis server when given (from /proc: the bench runs on their machine; 0 without one); a pid gone
 * or unreadable counts 0. In `push` the Redis figure includes the Redis floor's own XADD/XREAD.
 */
export async function serverCpu(databaseUrl: string, redis?: { info(section: string): Promise<string> }) {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ pid: number }>(
      'select pid from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()',
    );
    const redisPid = redis ? Number(/process_id:(\d+)/.exec(await redis.info('server'))?.[1]) : NaN;
    const read = (pid: number) => {
      try {
        return cpuSeconds(pid);
      } catch {
        return 0;
      }
    };
    return {
      postgres: new Map(rows.map(({ pid }) => [pid, read(pid)])),
      redis: Number.isFinite(redisPid) ? read(redisPid) : 0,
    };
  } finally {
    await client.end();
  }
}

/**
 * CPU seconds between two `serverCpu` readings: the Postgres backends (one that started in
 * between counts from 0) and Redis.
 */
export function serverCpuBetween(
  before: Awaited<ReturnType<typeof serverCpu>>,
  after: Awaited<ReturnType<typeof serverCpu>>,
): { postgres: number; redis: number } {
  let postgres = 0;
  for (const [pid, cpu] of after.postgres) postgres += cpu - (before.postgres.get(pid) ?? 0);
  return { postgres, redis: after.redis - before.redis };
}
