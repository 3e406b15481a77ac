import { hostname } from 'node:os';
import { Injectable, Logger, Optional, type BeforeApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { FrameBus } from '#bus';
import { InjectConfig, type Config } from '#config';
import { InjectDatabase, loadMigrations, migrationsApplied, type Database } from '#db';
import { JobRunner } from '#jobs';
import { Metrics } from '#metrics';

/** How often dependencies are checked between probes (the gauge and the outage log lines). */
const WATCH_INTERVAL_MS = 2_000;
/** A check that takes longer than this counts as down (a probe must answer before its timeout). */
const CHECK_TIMEOUT_MS = 2_000;
/** A dependency not yet seen up this long after start is still connecting, not "unreachable". */
const CONNECT_GRACE_MS = 5_000;
/** Metrics read from Redis at scrape wait at most this long; the rest of the scrape still answers. */
const SCRAPE_READ_TIMEOUT_MS = 1_000;

type Dependency = 'postgres' | 'redis';

export interface Readiness {
  ok: boolean;
  checks: { postgres: boolean; redis: boolean | 'embedded' };
}

/**
 * What the probes and the metrics scrape ask of a process, wherever they ask it (the main port,
 * the metrics listener). Readiness means "this node can do its job": Postgres with every migration
 * applied for every role; Redis only for the worker, whose job queue lives there. api and gateway
 * keep serving through a Redis outage (a commit is the acknowledgement; gateways backfill from
 * Postgres), so there Redis shows in `checks` and `roost_dependency_up`, not as 503.
 */
@Injectable()
export class OpsService implements OnModuleInit, BeforeApplicationShutdown {
  private readonly logger = new Logger('dependencies');
  private readonly started = Date.now();
  private readonly migrations = loadMigrations();
  private readonly down = new Map<Dependency, number>();
  private readonly seenUp = new Set<Dependency>();
  private timer: NodeJS.Timeout | undefined;
  private stopping = false;

  constructor(
    @InjectConfig() private readonly config: Config,
    @InjectDatabase() private readonly database: Database,
    private readonly bus: FrameBus,
    private readonly metrics: Metrics,
    @Optional() private readonly jobs?: JobRunner,
  ) {}

  onModuleInit(): void {
    this.metrics.buildInfo.set({ version: this.config.version, node: hostname() }, 1);
    void this.readiness();
    this.timer = setInterval(() => void this.readiness(), WATCH_INTERVAL_MS).unref();
  }

  /** Before pools and connections close, so closing them is not taken for an outage. */
  beforeApplicationShutdown(): void {
    clearInterval(this.timer);
    this.stopping = true;
  }

  health() {
    return {
      ok: true,
      network: this.config.network,
      version: this.config.version,
      uptime_ms: Date.now() - this.started,
    };
  }

  async readiness(): Promise<Readiness> {
    const embedded = this.config.redisUrl === null;
    const [postgres, redis] = await Promise.all([
      within(migrationsApplied(this.database, this.migrations), CHECK_TIMEOUT_MS),
      embedded ? Promise.resolve(true) : this.redisUp(),
    ]);
    this.note('postgres', postgres);
    if (!embedded) this.note('redis', redis);
    const ok = postgres && (this.config.role === 'worker' ? redis : true);
    return { ok, checks: { postgres, redis: embedded ? 'embedded' : redis } };
  }

  /** The bus's Redis; for a process that runs jobs, their queue's Redis too. */
  private async redisUp(): Promise<boolean> {
    const [bus, jobs] = await Promise.all([
      within(this.bus.ready(), CHECK_TIMEOUT_MS),
      this.jobs ? within(this.jobs.ready(), CHECK_TIMEOUT_MS) : true,
    ]);
    return bus && jobs;
  }

  /** The gauge always; a log line only when a dependency goes away or comes back. */
  private note(dependency: Dependency, up: boolean): void {
    if (this.stopping) return;
    this.metrics.dependencyUp.set({ dependency }, up ? 1 : 0);
    const since = this.down.get(dependency);
    if (up) this.seenUp.add(dependency);
    if (!up && since === undefined) {
      // Connections open in the background: a first check may come before they are up.
      if (!this.seenUp.has(dependency) && Date.now() - this.started < CONNECT_GRACE_MS) return;
      this.down.set(dependency, Date.now());
      this.logger.warn(
        `${dependency} unreachable${dependency === 'redis' && this.config.role !== 'worker' ? ' (still serving: push falls back to backfill from Postgres)' : ''}`,
      );
    } else if (up && since !== undefined) {
      this.down.delete(dependency);
      this.logger.warn(`${dependency} reachable again after ${Date.now() - since} ms`);
    }
  }

  /** Prometheus text; the gauges that need a look at Postgres' pool or Redis are read now. */
  async metricsText(): Promise<string> {
    const pool = this.database.poolStats();
    this.metrics.dbPool.set({ state: 'in_use' }, pool.total - pool.idle);
    this.metrics.dbPool.set({ state: 'idle' }, pool.idle);
    this.metrics.dbPool.set({ state: 'waiting' }, pool.waiting);
    const [streams, jobs] = await Promise.all([
      withinOr(this.bus.stats(), SCRAPE_READ_TIMEOUT_MS),
      this.jobs ? withinOr(this.jobs.counts(), SCRAPE_READ_TIMEOUT_MS) : Promise.resolve(null),
    ]);
    // Unreadable (Redis down): the series disappear rather than repeat stale values.
    this.metrics.streamLength.reset();
    this.metrics.streamLag.reset();
    for (const stream of streams ?? []) {
      this.metrics.streamLength.set({ partition: String(stream.partition) }, stream.length);
      if (stream.lagEntries !== undefined)
        this.metrics.streamLag.set({ partition: String(stream.partition) }, stream.lagEntries);
    }
    this.metrics.jobs.reset();
    for (const count of jobs ?? []) this.metrics.jobs.set({ queue: count.queue, state: count.state }, count.jobs);
    return this.metrics.registry.metrics();
  }
}

/** True when `check` answers true within `ms`; a failure or a timeout is false. */
async function within(check: Promise<boolean>, ms: number): Promise<boolean> {
  return (await withinOr(check, ms)) === true;
}

/** The answer, or null on failure or past `ms`. */
async function withinOr<T>(ask: Promise<T>, ms: number): Promise<T | null> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), ms)));
  try {
    return await Promise.race([ask.catch(() => null), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
