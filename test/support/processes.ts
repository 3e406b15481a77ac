import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ulid } from '#domain';
import { testRedisUrl } from './services';
import { freePort } from '../../bench/free-port';

/**
 * Child processes for the e2e tier: spawn a built entry point with an explicit environment, wait
 * until it answers its health route, stop it with SIGTERM then SIGKILL. Every child still running
 * when the test process exits is SIGKILLed, so a failing test cannot leak operators.
 */

/** The operator entry point `npm run build` produces. */
export const ROOST_MAIN = resolve(__dirname, '../../dist/apps/roost/src/main.js');

const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

export { freePort };

export interface ProcessOptions {
  /** Shown in errors. */
  name?: string;
  /** The script node runs; defaults to the operator (`dist/apps/roost/src/main.js`). */
  script?: string;
  args?: string[];
  /**
   * The child's whole configuration. Nothing else is inherited but PATH and HOME, so the test
   * runner's DATABASE_URL, REDIS_URL or NODE_OPTIONS never leak into a child by accident.
   */
  env: Record<string, string>;
  /** Listening port; a free one when omitted. Passed to the child as PORT. */
  port?: number;
  /** Polled until it answers 200 (default `/healthz`). */
  healthPath?: string;
  startTimeoutMs?: number;
  /** Lines of stdout/stderr kept for failure messages (default 100). */
  keepLines?: number;
  /** Keep every stdout line, whole, in `stdout` (for tests that read the logs). */
  recordStdout?: boolean;
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** One spawned process listening on loopback. */
export class TestProcess {
  readonly name: string;
  readonly port: number;
  readonly url: string;
  /** The last lines the child wrote to stdout and stderr. */
  readonly output: string[] = [];
  /** Every stdout line, when `recordStdout` is set (across restarts). */
  readonly stdout: string[] = [];
  private child: ChildProcess | undefined;
  private exit: Promise<Exit> = Promise.resolve({ code: null, signal: null });

  private constructor(
    private readonly options: ProcessOptions,
    port: number,
  ) {
    this.port = port;
    this.url = `http://127.0.0.1:${port}`;
    this.name = options.name ?? `process:${port}`;
  }

  /** Spawn and wait until healthy; on failure the child is killed and the error carries its output. */
  static async start(options: ProcessOptions): Promise<TestProcess> {
    const started = new TestProcess(options, options.port ?? (await freePort()));
    await started.start();
    return started;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** (Re)start on the same port and wait for health. */
  async start(): Promise<void> {
    if (this.running) throw new Error(`${this.name} is already running`);
    const { script = ROOST_MAIN, args = [], env } = this.options;
    const child = spawn(process.execPath, [script, ...args], {
      // No metrics listener unless a test asks for one (ROOST_METRICS_PORT): its default port would collide.
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '',
        ROOST_METRICS_PORT: '0',
        ...env,
        PORT: String(this.port),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    live.add(child);
    // 'close', not 'exit': by then stdout and stderr are read to the end.
    this.exit = new Promise((done) =>
      child.once('close', (code, signal) => {
        live.delete(child);
        done({ code, signal });
      }),
    );
    // Reading both pipes also keeps a chatty child from blocking on a full pipe. Lines are split
    // on newlines across chunks (a chunk may end mid-line, or mid-character).
    const keep = this.options.keepLines ?? 100;
    const collect = (stream: NodeJS.ReadableStream, also?: string[]) => {
      let partial = '';
      const add = (line: string) => {
        if (line === '') return;
        this.output.push(line);
        if (this.output.length > keep) this.output.splice(0, this.output.length - keep);
        also?.push(line);
      };
      stream.setEncoding('utf8');
      stream.on('data', (chunk: string) => {
        const lines = (partial + chunk).split('\n');
        partial = lines.pop()!;
        for (const line of lines) add(line);
      });
      stream.on('end', () => add(partial));
    };
    collect(child.stdout, this.options.recordStdout ? this.stdout : undefined);
    collect(child.stderr);
    child.once('error', (error) => this.output.push(`spawn error: ${error.message}`));
    try {
      await this.waitHealthy(this.options.startTimeoutMs ?? 30_000);
    } catch (error) {
      await this.kill();
      throw error;
    }
  }

  /** Poll the health route until 200; fails at once if the child exits. */
  async waitHealthy(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    const health = `${this.url}${this.options.healthPath ?? '/healthz'}`;
    for (;;) {
      if (!this.running) throw new Error(`${this.name} exited during start-up:\n${this.output.join('\n')}`);
      try {
        const response = await fetch(health, { signal: AbortSignal.timeout(2_000) });
        await response.arrayBuffer();
        if (response.status === 200) return;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline)
        throw new Error(`${this.name} not healthy after ${timeoutMs} ms:\n${this.output.join('\n')}`);
      await sleep(100);
    }
  }

  /** SIGTERM (graceful drain), then SIGKILL once `graceMs` has passed. Resolves when it has exited. */
  async stop(graceMs = 5_000): Promise<Exit> {
    const child = this.child;
    if (!child || !this.running) return this.exit;
    child.kill('SIGCONT'); // a stopped (SIGSTOP) process would never handle SIGTERM
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    try {
      return await this.exit;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Send `signal` (default SIGKILL: no drain) and wait for the exit. */
  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<Exit> {
    if (this.running) this.child!.kill(signal);
    return this.exit;
  }
}

/** Start several processes at once; if any fails to start, the others are stopped too. */
export async function startAll(options: ProcessOptions[]): Promise<TestProcess[]> {
  const results = await Promise.allSettled(options.map((o) => TestProcess.start(o)));
  const started = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) {
    await stopAll(started);
    throw failed.reason;
  }
  return started;
}

/** Stop every process (SIGTERM, then SIGKILL after `graceMs`), in parallel. */
export async function stopAll(processes: Iterable<TestProcess | undefined>, graceMs = 5_000): Promise<void> {
  await Promise.all([...processes].flatMap((p) => (p ? [p.stop(graceMs)] : [])));
}

/** True while a process with this pid exists (signal 0 only checks). */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * What every e2e operator process of one test shares: its database, the shared Redis under a
 * prefix of its own, quiet logs, loopback, no request rate limit. `extra` adds or overrides.
 */
export function operatorEnv(
  databaseUrl: string,
  adminToken: string,
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    DATABASE_URL: databaseUrl,
    REDIS_URL: testRedisUrl(),
    ROOST_REDIS_PREFIX: `roost-e2e:${ulid()}:`,
    ROOST_ADMIN_TOKEN: adminToken,
    ROOST_LOG_LEVEL: 'warn',
    ROOST_HOST: '127.0.0.1',
    ROOST_RATE_LIMIT_PER_S: '0',
    ...extra,
  };
}

/** A `/readyz` answer: status 0 and no body when the node did not answer. */
export interface Ready {
  status: number;
  body: { ok?: boolean; checks?: { postgres?: unknown; redis?: unknown } } | undefined;
}

/** One `/healthz` probe, bounded like the chart's liveness probe (3 s timeout): its status, 0 when the node did not answer. */
export async function healthz(node: TestProcess): Promise<number> {
  try {
    const response = await fetch(`${node.url}/healthz`, { signal: AbortSignal.timeout(3_000) });
    await response.arrayBuffer();
    return response.status;
  } catch {
    return 0;
  }
}

/** One `/readyz` probe, bounded like the chart's probe (3 s timeout). */
export async function readyz(node: TestProcess): Promise<Ready> {
  try {
    const response = await fetch(`${node.url}/readyz`, { signal: AbortSignal.timeout(3_000) });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : undefined };
  } catch {
    return { status: 0, body: undefined };
  }
}
