import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createDatabase, type ScratchDatabase } from './database';
import type { GcCounters } from './gc-probe';
import { freePort } from './free-port';

/** Shared pieces of the bench scenarios: a scratch database, an operator process, a load loop. */

export function requireEnv(name: string): string {
  const value = process.env[name];
  const example = name === 'REDIS_URL' ? 'redis://127.0.0.1:6379' : 'postgres://postgres@127.0.0.1:5432/test';
  if (!value) throw new Error(`${name} is required (e.g. ${name}=${example})`);
  return value;
}

export const scratchDatabase = (prefix: string): Promise<ScratchDatabase> =>
  createDatabase(requireEnv('DATABASE_URL'), prefix);

/**
 * The store of an embedded operator: the env that runs it without Postgres and Redis (PGlite in a
 * new temporary folder), and `drop`, which removes the folder.
 */
export function embeddedStore(): { env: Record<string, string>; drop: () => void } {
  const dataDir = mkdtempSync(join(tmpdir(), 'roost-bench-embedded-'));
  return {
    env: { DATABASE_URL: '', REDIS_URL: '', ROOST_DATA_DIR: dataDir },
    drop: () => rmSync(dataDir, { recursive: true, force: true }),
  };
}

export { freePort };

export interface OperatorProcess {
  url: string;
  adminToken: string;
  child: ChildProcess;
  /** CPU time (user + system) the process has used so far, in ms (from /proc). */
  cpuMs(): Promise<number>;
  stop(): Promise<void>;
}

/** utime + stime of a process from /proc/<pid>/stat, in ms (0 once it is gone). */
export async function processCpuMs(pid: number | undefined): Promise<number> {
  if (pid === undefined) return 0;
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    return (ticks * 1000) / 100; // USER_HZ is 100 on Linux
  } catch {
    return 0;
  }
}

/** Node/V8 flags given in an environment variable, separated by spaces. */
export const nodeArgsFromEnv = (name: string): string[] =>
  (process.env[name] ?? '').split(' ').filter((arg) => arg !== '');

/**
 * Node flags for an operator process: with `ROOST_BENCH_CPU_PROF=<dir>`, a CPU profile into that
 * folder named after `name`, written when the process exits; the GC probe (gc-probe.ts) unless
 * ROOST_BENCH_GC_PROBE=0; then ROOST_BENCH_NODE_ARGS.
 */
export function profileArgs(name: string, more: readonly string[] = []): string[] {
  const dir = process.env.ROOST_BENCH_CPU_PROF;
  // ROOST_BENCH_NODE_ARGS: extra Node/V8 flags for the operator processes only (A/B of a flag).
  const extra = [...nodeArgsFromEnv('ROOST_BENCH_NODE_ARGS'), ...more];
  return [
    ...(dir ? ['--cpu-prof', `--cpu-prof-dir=${dir}`, `--cpu-prof-name=${name}-${Date.now()}.cpuprofile`] : []),
    ...(process.env.ROOST_BENCH_GC_PROBE === '0' ? [] : ['--require', join(__dirname, 'gc-probe.js')]),
    ...extra,
  ];
}

/**
 * The GC probe's running totals of an operator process (gc-probe.ts), or undefined when it has
 * none (probe off, process gone). The file name is gc-probe.ts's: that module installs itself when
 * loaded, so the bench names its file instead of importing it.
 */
export async function gcCounters(pid: number | undefined): Promise<GcCounters | undefined> {
  if (pid === undefined || process.env.ROOST_BENCH_GC_PROBE === '0') return undefined;
  const file = join(tmpdir(), `roost-bench-gc-${pid}.json`);
  await rm(file, { force: true });
  try {
    process.kill(pid, 'SIGUSR2');
  } catch {
    return undefined;
  }
  for (let attempt = 0; attempt < 100; attempt++) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    try {
      return JSON.parse(await readFile(file, 'utf8')) as GcCounters;
    } catch {
      // not written yet (or half written)
    }
  }
  return undefined;
}

/**
 * Per envelope (and per 1,000) from the GC probe's totals of the operator processes before and
 * after the counted seconds: KB allocated on the V8 heap, scavenges and GC time. Null fields when
 * a process had no probe. Each process's allocations after its last collection are counted from
 * its heap growth, so the figure does not depend on where the collections fall.
 */
export function gcFields(
  before: ReadonlyArray<GcCounters | undefined>,
  after: ReadonlyArray<GcCounters | undefined>,
  envelopes: number,
): Record<string, number | null> {
  const complete = before.every(Boolean) && after.every(Boolean) && envelopes > 0;
  const sum = (
    key:
      | 'allocatedBytes'
      | 'scavenges'
      | 'scavengeMs'
      | 'markCompacts'
      | 'markCompactMs'
      | 'otherGcMs'
      | 'scavengeSurvivedBytes',
  ) => after.reduce((total, end, i) => total + (end?.[key] ?? 0) - (before[i]?.[key] ?? 0), 0);
  const per = (value: number, scale: number, digits: number) =>
    complete ? round((value * scale) / envelopes, digits) : null;
  const scavenges = sum('scavenges');
  return {
    operator_allocated_kb_per_envelope: per(sum('allocatedBytes') / 1024, 1, 1),
    operator_scavenges_per_1000_envelopes: per(scavenges, 1000, 2),
    operator_gc_ms_per_1000_envelopes: per(sum('scavengeMs') + sum('markCompactMs') + sum('otherGcMs'), 1000, 1),
    operator_mark_compacts_in_run: complete ? sum('markCompacts') : null,
    operator_scavenge_ms_mean: complete && scavenges > 0 ? round(sum('scavengeMs') / scavenges, 2) : null,
    operator_scavenge_survived_kb_mean:
      complete && scavenges > 0 ? round(sum('scavengeSurvivedBytes') / 1024 / scavenges, 0) : null,
  };
}

/**
 * Each operator process's main thread in the counted seconds: ms per second on a CPU and runnable
 * but waiting in the run queue (`threads`, from processCounters, read from outside); and what the
 * stall probe (gc-probe.ts, ROOST_BENCH_STALL_PROBE=1) saw between its two readings: how many ticks
 * of its 5 ms timer came 5 ms or more late, and the three longest with what the thread did in
 * them. Empty when no process had the probe on.
 */
/**
 * The stall probe's late ticks since its previous reading: how many, and the three longest with
 * what the thread did in them.
 */
export function lateTicks(end: GcCounters): Record<string, unknown> {
  return {
    late_ticks: end.stallCount,
    longest: end.stalls.slice(0, 3).map((stall) => ({
      interval_ms: round(stall.intervalMs),
      on_cpu_ms: round(stall.onCpuMs),
      run_queue_ms: round(stall.runQueueMs),
      gc_ms: round(stall.gcMs),
    })),
  };
}

export function stallFields(
  before: ReadonlyArray<GcCounters | undefined>,
  after: ReadonlyArray<GcCounters | undefined>,
  threads: ReadonlyArray<{ name: string; onCpuS: number; runQueueS: number }>,
  seconds: number,
): Record<string, unknown> {
  const processes = after.flatMap((end, i) => {
    if (!end?.stallProbe || !before[i]) return [];
    return [
      {
        process: threads[i].name,
        main_thread_on_cpu_ms_per_s: round((threads[i].onCpuS * 1000) / seconds, 1),
        main_thread_run_queue_ms_per_s: round((threads[i].runQueueS * 1000) / seconds, 1),
        ...lateTicks(end),
      },
    ];
  });
  return processes.length > 0 ? { operator_loop_stalls: processes } : {};
}

/** The operators' rate limiter: off, or on at ROOST_BENCH_RATE_LIMIT per second (burst the same). */
export function rateLimitEnv(): Record<string, string> {
  const perSecond = process.env.ROOST_BENCH_RATE_LIMIT ?? '0';
  return perSecond === '0'
    ? { ROOST_RATE_LIMIT_PER_S: '0' }
    : { ROOST_RATE_LIMIT_PER_S: perSecond, ROOST_RATE_LIMIT_BURST: perSecond };
}

/**
 * `node dist/apps/roost/src/main.js` with the given env, once /healthz answers; `main` runs another
 * build's entry point instead (`accept-paired`'s baseline, `accept-floor`'s bare server); `nodeArgs`
 * are Node/V8 flags for this process only, after ROOST_BENCH_NODE_ARGS; `name` starts its CPU
 * profile's file name.
 */
export async function startOperatorProcess(
  env: Record<string, string>,
  main = join(__dirname, '..', 'apps', 'roost', 'src', 'main.js'),
  nodeArgs: readonly string[] = [],
  name = 'operator',
): Promise<OperatorProcess> {
  const port = await freePort();
  const adminToken = `bench-admin-${randomBytes(8).toString('hex')}`;
  const child = spawn(process.execPath, [...profileArgs(`${name}-${port}`, nodeArgs), main], {
    env: {
      ...process.env,
      ROOST_ADMIN_TOKEN: adminToken,
      PORT: String(port),
      ROOST_LOG_LEVEL: process.env.ROOST_BENCH_LOG_LEVEL ?? 'warn',
      // ROOST_BENCH_RATE_LIMIT=<per second>: the per-agent limiter on (its default, shared through
      // Redis when REDIS_URL is set) at a rate that refuses nothing, burst the same; else off.
      ...rateLimitEnv(),
      ROOST_METRICS_PORT: '0',
      ...env,
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const url = `http://127.0.0.1:${port}`;
  // The embedded default runs initdb on first start: slow on a busy machine.
  const deadline = Date.now() + (env.DATABASE_URL === '' ? 180_000 : 30_000);
  for (;;) {
    if (child.exitCode !== null) throw new Error(`operator exited with ${child.exitCode}`);
    try {
      if ((await fetch(`${url}/healthz`)).ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error('operator did not become healthy in time');
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return {
    url,
    adminToken,
    child,
    cpuMs: () => processCpuMs(child.pid),
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
        child.once('exit', () => {
          clearTimeout(timer);
          resolve();
        });
        child.kill('SIGTERM');
      }),
  };
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 1024 });

/** A minimal keep-alive JSON request (lighter than fetch, so the load generator costs less CPU). */
export function request(
  url: string,
  method: string,
  path: string,
  token: string | undefined,
  body?: string,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const target = new URL(path, url);
    const headers: Record<string, string | number> = {};
    if (token) headers.authorization = `Bearer ${token}`;
    if (body !== undefined) {
      headers['content-type'] = 'application/json';
      headers['content-length'] = Buffer.byteLength(body);
    }
    const req = http.request(
      { host: target.hostname, port: target.port, path: target.pathname + target.search, method, headers, agent },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}

/**
 * One keep-alive HTTP/1.1 connection that sends one request at a time: a wrk-style load generator.
 * The bench client shares the machine's cores with the operator and Postgres, so it must cost as
 * little CPU as it can: Node's `http` client spent ~190 µs of CPU per accept request here, this
 * one ~60 µs, which the operator and Postgres get instead. Responses must carry Content-Length
 * (every Roost JSON reply does); a chunked one is refused as a failure.
 */
export class HttpConnection {
  private socket: net.Socket | undefined;
  private buffered: Buffer = Buffer.alloc(0);
  private waiting:
    { resolve: (reply: { status: number; text: string }) => void; reject: (error: Error) => void } | undefined;
  private readonly host: string;
  private readonly port: number;

  constructor(url: string) {
    const target = new URL(url);
    this.host = target.hostname;
    this.port = Number(target.port);
  }

  async request(
    method: string,
    path: string,
    token: string | undefined,
    body?: string,
  ): Promise<{ status: number; text: string }> {
    if (this.waiting) throw new Error('one request at a time per connection');
    const socket = this.socket ?? (await this.connect());
    let head = `${method} ${path} HTTP/1.1\r\nhost: ${this.host}:${this.port}\r\n`;
    if (token) head += `authorization: Bearer ${token}\r\n`;
    if (body !== undefined) head += `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n`;
    return new Promise((resolve, reject) => {
      this.waiting = { resolve, reject };
      socket.write(`${head}\r\n${body ?? ''}`);
    });
  }

  close(): void {
    this.socket?.destroy();
  }

  private connect(): Promise<net.Socket> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(this.port, this.host, () => {
        socket.setNoDelay(true);
        socket.off('error', reject);
        socket.on('error', (error) => this.fail(error));
        resolve(socket);
      });
      socket.once('error', reject);
      socket.on('data', (chunk: Buffer) => this.read(chunk));
      socket.on('close', () => {
        if (this.socket === socket) this.socket = undefined;
        this.buffered = Buffer.alloc(0);
        this.fail(new Error('connection closed'));
      });
      this.socket = socket;
    });
  }

  private fail(error: Error): void {
    const waiting = this.waiting;
    this.waiting = undefined;
    waiting?.reject(error);
  }

  private read(chunk: Buffer): void {
    this.buffered = this.buffered.length === 0 ? chunk : Buffer.concat([this.buffered, chunk]);
    if (!this.waiting) return;
    const end = this.buffered.indexOf('\r\n\r\n');
    if (end < 0) return;
    const head = this.buffered.toString('latin1', 0, end);
    if (/\r\ntransfer-encoding:/i.test(head)) {
      this.socket?.destroy();
      return this.fail(new Error('chunked responses are not supported'));
    }
    const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
    if (this.buffered.length < end + 4 + length) return;
    const reply = {
      status: Number(head.slice(9, 12)),
      text: this.buffered.toString('utf8', end + 4, end + 4 + length),
    };
    this.buffered = this.buffered.subarray(end + 4 + length);
    const waiting = this.waiting;
    this.waiting = undefined;
    if (/\r\nconnection: *close/i.test(head)) this.socket?.destroy();
    waiting.resolve(reply);
  }
}

export async function createAgent(op: OperatorProcess, handle: string): Promise<string> {
  const reply = await request(
    op.url,
    'POST',
    '/_admin/agents',
    op.adminToken,
    JSON.stringify({ handle, policy: 'open' }),
  );
  if (reply.status !== 201) throw new Error(`create ${handle}: ${reply.status} ${reply.text}`);
  return (JSON.parse(reply.text) as { token: string }).token;
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index];
}

export const round = (value: number, digits = 2): number => Number(value.toFixed(digits));

/** Run `concurrency` loops of `task` for `durationMs`; returns per-operation latencies (ms). */
export async function loadLoop(
  concurrency: number,
  durationMs: number,
  task: (worker: number, i: number) => Promise<boolean>,
): Promise<{ latencies: number[]; failures: number; elapsedMs: number }> {
  const latencies: number[] = [];
  let failures = 0;
  const start = performance.now();
  const end = start + durationMs;
  await Promise.all(
    Array.from({ length: concurrency }, async (_, worker) => {
      for (let i = 0; performance.now() < end; i++) {
        const t0 = performance.now();
        const ok = await task(worker, i).catch(() => false);
        if (ok) latencies.push(performance.now() - t0);
        else failures++;
      }
    }),
  );
  return { latencies: latencies.sort((a, b) => a - b), failures, elapsedMs: performance.now() - start };
}

export function summary(result: { latencies: number[]; elapsedMs: number; failures: number }) {
  return {
    per_s: round(result.latencies.length / (result.elapsedMs / 1000), 1),
    p50_ms: round(percentile(result.latencies, 50)),
    p99_ms: round(percentile(result.latencies, 99)),
    ok: result.latencies.length,
    failed: result.failures,
  };
}

/** Latency samples with the time each operation started (ms since the loop began). */
export interface TimedSamples {
  starts: number[];
  latencies: number[];
  failedStarts: number[];
  elapsedMs: number;
  /** The samples of operations that started at or after `ms`, as `summary` takes them. */
  after(ms: number): { latencies: number[]; failures: number; elapsedMs: number };
}

/** `loadLoop` from the very first operation, keeping when each started (for per-second figures). */
export async function timedLoop(
  concurrency: number,
  durationMs: number,
  task: (worker: number, i: number) => Promise<boolean>,
): Promise<TimedSamples> {
  const starts: number[] = [];
  const latencies: number[] = [];
  const failedStarts: number[] = [];
  const start = performance.now();
  const end = start + durationMs;
  await Promise.all(
    Array.from({ length: concurrency }, async (_, worker) => {
      for (let i = 0; performance.now() < end; i++) {
        const t0 = performance.now();
        const ok = await task(worker, i).catch(() => false);
        if (ok) {
          starts.push(t0 - start);
          latencies.push(performance.now() - t0);
        } else failedStarts.push(t0 - start);
      }
    }),
  );
  const elapsedMs = performance.now() - start;
  return {
    starts,
    latencies,
    failedStarts,
    elapsedMs,
    after: (ms) => ({
      latencies: latencies.filter((_, i) => starts[i] >= ms).sort((a, b) => a - b),
      failures: failedStarts.filter((t) => t >= ms).length,
      elapsedMs: elapsedMs - ms,
    }),
  };
}

/** Per-second count, p50, p99 and max of the first `count` seconds of a run. */
export function firstSeconds(samples: { starts: number[]; latencies: number[] }, count: number) {
  return Array.from({ length: count }, (_, s) => {
    const inSecond = samples.latencies
      .filter((_, i) => samples.starts[i] >= s * 1000 && samples.starts[i] < (s + 1) * 1000)
      .sort((a, b) => a - b);
    return {
      second: s + 1,
      n: inSecond.length,
      p50_ms: round(percentile(inSecond, 50)),
      p99_ms: round(percentile(inSecond, 99)),
      max_ms: round(inSecond.at(-1) ?? NaN),
    };
  });
}

/**
 * The CLI as `npm install -g @roost/cli` gets it: apps/cli's esbuild bundle (built now), its
 * `require("@roost/client")` answered by the SDK package built from libs/client, found through
 * NODE_PATH. Returns the bundle's path and the environment to run it with.
 */
export function standaloneCli(scratch: string): { main: string; env: Record<string, string> } {
  const root = join(__dirname, '..', '..');
  execFileSync(process.execPath, [join(root, 'apps', 'cli', 'build.mjs')], { stdio: 'inherit' });
  execFileSync(
    process.execPath,
    [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(root, 'libs', 'client', 'tsconfig.json')],
    { stdio: 'inherit' },
  );
  const modules = join(scratch, 'standalone', 'node_modules');
  mkdirSync(join(modules, '@roost'), { recursive: true });
  symlinkSync(join(root, 'libs', 'client'), join(modules, '@roost', 'client'));
  return { main: join(root, 'apps', 'cli', 'dist', 'main.js'), env: { NODE_PATH: modules } };
}
