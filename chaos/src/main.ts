import { chmodSync, cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { ulid } from '#domain';
import { RedisServer } from '../../test/e2e/cluster';
import { check, mailboxes, table, type Report, type ScheduleInfo } from './checker';
import { FAULT_KINDS, FaultScript, type FaultKind } from './faults';
import { ChaosListener } from './listener';
import { LoadGenerator, type Agent, type Send } from './load';
import { Node, ROOST_MAIN } from './nodes';
import { PrivatePostgres } from './postgres';
import { ProxyProcess } from './proxy-process';
import { log, Random, request, sleep } from './util';

/**
 * `npm run chaos`: the DESIGN.md invariants 1, 2, 5 and 6 under faults. A private Postgres and
 * Redis on loopback, 2 api + 2 gateway + 2 worker processes, a steady load from several senders
 * to several recipients with a resuming listener each, schedules firing every simulated minute,
 * and a fault script that at random moments kill -9s or SIGTERMs processes, takes a whole role
 * down, restarts Redis and Postgres, locks a mailbox row, and slows, partitions or cuts the network
 * to Postgres and Redis (every Roost connection to them goes through a loopback TCP proxy in its own process, proxy.ts).
 * After the faults stop and the system settles, a checker proves what must hold and prints a
 * table (and writes it as JSON with `--json <file>`). Exit 0 only when every invariant held.
 *
 * Settings (env): ROOST_CHAOS_SECONDS (load phase, default 600), ROOST_CHAOS_RATE (envelopes/s,
 * default 40), ROOST_CHAOS_FAULT_INTERVAL_S (mean pause between faults, default 12),
 * ROOST_CHAOS_SEED, ROOST_CHAOS_FAULTS (comma-separated kinds to inject, default all),
 * ROOST_CHAOS_KEEP=1 (keep the temp folder), ROOST_CHAOS_LOG_DIR (write each process's last log
 * lines there at the end), ROOST_CHAOS_SNAPSHOT=0 (run dist/ in place instead of a private copy),
 * ROOST_CHAOS_TAMPER=1 (delete one mailbox entry before checking: the run must fail).
 */

const SPEED = 60; // one simulated minute per real second
const INTERVAL_MS = 60_000;
const LEASE_MS = 120_000; // 2 real seconds: a dead worker's lease expires quickly
const SHUTDOWN_TIMEOUT_MS = 3_000;

interface Settings {
  seconds: number;
  rate: number;
  faultIntervalMs: number;
  seed: number;
  json: string | undefined;
  keep: boolean;
  kinds: FaultKind[];
  logDir: string | undefined;
  snapshot: boolean;
  tamper: boolean;
}

function settings(): Settings {
  const number = (name: string, fallback: number) => {
    const raw = process.env[name];
    if (raw === undefined || raw === '') return fallback;
    const value = Number(raw);
    if (!Number.isFinite(value) || value <= 0) throw new Error(`${name}: expected a positive number, got "${raw}"`);
    return value;
  };
  const args = process.argv.slice(2);
  let json: string | undefined;
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--json') json = args[++i];
    else if (args[i].startsWith('--json=')) json = args[i].slice('--json='.length);
    else throw new Error(`unknown argument ${args[i]} (usage: chaos [--json <file>])`);
  }
  return {
    seconds: number('ROOST_CHAOS_SECONDS', 600),
    rate: number('ROOST_CHAOS_RATE', 40),
    faultIntervalMs: number('ROOST_CHAOS_FAULT_INTERVAL_S', 12) * 1000,
    seed: Math.floor(number('ROOST_CHAOS_SEED', Math.floor(Math.random() * 2 ** 31) + 1)),
    json,
    keep: process.env.ROOST_CHAOS_KEEP === '1',
    kinds: faultKinds(process.env.ROOST_CHAOS_FAULTS),
    logDir: process.env.ROOST_CHAOS_LOG_DIR || undefined,
    snapshot: process.env.ROOST_CHAOS_SNAPSHOT !== '0',
    tamper: process.env.ROOST_CHAOS_TAMPER === '1',
  };
}

function faultKinds(raw: string | undefined): FaultKind[] {
  if (raw === undefined || raw.trim() === '') return [...FAULT_KINDS];
  const kinds = raw.split(',').map((kind) => kind.trim());
  for (const kind of kinds) {
    if (!(FAULT_KINDS as readonly string[]).includes(kind))
      throw new Error(`ROOST_CHAOS_FAULTS: unknown kind "${kind}" (${FAULT_KINDS.join(', ')})`);
  }
  return kinds as FaultKind[];
}

/** Everything started, so that cleanup can stop it whatever happened. */
interface World {
  root?: string;
  postgres?: PrivatePostgres;
  redis?: RedisServer;
  proxies: ProxyProcess[];
  nodes: Node[];
  listeners: ChaosListener[];
  db?: pg.Client;
}

/**
 * A private copy of the built operator (dist, migrations, wire schemas, package.json; node_modules
 * linked) taken at start: processes restarted during the run all run the same code, even if
 * someone rebuilds the checkout meanwhile. Returns the copy's entry point.
 */
function snapshot(root: string): string {
  const checkout = resolve(__dirname, '../../..');
  const app = join(root, 'app');
  for (const part of ['dist/apps', 'dist/libs', 'db/migrations', 'libs/schemas/wire', 'package.json']) {
    cpSync(join(checkout, part), join(app, part), { recursive: true });
  }
  symlinkSync(join(checkout, 'node_modules'), join(app, 'node_modules'), 'dir');
  return join(app, 'dist/apps/roost/src/main.js');
}

/** The last lines of every process (and Postgres), one file each, for a post-mortem. */
function saveLogs(world: World, dir: string): void {
  mkdirSync(dir, { recursive: true });
  for (const node of world.nodes) writeFileSync(join(dir, `${node.name}.log`), node.output.join('\n') + '\n');
  if (world.postgres) writeFileSync(join(dir, 'postgres.log'), world.postgres.output.join('\n') + '\n');
  log(`process logs in ${dir}`);
}

async function cleanup(world: World, keep: boolean): Promise<void> {
  await Promise.all(world.listeners.map((l) => l.stop().catch(() => undefined)));
  await world.db?.end().catch(() => undefined);
  await Promise.all(world.nodes.map((node) => node.stop().catch(() => undefined)));
  await Promise.all(world.proxies.map((proxy) => proxy.close().catch(() => undefined)));
  await world.redis?.kill().catch(() => undefined);
  await world.postgres?.stop().catch(() => undefined);
  if (world.root && !keep) rmSync(world.root, { recursive: true, force: true });
  else if (world.root) log(`kept ${world.root}`);
}

async function waitFor(what: string, timeoutMs: number, predicate: () => Promise<boolean>): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (await predicate()) return true;
    } catch {
      // not yet
    }
    if (Date.now() > deadline) {
      log(`gave up waiting for ${what} after ${timeoutMs} ms`);
      return false;
    }
    await sleep(250);
  }
}

async function run(s: Settings, world: World): Promise<Report> {
  const random = new Random(s.seed);
  const startedAt = Date.now();
  log(`seed ${s.seed}, ${s.seconds} s at ${s.rate} envelopes/s, a fault every ~${s.faultIntervalMs / 1000} s`);

  world.root = mkdtempSync(join(tmpdir(), 'roost-chaos-'));
  chmodSync(world.root, 0o755); // the server runs as the postgres user when we are root
  const main = s.snapshot ? snapshot(world.root) : ROOST_MAIN;
  world.postgres = await PrivatePostgres.create(world.root);
  await world.postgres.start();
  const admin = new pg.Client({ connectionString: world.postgres.url() });
  await admin.connect();
  await admin.query('create database roost');
  await admin.end();
  world.redis = await RedisServer.start();
  // Every Roost connection to Postgres and Redis goes through a proxy, so that latency, a partition
  // or a cut can be injected at any moment (none is active by default: bytes pass straight through).
  const postgresProxy = await ProxyProcess.start('postgres', world.postgres.port);
  const redisProxy = await ProxyProcess.start('redis', world.redis.port);
  world.proxies.push(postgresProxy, redisProxy);
  log(
    `postgres on ${world.postgres.port} (proxy ${postgresProxy.port}, ${world.root}), redis on ${world.redis.port} (proxy ${redisProxy.port})`,
  );

  const epoch = Date.now();
  const sim = (real: number) => Math.floor(epoch + (real - epoch) * SPEED);
  const adminToken = `chaos-admin-${ulid()}`;
  const env = {
    DATABASE_URL: `postgres://postgres@127.0.0.1:${postgresProxy.port}/roost`,
    REDIS_URL: `redis://127.0.0.1:${redisProxy.port}`,
    ROOST_REDIS_PREFIX: 'roost-chaos:',
    ROOST_ADMIN_TOKEN: adminToken,
    ROOST_LOG_LEVEL: 'warn',
    ROOST_RATE_LIMIT_PER_S: '0',
    ROOST_WS_SWEEP_INTERVAL_MS: '1000',
    ROOST_CLOCK_SPEED: String(SPEED),
    ROOST_CLOCK_EPOCH_MS: String(epoch),
    ROOST_SCHEDULE_MIN_INTERVAL_MS: String(INTERVAL_MS),
    ROOST_SCHEDULE_LEASE_MS: String(LEASE_MS),
    ROOST_SCHEDULE_TICK_MS: '200',
    ROOST_DB_POOL_SIZE: '10',
    ROOST_SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS),
    // A locked mailbox or a partitioned Postgres answers 503 after this, not after the 15 s default.
    ROOST_DB_STATEMENT_TIMEOUT_MS: '5000',
    ROOST_METRICS_PORT: '0',
  };
  const roles = ['api', 'api', 'gateway', 'gateway', 'worker', 'worker'] as const;
  const counters = new Map<string, number>();
  for (const role of roles) {
    const n = counters.get(role) ?? 0;
    counters.set(role, n + 1);
    world.nodes.push(await Node.create(`${role}-${n}`, role, env, main));
  }
  // The first process migrates; the others wait on the advisory lock.
  await Promise.all(world.nodes.map((node) => node.start()));
  const apis = world.nodes.filter((n) => n.role === 'api');
  const gateways = world.nodes.filter((n) => n.role === 'gateway');
  const apiUrls = () => apis.map((n) => n.url);
  if (
    !(await waitFor('readiness', 30_000, async () =>
      (await Promise.all(world.nodes.map((n) => n.ready()))).every(Boolean),
    ))
  ) {
    throw new Error('the cluster never became ready');
  }
  log(`cluster ready: ${world.nodes.map((n) => `${n.name}:${n.port}`).join(' ')}`);

  const agent = async (handle: string): Promise<Agent> => {
    const reply = await request('POST', `${apis[0].url}/_admin/agents`, {
      token: adminToken,
      body: { handle, policy: 'open' },
    });
    if (reply.status !== 201) throw new Error(`creating ${handle}: ${reply.status} ${JSON.stringify(reply.body)}`);
    return { handle, token: reply.body.token };
  };
  const senders = await Promise.all([1, 2, 3, 4].map((i) => agent(`@chaos.sender${i}`)));
  const recipients = await Promise.all([1, 2, 3, 4].map((i) => agent(`@chaos.inbox${i}`)));

  const loadMs = s.seconds * 1000;
  const tailMs = Math.min(20_000, Math.max(8_000, loadMs * 0.15));
  const loadStart = Date.now();
  const faultsEnd = loadStart + loadMs - tailMs;

  // One schedule per recipient, every simulated minute, ending a few seconds after the last fault
  // so that runs after every fault (a Redis restart included) are needed to complete it.
  const schedules: ScheduleInfo[] = [];
  for (const [i, to] of recipients.entries()) {
    const owner = senders[i % senders.length];
    const startAt = sim(Date.now()) + INTERVAL_MS;
    const endAt = sim(faultsEnd + 6_000);
    const reply = await request('POST', `${apis[i % 2].url}/schedules`, {
      token: owner.token,
      body: {
        envelope: {
          to: [to.handle],
          subject: `chaos schedule ${i}`,
          content_parts: [{ type: 'text', text: `scheduled run for ${to.handle}` }],
        },
        interval_ms: INTERVAL_MS,
        start_at: startAt,
        end_at: endAt,
      },
    });
    if (reply.status !== 201) throw new Error(`creating a schedule: ${reply.status} ${JSON.stringify(reply.body)}`);
    schedules.push({
      id: reply.body.id,
      owner: owner.handle,
      to: to.handle,
      startAt: reply.body.next_run_at,
      endAt,
      intervalMs: INTERVAL_MS,
    });
  }

  world.listeners = recipients.map(
    (r) => new ChaosListener(r.handle, r.token, () => gateways.map((g) => g.url), new Random(random.int(1, 2 ** 30))),
  );
  for (const listener of world.listeners) listener.start();
  await waitFor('listeners', 10_000, async () => world.listeners.every((l) => l.connected));

  // --- load and faults -------------------------------------------------------------------------
  const load = new LoadGenerator(apiUrls, senders, recipients, new Random(random.int(1, 2 ** 30)));
  const targets = {
    redis: world.redis,
    postgres: world.postgres,
    postgresProxy,
    redisProxy,
    databaseUrl: world.postgres.url('roost'),
    recipients: recipients.map((r) => r.handle),
    shutdownTimeoutMs: SHUTDOWN_TIMEOUT_MS,
  };
  const faults = new FaultScript(world.nodes, targets, new Random(random.int(1, 2 ** 30)), s.faultIntervalMs, s.kinds);
  const loading = load.run(s.rate);
  const progress = setInterval(() => {
    const accepted = load.sends.filter((send) => send.accepted).length;
    log(`progress: ${load.offered} offered, ${accepted} accepted, ${faults.faults.length} faults`);
  }, 30_000);
  await faults.run(faultsEnd);
  log('faults stopped');
  await sleep(Math.max(0, loadStart + loadMs - Date.now()));
  load.stop();
  await loading;
  clearInterval(progress);
  const loadSeconds = (load.stoppedAt - load.startedAt) / 1000;
  log(`load stopped after ${loadSeconds.toFixed(1)} s; waiting for retries`);
  await load.drain();

  // --- settle and recover ------------------------------------------------------------------------
  const allReady = () => Promise.all(world.nodes.map((n) => n.ready())).then((r) => r.every(Boolean));
  await waitFor('every process ready', 90_000, allReady);
  const burst: Send[] = await load.burst(100, 10);
  log(`final burst: ${burst.filter((b) => b.attempts[0]?.status === 202).length}/${burst.length} 202`);

  world.db = new pg.Client({ connectionString: world.postgres.url('roost') });
  await world.db.connect();
  const db = world.db;
  await waitFor('schedules to complete', 90_000, async () => {
    const rows = (await db.query("select count(*)::int as n from schedules where status <> 'completed'")).rows;
    return rows[0].n === 0;
  });
  await waitFor('listeners to catch up', 90_000, async () => {
    const boxes = await mailboxes(db);
    return world.listeners.every((l) => (boxes.get(l.handle) ?? []).every((id) => l.counts.has(id)));
  });
  // A last resume from each cursor: must replay nothing twice.
  const before = world.listeners.map((l) => l.replayCompletes);
  for (const listener of world.listeners) listener.reconnect();
  await waitFor('final resumes', 30_000, async () =>
    world.listeners.every((l, i) => l.replayCompletes > before[i] && l.connected),
  );
  await sleep(2_000); // a late duplicate would arrive now

  const ready: Record<string, boolean> = {};
  const running: Record<string, boolean> = {};
  for (const node of world.nodes) {
    ready[node.name] = await node.ready();
    running[node.name] = node.running;
  }
  if (s.tamper) {
    // Proof that the checker can fail: lose one mailbox entry of an envelope that got 202 (and
    // reached its listener). Lost, half-written, seq gap and listener "unexpected" must all fire.
    const victim = load.sends.find((send) => send.accepted && !send.burst)!;
    await db.query(
      'delete from mailbox_entries where envelope_id = $1 and mailbox_id = (select id from agents where handle = $2)',
      [victim.id, victim.to[0]],
    );
    log(`TAMPER: deleted the entry of ${victim.id} in ${victim.to[0]}`);
  }
  const report = await check({
    db,
    sends: load.sends.filter((send) => !send.burst),
    burst,
    loadSeconds,
    targetRate: s.rate,
    offered: load.offered,
    faults: faults.faults,
    faultCounts: faults.countByKind(),
    outages: faults.postgresOutages(),
    listeners: world.listeners,
    recipients,
    senders,
    schedules,
    apiUrls: apiUrls(),
    apiNames: apis.map((n) => n.name),
    crashes: world.nodes.flatMap((n) => n.crashes),
    startFailures: world.nodes.reduce((sum, n) => sum + n.startFailures, 0),
    ready,
    running,
    startedAt,
  });
  return report;
}

async function main(): Promise<number> {
  const s = settings();
  const world: World = { nodes: [], listeners: [], proxies: [] };
  let finishing = false;
  const abort = async (why: string, code: number) => {
    if (finishing) return;
    finishing = true;
    log(`${why}: cleaning up`);
    await cleanup(world, s.keep).catch(() => undefined);
    process.exit(code);
  };
  process.once('SIGINT', () => void abort('interrupted', 130));
  process.once('SIGTERM', () => void abort('terminated', 143));
  // A hard bound whatever happens: the run, then at most 5 minutes of settling and checking.
  const watchdog = setTimeout(() => void abort('watchdog: the run took too long', 2), (s.seconds + 300) * 1000);
  watchdog.unref();
  process.on('exit', () => world.postgres?.killNow());

  const started = Date.now();
  let report: Report | undefined;
  try {
    report = await run(s, world);
  } catch (error) {
    log(`chaos run failed: ${(error as Error).stack ?? error}`);
  }
  finishing = true;
  const failed = !report?.ok;
  if (failed) {
    for (const node of world.nodes) {
      if (node.output.length > 0)
        log(`--- ${node.name} (last lines) ---\n    ${node.output.slice(-15).join('\n    ')}`);
    }
  }
  if (s.logDir) saveLogs(world, s.logDir);
  await cleanup(world, s.keep);
  clearTimeout(watchdog);
  if (report) {
    const output = {
      ...report,
      seed: s.seed,
      seconds: s.seconds,
      rate: s.rate,
      runtime_s: Math.round((Date.now() - started) / 1000),
    };
    process.stdout.write(
      `\nRoost chaos: ${s.seconds} s, seed ${s.seed}, runtime ${output.runtime_s} s\n${table(report)}\n`,
    );
    if (s.json) writeFileSync(s.json, JSON.stringify(output, null, 2));
  }
  return report?.ok ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`chaos: ${(error as Error).stack ?? error}\n`);
    process.exit(1);
  },
);
