import { resolve } from 'node:path';
import { freePort } from '../../test/e2e/cluster';
import { TestProcess, type ProcessOptions } from '../../test/support/processes';
import { log, request, sleep } from './util';

/** `dist/apps/roost/src/main.js` of this checkout, found from `dist/chaos/src`. */
export const ROOST_MAIN = resolve(__dirname, '../../apps/roost/src/main.js');

export type Role = 'api' | 'gateway' | 'worker';

export interface Crash {
  at: number;
  node: string;
  code: number | null;
  signal: string | null;
  /** The node's last output lines. */
  tail: string[];
}

/**
 * One Roost process of one role on a fixed port, supervised like an orchestrator would: the fault
 * script takes it down on purpose (`kill9`, then `start`); any other exit is a crash, recorded and
 * restarted. A start that fails (e.g. Postgres down, so migrations cannot run) is retried with a
 * back-off, as a restarting pod would be.
 */
export class Node {
  private proc: TestProcess | undefined;
  private readonly options: ProcessOptions;
  /** Killed by the fault script and not yet restarted. */
  private planned = false;
  private starting: Promise<void> | undefined;
  private watcher: NodeJS.Timeout | undefined;
  private up = false;
  private stopped = false;
  readonly crashes: Crash[] = [];
  startFailures = 0;

  constructor(
    readonly name: string,
    readonly role: Role,
    readonly port: number,
    env: Record<string, string>,
    keepLines: number,
    script: string,
  ) {
    this.options = {
      name,
      script,
      env: { ROOST_METRICS_PORT: '0', ...env, ROOST_ROLE: role, ROOST_HOST: '127.0.0.1' },
      port,
      // Six processes starting at once on a busy 2-core machine: at load 30 a start took over 60 s,
      // and a start cut at 60 s began again from nothing (both apis never came back in one run).
      startTimeoutMs: 180_000,
      keepLines,
    };
  }

  static async create(
    name: string,
    role: Role,
    env: Record<string, string>,
    script = ROOST_MAIN,
    keepLines = 300,
  ): Promise<Node> {
    return new Node(name, role, await freePort(), env, keepLines, script);
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get running(): boolean {
    return this.proc?.running ?? false;
  }

  /** Running, started and answering its health check (not still starting): a ready pod. */
  get healthy(): boolean {
    return this.up && this.running && this.starting === undefined;
  }

  get output(): string[] {
    return this.proc?.output ?? [];
  }

  /** Start (retrying until healthy) and keep watching for crashes. */
  async start(): Promise<void> {
    this.planned = false;
    await this.ensureStarted();
    this.watcher ??= setInterval(() => this.watch(), 250);
  }

  private ensureStarted(): Promise<void> {
    this.starting ??= (async () => {
      for (let attempt = 0; !this.stopped; attempt++) {
        try {
          if (this.proc) await this.proc.start();
          else this.proc = await TestProcess.start(this.options);
          this.up = true;
          return;
        } catch (error) {
          this.startFailures++;
          if (attempt % 5 === 0)
            log(`${this.name}: start failed (${(error as Error).message.split('\n')[0]}); retrying`);
          await sleep(Math.min(500 * (attempt + 1), 3_000));
        }
      }
    })().finally(() => (this.starting = undefined));
    return this.starting;
  }

  private watch(): void {
    if (this.stopped || this.planned || this.starting || !this.up || this.running) return;
    this.up = false;
    const proc = this.proc!;
    // kill() of a process that already exited just returns how it exited.
    void proc.kill().then(({ code, signal }) => {
      const crash: Crash = { at: Date.now(), node: this.name, code, signal, tail: proc.output.slice(-40) };
      this.crashes.push(crash);
      log(
        `${this.name}: CRASHED (code ${code}, signal ${signal}); restarting. Last output:\n    ${crash.tail.slice(-40).join('\n    ')}`,
      );
    });
    void this.ensureStarted();
  }

  /** kill -9 (a fault): no drain, no close frames, sockets reset by the kernel. */
  async kill9(): Promise<void> {
    this.planned = true;
    await this.starting?.catch(() => undefined);
    this.up = false;
    await this.proc?.kill('SIGKILL');
  }

  /**
   * SIGTERM (a fault under load: a rolling update or a node drain): the process must drain by
   * itself; SIGKILL only after `graceMs`. Resolves with how it exited and how long the drain took.
   */
  async sigterm(graceMs: number): Promise<{ code: number | null; signal: string | null; ms: number }> {
    this.planned = true;
    await this.starting?.catch(() => undefined);
    this.up = false;
    const started = Date.now();
    const exit = (await this.proc?.stop(graceMs)) ?? { code: null, signal: null };
    return { code: exit.code, signal: exit.signal, ms: Date.now() - started };
  }

  async ready(): Promise<boolean> {
    if (!this.running) return false;
    try {
      return (await request('GET', `${this.url}/readyz`, { timeoutMs: 3_000 })).status === 200;
    } catch {
      return false;
    }
  }

  /** Graceful stop at the end (SIGTERM, then SIGKILL). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.watcher);
    await this.starting?.catch(() => undefined);
    await this.proc?.stop(5_000);
  }
}
