import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import Redis from 'ioredis';
import { ulid, type Cursor } from '#domain';
import { TestClient } from '../support/client';
import { createTestDatabase } from '../support/database';
import { testRedisUrl } from '../support/services';
import { connect, type Listener } from '../support/ws';
import { freePort } from '../../bench/free-port';

/**
 * E2E helpers: real `node dist/apps/roost/src/main.js` processes on loopback (built by `npm run
 * build`), one fresh Postgres database and one Redis key prefix per cluster, and a private
 * `redis-server` for tests that restart Redis. Every child is killed on close, and on exit as a net.
 */

const MAIN = resolve(__dirname, '../../dist/apps/roost/src/main.js');
const REDIS_SERVER = '/usr/bin/redis-server';

const children = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

function track(child: ChildProcess): Promise<void> {
  children.add(child);
  return new Promise((resolve) =>
    child.once('exit', () => {
      children.delete(child);
      resolve();
    }),
  );
}

export { freePort };

/** Keeps the last lines a child wrote, for failure messages. */
function tail(lines: string[], max = 60): (chunk: Buffer) => void {
  return (chunk) => {
    lines.push(
      ...chunk
        .toString()
        .split('\n')
        .filter((line) => line !== ''),
    );
    if (lines.length > max) lines.splice(0, lines.length - max);
  };
}

export type Role = 'api' | 'gateway' | 'worker';

/** One Roost process of one role; it keeps its port across kill and restart. */
export class RoostProcess {
  readonly url: string;
  readonly output: string[] = [];
  private child: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();

  constructor(
    readonly name: string,
    readonly role: Role,
    readonly port: number,
    private readonly env: Record<string, string>,
  ) {
    this.url = `http://127.0.0.1:${port}`;
  }

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  async start(timeoutMs = 30_000): Promise<void> {
    if (this.running) throw new Error(`${this.name} is already running`);
    const child = spawn(process.execPath, [MAIN], {
      env: {
        PATH: process.env.PATH ?? '',
        ROOST_METRICS_PORT: '0',
        ...this.env,
        ROOST_ROLE: this.role,
        PORT: String(this.port),
        ROOST_HOST: '127.0.0.1',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    this.exited = track(child);
    child.stdout.on('data', tail(this.output));
    child.stderr.on('data', tail(this.output));
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (!this.running) throw new Error(`${this.name} exited during start-up:\n${this.output.join('\n')}`);
      try {
        if ((await fetch(`${this.url}/healthz`)).status === 200) return;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) {
        await this.kill9();
        throw new Error(`${this.name} not healthy after ${timeoutMs} ms:\n${this.output.join('\n')}`);
      }
      await sleep(100);
    }
  }

  /** SIGKILL: no drain, no close frames; the kernel resets its sockets. */
  async kill9(): Promise<void> {
    if (this.running) this.child!.kill('SIGKILL');
    await this.exited;
  }

  /** SIGSTOP / SIGCONT: a frozen process (GC pause, starved CPU) that keeps its sockets open. */
  pause(): void {
    if (this.running) this.child!.kill('SIGSTOP');
  }

  resume(): void {
    if (this.running) this.child!.kill('SIGCONT');
  }

  /** SIGTERM (graceful drain), then SIGKILL after `graceMs`. */
  async stop(graceMs = 5_000): Promise<void> {
    if (!this.running) return this.exited;
    this.child!.kill('SIGCONT'); // a paused process would never handle SIGTERM
    this.child!.kill('SIGTERM');
    const timer = setTimeout(() => this.child?.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }

  async restart(): Promise<void> {
    await this.kill9();
    await this.start();
  }
}

/** A private `redis-server` (no persistence) that tests may kill and restart on the same port. */
export class RedisServer {
  readonly url: string;
  readonly output: string[] = [];
  private child: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();

  private constructor(readonly port: number) {
    this.url = `redis://127.0.0.1:${port}`;
  }

  static async start(): Promise<RedisServer> {
    return RedisServer.startOn(await freePort());
  }

  /** On a given port (a test that points a process at it before it runs). */
  static async startOn(port: number): Promise<RedisServer> {
    const server = new RedisServer(port);
    await server.start();
    return server;
  }

  async start(timeoutMs = 10_000): Promise<void> {
    const child = spawn(
      REDIS_SERVER,
      ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    this.child = child;
    this.exited = track(child);
    child.stdout.on('data', tail(this.output));
    child.stderr.on('data', tail(this.output));
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const redis = new Redis(this.url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
      redis.on('error', () => undefined);
      try {
        await redis.connect();
        if ((await redis.ping()) === 'PONG') return;
      } catch {
        // not up yet
      } finally {
        redis.disconnect();
      }
      if (Date.now() > deadline || child.exitCode !== null) {
        throw new Error(`redis-server on ${this.port} did not start:\n${this.output.join('\n')}`);
      }
      await sleep(50);
    }
  }

  /**
   * SIGSTOP: a Redis that stops answering but keeps its connections open (a host frozen, a fork
   * stalled, a partition without resets); every command waits. `resume` (SIGCONT) lets it go on.
   */
  pause(): void {
    if (this.child && this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGSTOP');
  }

  resume(): void {
    if (this.child && this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGCONT');
  }

  async kill(): Promise<void> {
    if (this.child && this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
    await this.exited;
  }

  /** Kill, stay down for `downMs`, start an empty server on the same port. */
  async restart(downMs = 1_000): Promise<void> {
    await this.kill();
    await sleep(downMs);
    await this.start();
  }
}

export interface ClusterOptions {
  api?: number;
  gateway?: number;
  /** Worker processes (schedules, retention); none by default. */
  worker?: number;
  /** Defaults to the test Redis (ROOST_TEST_REDIS_URL), namespaced by a fresh prefix. */
  redisUrl?: string;
  env?: Record<string, string>;
}

export interface TestAgent {
  handle: string;
  token: string;
}

/** N api + M gateway (+ K worker) processes on one fresh database and one Redis prefix. */
export class Cluster {
  readonly clients: TestClient[];
  private constructor(
    readonly apis: RoostProcess[],
    readonly gateways: RoostProcess[],
    readonly adminToken: string,
    readonly redisUrl: string,
    readonly prefix: string,
    private readonly dropDatabase: () => Promise<void>,
    readonly workers: RoostProcess[] = [],
  ) {
    this.clients = apis.map((api) => new TestClient(api.url));
  }

  static async start(options: ClusterOptions = {}): Promise<Cluster> {
    const database = await createTestDatabase('roost_e2e');
    const redisUrl = options.redisUrl ?? testRedisUrl();
    const prefix = `roost-e2e:${ulid()}:`;
    const adminToken = `admin-${ulid()}`;
    const env = {
      DATABASE_URL: database.url,
      REDIS_URL: redisUrl,
      ROOST_REDIS_PREFIX: prefix,
      ROOST_ADMIN_TOKEN: adminToken,
      ROOST_LOG_LEVEL: 'warn',
      ...options.env,
    };
    const make = async (role: Role, i: number) => new RoostProcess(`${role}-${i}`, role, await freePort(), env);
    const apis = await Promise.all(Array.from({ length: options.api ?? 2 }, (_, i) => make('api', i)));
    const gateways = await Promise.all(Array.from({ length: options.gateway ?? 2 }, (_, i) => make('gateway', i)));
    const workers = await Promise.all(Array.from({ length: options.worker ?? 0 }, (_, i) => make('worker', i)));
    const cluster = new Cluster(apis, gateways, adminToken, redisUrl, prefix, database.drop, workers);
    try {
      await Promise.all([...apis, ...gateways, ...workers].map((node) => node.start()));
    } catch (error) {
      await cluster.close();
      throw error;
    }
    return cluster;
  }

  get nodes(): RoostProcess[] {
    return [...this.apis, ...this.gateways, ...this.workers];
  }

  /** Register an open-policy agent (through the first api node) and return its token. */
  async agent(handle: string): Promise<TestAgent> {
    const reply = await this.clients[0].post('/_admin/agents', { handle, policy: 'open' }, this.adminToken);
    if (reply.status !== 201) throw new Error(`creating ${handle}: ${reply.status} ${reply.text}`);
    return { handle, token: reply.body.token as string };
  }

  /** The Redis keys of this cluster's frame streams. */
  async frameStreams(redis: Redis): Promise<string[]> {
    return redis.keys(`${this.prefix}frames:*`);
  }

  async close(): Promise<void> {
    await Promise.all(this.nodes.map((node) => node.stop(3_000)));
    await this.dropDatabase().catch(() => undefined);
    const redis = new Redis(this.redisUrl, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    redis.on('error', () => undefined);
    try {
      await redis.connect();
      const keys = await redis.keys(`${this.prefix}*`);
      if (keys.length > 0) await redis.del(...keys);
    } catch {
      // a private redis-server may already be gone
    } finally {
      redis.disconnect();
    }
  }
}

/** A POST /messages body with a fresh id. */
export function envelopeTo(to: string, n: number): Record<string, unknown> {
  return {
    id: ulid(),
    to: [to],
    date_ms: Date.now(),
    subject: `e2e ${n}`,
    content_parts: [{ type: 'text', text: `message ${n}` }],
  };
}

export interface Accepted {
  id: string;
  /** Index of the api node that answered 202. */
  api: number;
  /** Wall clock when the 202 arrived. */
  at: number;
}

export interface SendReport {
  accepted: Accepted[];
  /** Non-202 answers and transport errors, by status (0 = no answer). */
  refused: Map<number, number>;
}

function note(report: SendReport, status: number): void {
  report.refused.set(status, (report.refused.get(status) ?? 0) + 1);
}

async function sendOne(
  cluster: Cluster,
  n: number,
  senders: TestAgent[],
  to: string,
  report: SendReport,
): Promise<void> {
  const api = n % cluster.clients.length;
  const sender = senders[n % senders.length];
  try {
    const reply = await cluster.clients[api].post('/messages', envelopeTo(to, n), sender.token);
    if (reply.status === 202) report.accepted.push({ id: reply.body.id as string, api, at: Date.now() });
    else note(report, reply.status);
  } catch {
    note(report, 0);
  }
}

/** `count` envelopes to `to`, round-robin over api nodes and senders, `concurrency` in flight. */
export async function sendBurst(
  cluster: Cluster,
  senders: TestAgent[],
  to: string,
  count: number,
  concurrency: number,
): Promise<SendReport> {
  const report: SendReport = { accepted: [], refused: new Map() };
  let next = 0;
  const worker = async () => {
    while (next < count) await sendOne(cluster, next++, senders, to, report);
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return report;
}

/** A steady `ratePerS` of sends for `durationMs`, round-robin over api nodes and senders. */
export async function sendSteady(
  cluster: Cluster,
  senders: TestAgent[],
  to: string,
  ratePerS: number,
  durationMs: number,
): Promise<SendReport> {
  const report: SendReport = { accepted: [], refused: new Map() };
  const inFlight: Promise<void>[] = [];
  const start = Date.now();
  const total = Math.round((ratePerS * durationMs) / 1000);
  for (let n = 0; n < total; n++) {
    const due = start + (n * 1000) / ratePerS;
    if (due > Date.now()) await sleep(due - Date.now());
    inFlight.push(sendOne(cluster, n, senders, to, report));
  }
  await Promise.all(inFlight);
  return report;
}

/** Every `in` header of an agent, oldest first, via `GET /mailbox` pages (optionally after a cursor). */
export async function mailboxHeaders(client: TestClient, token: string, after?: Cursor): Promise<any[]> {
  const headers: any[] = [];
  let cursor: Cursor | null = after ?? null;
  for (;;) {
    const query = cursor ? `&after_created_at=${cursor.created_at}&after_envelope_id=${cursor.envelope_id}` : '';
    const reply = await client.get(`/mailbox?order=asc&limit=1000${query}`, token);
    if (reply.status !== 200) throw new Error(`GET /mailbox: ${reply.status} ${reply.text}`);
    headers.push(...reply.body.envelope_headers);
    cursor = reply.body.next_cursor;
    if (cursor === null) return headers;
  }
}

const before = (a: Cursor, b: Cursor) =>
  a.created_at < b.created_at || (a.created_at === b.created_at && a.envelope_id < b.envelope_id);

/** The cursor that precedes every envelope (a valid id, smaller than any real one). */
export const ORIGIN: Cursor = { created_at: 0, envelope_id: `01${'0'.repeat(24)}` };

/**
 * A client that always connects with the resume parameters and, whenever its socket closes,
 * reconnects to the next gateway with the last `(created_at, envelope_id)` it saw (EXTENSIONS.md §1),
 * like an SDK listener. It counts every `envelope.notify` so tests can find gaps and duplicates.
 */
export class ResumingClient {
  readonly counts = new Map<string, number>();
  /** When each id was first seen (wall clock). */
  readonly firstSeen = new Map<string, number>();
  cursor: Cursor;
  connections = 0;
  replayCompletes = 0;
  /** Frames at or before the cursor at the moment they arrived (an ordering fault). */
  outOfOrder = 0;
  listener: Listener | undefined;
  gatewayIndex: number;
  private stopped = false;
  private reconnecting: Promise<void> | undefined;

  constructor(
    private readonly gatewayUrls: () => string[],
    private readonly token: string,
    options: { cursor?: Cursor; gateway?: number } = {},
  ) {
    this.cursor = options.cursor ?? ORIGIN;
    this.gatewayIndex = options.gateway ?? 0;
  }

  get duplicates(): number {
    let extra = 0;
    for (const count of this.counts.values()) extra += count - 1;
    return extra;
  }

  async start(): Promise<void> {
    await this.open(this.gatewayIndex, 10_000);
  }

  /** Stop reconnecting and close the socket. */
  stop(): void {
    this.stopped = true;
    this.listener?.close();
  }

  /** Resolves when every id was seen, else rejects with what is missing. */
  async waitFor(ids: Iterable<string>, timeoutMs: number): Promise<void> {
    const wanted = [...ids];
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const missing = wanted.filter((id) => !this.counts.has(id));
      if (missing.length === 0) return;
      if (Date.now() > deadline)
        throw new Error(
          `${missing.length} of ${wanted.length} envelopes never arrived, e.g. ${missing.slice(0, 3).join(', ')}`,
        );
      await sleep(100);
    }
  }

  private async open(index: number, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (let attempt = 0; !this.stopped; attempt++) {
      const urls = this.gatewayUrls();
      const i = (index + attempt) % urls.length;
      try {
        const listener = await connect(urls[i], {
          token: this.token,
          query: { after_created_at: String(this.cursor.created_at), after_envelope_id: this.cursor.envelope_id },
        });
        if (this.stopped) {
          listener.close();
          return;
        }
        this.attach(listener);
        this.gatewayIndex = i;
        this.connections++;
        return;
      } catch (error) {
        if (Date.now() > deadline) throw error;
        await sleep(100);
      }
    }
  }

  private attach(listener: Listener): void {
    this.listener = listener;
    const see = (frame: { op?: string; id?: string; created_at?: number }) => {
      if (frame.op === 'replay.complete') this.replayCompletes++;
      if (frame.op !== 'envelope.notify') return;
      const position = { created_at: frame.created_at as number, envelope_id: frame.id as string };
      if (!before(this.cursor, position)) this.outOfOrder++;
      else this.cursor = position;
      this.counts.set(frame.id as string, (this.counts.get(frame.id as string) ?? 0) + 1);
      if (!this.firstSeen.has(frame.id as string)) this.firstSeen.set(frame.id as string, Date.now());
    };
    // Frames can arrive with the upgrade response, before `connect` resolves: the Listener kept them.
    for (const frame of listener.frames) see(frame);
    listener.ws.on('message', (data) => see(JSON.parse((data as Buffer).toString())));
    listener.ws.on('close', () => {
      if (this.stopped || this.listener !== listener) return;
      // Reconnect to the next gateway at once (the one that closed may be dead).
      this.reconnecting = this.open(this.gatewayIndex + 1, 60_000).catch(() => undefined);
    });
  }

  /** Wait for a reconnect in progress, if any. */
  async settled(): Promise<void> {
    await this.reconnecting;
  }
}

/** Check on what a client saw against what the api nodes acknowledged. */
export function tally(accepted: readonly Accepted[], client: ResumingClient) {
  const sent = new Set(accepted.map((a) => a.id));
  let missing = 0;
  for (const id of sent) if (!client.counts.has(id)) missing++;
  let unexpected = 0;
  for (const id of client.counts.keys()) if (!sent.has(id)) unexpected++;
  return {
    sent: sent.size,
    seen: client.counts.size,
    missing,
    duplicated: client.duplicates,
    unexpected,
    outOfOrder: client.outOfOrder,
  };
}
