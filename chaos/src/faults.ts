import pg from 'pg';
import type { RedisServer } from '../../test/e2e/cluster';
import type { Node, Role } from './nodes';
import type { PrivatePostgres } from './postgres';
import type { ProxyProcess } from './proxy-process';
import { type PostgresOutage, postgresOutages } from './figures';
import { log, type Random, sleep } from './util';

export const FAULT_KINDS = [
  'kill-api',
  'kill-gateway',
  'kill-worker',
  'restart-redis',
  'restart-postgres',
  'outage-api',
  'outage-gateway',
  'sigterm',
  'lock-mailbox',
  'slow-postgres',
  'slow-redis',
  'partition-postgres',
  'partition-redis',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/** How long a whole role stays down (every api, or every gateway). */
export const OUTAGE_MS = 20_000;
/**
 * After a whole-role outage, how long the role runs healthy before it may go down whole again:
 * without it one outage followed the last one's restart at once (0.6 s apart, seen), so a run
 * showed no recovery at all, only one long outage.
 */
export const OUTAGE_SETTLE_MS = 10_000;

/** What the fault script needs besides the nodes: the private servers, their proxies, the mailboxes. */
export interface FaultTargets {
  redis: RedisServer;
  postgres: PrivatePostgres;
  /** Every Roost connection to Postgres and Redis goes through these. */
  postgresProxy: ProxyProcess;
  redisProxy: ProxyProcess;
  /** Direct (not proxied) URL of Roost's database, for the lock-holding session. */
  databaseUrl: string;
  /** Recipients whose mailbox row may be locked. */
  recipients: string[];
  /** The nodes' drain bound (ROOST_SHUTDOWN_TIMEOUT_MS); SIGKILL comes 2 s after it. */
  shutdownTimeoutMs: number;
}

export interface Fault {
  kind: FaultKind;
  target: string;
  /** Wall clock of the fault. */
  at: number;
  /** How long the target stayed down on purpose before its restart began. */
  downMs: number;
  /** Wall clock when the target was up again (healthy / accepting queries). */
  upAt?: number;
  /** Postgres only: `immediate` (pg_ctl stop -m immediate) or `kill9` (SIGKILL of the postmaster). */
  mode?: 'immediate' | 'kill9' | 'blackhole' | 'cut';
  /** Wall clock when the fault itself ended (restart began, proxy healed, lock released). */
  healedAt?: number;
  /** What was done, for the table (delay, locked mailbox, ...). */
  detail?: string;
  /** SIGTERM only: how the node exited and how long its drain took. */
  drain?: { code: number | null; signal: string | null; ms: number };
}

const ROLE_OF: Record<string, Role> = {
  'kill-api': 'api',
  'kill-gateway': 'gateway',
  'kill-worker': 'worker',
  'outage-api': 'api',
  'outage-gateway': 'gateway',
};

/**
 * The fault script: at random moments (uniform in [0.5, 1.5] × the mean interval) one fault. Kinds
 * not injected yet go first (in a random order), so even a short run injects each kind once; then
 * kinds are drawn at random. Single-node faults (kill -9, SIGTERM) keep one live process of the
 * role (a disruption budget); `outage-*` takes the whole role down for OUTAGE_MS, and only when all
 * of it is up. Redis and Postgres are never down twice at once, a proxy carries one network fault
 * at a time, one mailbox lock at a time. Faults run in the background, so they may overlap.
 */
export class FaultScript {
  readonly faults: Fault[] = [];
  private readonly pending = new Set<Promise<void>>();
  private redisDown = false;
  private postgresDown = false;
  private readonly proxyBusy = new Set<ProxyProcess>();
  private locking = false;
  private stopped = false;
  /** Per role: when its last whole-role outage ended (every process healthy again). */
  private readonly outageEnded = new Map<Role, number>();
  private readonly redis: RedisServer;
  private readonly postgres: PrivatePostgres;

  constructor(
    private readonly nodes: Node[],
    private readonly targets: FaultTargets,
    private readonly random: Random,
    private readonly meanIntervalMs: number,
    /** The kinds this run may inject (all by default). */
    private readonly kinds: readonly FaultKind[] = FAULT_KINDS,
  ) {
    this.redis = targets.redis;
    this.postgres = targets.postgres;
  }

  /** Inject faults until `until` (wall clock), then wait for every restart. */
  async run(until: number): Promise<void> {
    while (!this.stopped) {
      const wait = this.meanIntervalMs * this.random.between(0.5, 1.5);
      if (Date.now() + wait > until) break;
      await sleep(wait);
      // Kinds not injected yet come first, so that even a short run gets every kind once.
      const counts = this.countByKind();
      const fresh = this.kinds.filter((kind) => counts[kind] === 0);
      const candidates = [
        ...this.random.shuffle(fresh),
        ...this.random.shuffle(this.kinds.filter((k) => !fresh.includes(k))),
      ];
      const first = fresh.length > 0 ? candidates[0] : this.random.pick(this.kinds);
      // Not possible right now (its target already down): the next candidate. None possible (a
      // slow restart holds every target): try again each second, so the slot is not lost.
      for (;;) {
        if ([first, ...candidates.filter((k) => k !== first)].some((kind) => this.inject(kind))) break;
        if (this.stopped || Date.now() + 1_000 > until) break;
        await sleep(1_000);
      }
    }
    await this.settled();
  }

  stop(): void {
    this.stopped = true;
  }

  async settled(): Promise<void> {
    while (this.pending.size > 0) await Promise.all([...this.pending]);
  }

  countByKind(): Record<FaultKind, number> {
    const counts = Object.fromEntries(FAULT_KINDS.map((kind) => [kind, 0])) as Record<FaultKind, number>;
    for (const fault of this.faults) counts[fault.kind]++;
    return counts;
  }

  /** Postgres outages (crash → accepting queries again), for classifying requests (figures.ts). */
  postgresOutages(): PostgresOutage[] {
    return postgresOutages(this.faults, Date.now());
  }

  private inject(kind: FaultKind): boolean {
    if (kind === 'restart-redis') {
      if (this.redisDown) return false;
      this.background(this.restartRedis());
      return true;
    }
    if (kind === 'restart-postgres') {
      if (this.postgresDown) return false;
      this.background(this.restartPostgres());
      return true;
    }
    if (kind === 'outage-api' || kind === 'outage-gateway') {
      const role = ROLE_OF[kind];
      const all = this.nodes.filter((node) => node.role === role);
      // Only a role that is all up (healthy, not still starting) and has run so for a while.
      if (!all.every((node) => node.healthy)) return false;
      if (Date.now() < (this.outageEnded.get(role) ?? 0) + OUTAGE_SETTLE_MS) return false;
      this.background(this.outage(kind, all));
      return true;
    }
    if (kind === 'sigterm') {
      const roles = (['api', 'gateway', 'worker'] as const).filter(
        (role) => this.nodes.filter((n) => n.role === role && n.healthy).length >= 2,
      );
      if (roles.length === 0) return false;
      const role = this.random.pick(roles);
      this.background(this.sigtermNode(this.random.pick(this.nodes.filter((n) => n.role === role && n.healthy))));
      return true;
    }
    if (kind === 'lock-mailbox') {
      if (this.locking || this.postgresDown) return false;
      this.background(this.lockMailbox());
      return true;
    }
    if (
      kind === 'slow-postgres' ||
      kind === 'slow-redis' ||
      kind === 'partition-postgres' ||
      kind === 'partition-redis'
    ) {
      const proxy = kind.endsWith('postgres') ? this.targets.postgresProxy : this.targets.redisProxy;
      if (this.proxyBusy.has(proxy)) return false;
      this.background(kind.startsWith('slow') ? this.slow(kind, proxy) : this.partition(kind, proxy));
      return true;
    }
    const role = ROLE_OF[kind];
    // A disruption budget counts ready processes: a restarting one does not keep the role up.
    const live = this.nodes.filter((node) => node.role === role && node.healthy);
    if (live.length < 2) return false; // keep one process of each role
    this.background(this.killNode(kind, this.random.pick(live)));
    return true;
  }

  /** Every process of a role killed (-9) at once, all restarted after OUTAGE_MS. */
  private async outage(kind: FaultKind, nodes: Node[]): Promise<void> {
    const fault: Fault = { kind, target: nodes.map((n) => n.name).join('+'), at: Date.now(), downMs: OUTAGE_MS };
    this.faults.push(fault);
    log(`FAULT ${kind}: ${fault.target} down for ${OUTAGE_MS} ms`);
    await Promise.all(nodes.map((node) => node.kill9()));
    await sleep(OUTAGE_MS - (Date.now() - fault.at));
    fault.healedAt = Date.now();
    await Promise.all(nodes.map((node) => node.start()));
    fault.upAt = Date.now();
    this.outageEnded.set(nodes[0].role, fault.upAt);
  }

  /** SIGTERM of one process under load: it must drain (in-flight requests answered) and exit 0. */
  private async sigtermNode(node: Node): Promise<void> {
    const downMs = Math.round(this.random.between(500, 4_000));
    const fault: Fault = { kind: 'sigterm', target: node.name, at: Date.now(), downMs };
    this.faults.push(fault);
    log(`FAULT sigterm ${node.name} (down ${downMs} ms after its exit)`);
    fault.drain = await node.sigterm(this.targets.shutdownTimeoutMs + 2_000);
    fault.detail = `drained in ${fault.drain.ms} ms, exit ${fault.drain.signal ?? fault.drain.code}`;
    await sleep(downMs);
    fault.healedAt = Date.now();
    await node.start();
    fault.upAt = Date.now();
  }

  /**
   * A session holds `SELECT … FOR UPDATE` on one recipient's mailbox row: every send to it waits
   * behind the lock, then answers 503 at the statement timeout or 202 once the lock goes.
   */
  private async lockMailbox(): Promise<void> {
    this.locking = true;
    const handle = this.random.pick(this.targets.recipients);
    const holdMs = Math.round(this.random.between(4_000, 10_000));
    const fault: Fault = {
      kind: 'lock-mailbox',
      target: handle,
      at: Date.now(),
      downMs: holdMs,
      detail: `mailbox row of ${handle} locked ${holdMs} ms`,
    };
    this.faults.push(fault);
    log(`FAULT lock-mailbox ${handle} for ${holdMs} ms`);
    const client = new pg.Client({ connectionString: this.targets.databaseUrl, connectionTimeoutMillis: 3_000 });
    client.on('error', () => undefined); // Postgres may crash meanwhile: the lock goes with it
    try {
      await client.connect();
      await client.query('begin');
      await client.query(
        'select 1 from mailboxes where agent_id = (select id from agents where handle = $1) for update',
        [handle],
      );
      await sleep(holdMs - (Date.now() - fault.at));
      await client.query('rollback');
    } catch (error) {
      fault.detail += ` (ended early: ${(error as Error).message})`;
    } finally {
      fault.healedAt = Date.now();
      fault.upAt = fault.healedAt;
      await client.end().catch(() => undefined);
      this.locking = false;
    }
  }

  /** Latency on every Roost ↔ Postgres/Redis connection (each way, per chunk, with jitter). */
  private async slow(kind: FaultKind, proxy: ProxyProcess): Promise<void> {
    this.proxyBusy.add(proxy);
    const durationMs = Math.round(this.random.between(8_000, 16_000));
    const delay = Math.round(kind === 'slow-postgres' ? this.random.between(10, 60) : this.random.between(20, 150));
    const jitter = Math.round(delay / 2);
    const fault: Fault = {
      kind,
      target: proxy.name,
      at: Date.now(),
      downMs: durationMs,
      detail: `${delay}±${jitter} ms each way for ${durationMs} ms`,
    };
    this.faults.push(fault);
    log(`FAULT ${kind}: ${fault.detail}`);
    try {
      await proxy.setDelay(delay, jitter);
      await sleep(durationMs);
    } finally {
      await proxy.heal();
      fault.healedAt = fault.upAt = Date.now();
      this.proxyBusy.delete(proxy);
    }
  }

  /** A partition: packets dropped (blackhole: connections stall) or refused (cut: every connection reset). */
  private async partition(kind: FaultKind, proxy: ProxyProcess): Promise<void> {
    this.proxyBusy.add(proxy);
    const mode = this.random.next() < 0.5 ? 'blackhole' : 'cut';
    const durationMs = Math.round(this.random.between(3_000, 10_000));
    const fault: Fault = { kind, target: proxy.name, at: Date.now(), downMs: durationMs, mode };
    this.faults.push(fault);
    log(`FAULT ${kind} ${mode} for ${durationMs} ms`);
    try {
      if (mode === 'blackhole') await proxy.partition();
      else await proxy.cut();
      await sleep(durationMs);
    } finally {
      await proxy.heal();
      fault.healedAt = fault.upAt = Date.now();
      if (mode === 'cut') fault.detail = `${(await proxy.stats()).resets} connections reset by cuts so far`;
      this.proxyBusy.delete(proxy);
    }
  }

  private background(work: Promise<void>): void {
    const tracked = work.catch((error: unknown) => log(`fault failed: ${(error as Error).message}`));
    this.pending.add(tracked);
    void tracked.finally(() => this.pending.delete(tracked));
  }

  private async killNode(kind: FaultKind, node: Node): Promise<void> {
    const downMs = Math.round(this.random.between(500, 4_000));
    const fault: Fault = { kind, target: node.name, at: Date.now(), downMs };
    this.faults.push(fault);
    log(`FAULT ${kind} ${node.name} (down ${downMs} ms)`);
    await node.kill9();
    await sleep(downMs);
    fault.healedAt = Date.now();
    await node.start();
    fault.upAt = Date.now();
  }

  private async restartRedis(): Promise<void> {
    this.redisDown = true;
    const downMs = Math.round(this.random.between(500, 3_000));
    const fault: Fault = { kind: 'restart-redis', target: 'redis', at: Date.now(), downMs };
    this.faults.push(fault);
    log(`FAULT restart-redis (down ${downMs} ms)`);
    try {
      await this.redis.kill();
      await sleep(downMs);
      fault.healedAt = Date.now();
      for (let attempt = 0; ; attempt++) {
        try {
          await this.redis.start();
          break;
        } catch (error) {
          if (attempt >= 20) throw error;
          await sleep(500);
        }
      }
      fault.upAt = Date.now();
    } finally {
      this.redisDown = false;
    }
  }

  private async restartPostgres(): Promise<void> {
    this.postgresDown = true;
    const mode = this.random.next() < 0.5 ? 'immediate' : 'kill9';
    const downMs = Math.round(this.random.between(2_000, 6_000));
    const fault: Fault = { kind: 'restart-postgres', target: 'postgres', at: Date.now(), downMs, mode };
    this.faults.push(fault);
    log(`FAULT restart-postgres ${mode} (down ${downMs} ms)`);
    try {
      await this.postgres.crash(mode);
      const crashed = Date.now();
      await sleep(downMs);
      const starting = Date.now();
      fault.healedAt = starting;
      for (let attempt = 0; ; attempt++) {
        try {
          await this.postgres.start();
          break;
        } catch (error) {
          if (attempt >= 20) throw error;
          log(`postgres restart failed: ${(error as Error).message}; retrying`);
          await sleep(1_000);
        }
      }
      fault.upAt = Date.now();
      log(
        `postgres up again after ${((fault.upAt - fault.at) / 1000).toFixed(1)} s ` +
          `(crash ${crashed - fault.at} ms, start to ready ${fault.upAt - starting} ms)`,
      );
    } finally {
      this.postgresDown = false;
    }
  }
}
