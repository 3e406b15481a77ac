import type { RedisServer } from '../../test/e2e/cluster';
import type { Node, Role } from './nodes';
import type { PrivatePostgres } from './postgres';
import { log, Random, sleep } from './util';

export const FAULT_KINDS = ['kill-api', 'kill-gateway', 'kill-worker', 'restart-redis', 'restart-postgres'] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

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
  mode?: 'immediate' | 'kill9';
}

const ROLE_OF: Record<string, Role> = { 'kill-api': 'api', 'kill-gateway': 'gateway', 'kill-worker': 'worker' };

/**
 * The fault script: at random moments (uniform in [0.5, 1.5] × the mean interval) one fault. Kinds
 * not injected yet go first (in a random order), so even a short run injects each kind once; then
 * kinds are drawn at random. A role always keeps one live process (a disruption budget),
 * and Redis and Postgres are never down twice at once. Restarts run in the background, so faults
 * may overlap.
 */
export class FaultScript {
  readonly faults: Fault[] = [];
  private readonly pending = new Set<Promise<void>>();
  private redisDown = false;
  private postgresDown = false;
  private stopped = false;

  constructor(
    private readonly nodes: Node[],
    private readonly redis: RedisServer,
    private readonly postgres: PrivatePostgres,
    private readonly random: Random,
    private readonly meanIntervalMs: number,
    /** The kinds this run may inject (all by default). */
    private readonly kinds: readonly FaultKind[] = FAULT_KINDS,
  ) {}

  /** Inject faults until `until` (wall clock), then wait for every restart. */
  async run(until: number): Promise<void> {
    while (!this.stopped) {
      const wait = this.meanIntervalMs * this.random.between(0.5, 1.5);
      if (Date.now() + wait > until) break;
      await sleep(wait);
      // Kinds not injected yet come first, so that even a short run gets every kind once.
      const counts = this.countByKind();
      const fresh = this.kinds.filter((kind) => counts[kind] === 0);
      const candidates = [...this.random.shuffle(fresh), ...this.random.shuffle(this.kinds.filter((k) => !fresh.includes(k)))];
      const first = fresh.length > 0 ? candidates[0] : this.random.pick(this.kinds);
      // Not possible right now (its target already down): the next candidate.
      for (const kind of [first, ...candidates.filter((k) => k !== first)]) if (this.inject(kind)) break;
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

  /** Postgres outages (crash → accepting queries again), for classifying requests. */
  postgresOutages(): Array<{ start: number; end: number }> {
    return this.faults
      .filter((fault) => fault.kind === 'restart-postgres')
      .map((fault) => ({ start: fault.at, end: fault.upAt ?? Date.now() }));
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
    const role = ROLE_OF[kind];
    const live = this.nodes.filter((node) => node.role === role && node.running);
    if (live.length < 2) return false; // keep one process of each role
    this.background(this.killNode(kind, this.random.pick(live)));
    return true;
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
