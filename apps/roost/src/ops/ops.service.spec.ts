import { Logger } from '@nestjs/common';
import type { FrameBus } from '#bus';
import { loadConfig, type Config } from '#config';
import type { Database } from '#db';
import type { JobRunner } from '#jobs';
import { Metrics } from '#metrics';
import { OpsService } from './ops.service';

/** Readiness by role and the outage log lines, with the dependencies stubbed (no I/O). */
describe('OpsService', () => {
  let redisUp: boolean;
  let warnings: string[];
  let warn: jest.SpyInstance;

  const database = {
    db: { selectFrom: () => ({ select: () => ({ execute: async () => [] }) }) },
    poolStats: () => ({ total: 0, idle: 0, waiting: 0 }),
  } as unknown as Database;
  const bus = { ready: async () => redisUp, stats: async () => [] } as unknown as FrameBus;
  const jobs = { ready: async () => redisUp, counts: async () => null } as unknown as JobRunner;

  const service = (role: Config['role'], withJobs = role === 'worker') => {
    const config = loadConfig({
      ROOST_ROLE: role,
      DATABASE_URL: 'postgres://x/y',
      REDIS_URL: 'redis://r',
      ROOST_ADMIN_TOKEN: 'a'.repeat(16),
    });
    const metrics = new Metrics();
    const ops = new OpsService(config, database, bus, metrics, withJobs ? jobs : undefined);
    // No migrations to check: the stubbed schema_migrations is empty and so is the list.
    (ops as unknown as { migrations: unknown[] }).migrations = [];
    return { ops, metrics };
  };

  beforeEach(() => {
    redisUp = true;
    warnings = [];
    warn = jest
      .spyOn(Logger.prototype, 'warn')
      .mockImplementation((message: unknown) => void warnings.push(String(message)));
  });

  afterEach(() => warn.mockRestore());

  it.each(['api', 'gateway', 'all'] as const)(
    '%s: ready while Redis is down, reported in checks and the gauge',
    async (role) => {
      const { ops, metrics } = service(role);
      redisUp = false;
      expect(await ops.readiness()).toEqual({ ok: true, checks: { postgres: true, redis: false } });
      expect((await metrics.dependencyUp.get()).values.find((v) => v.labels.dependency === 'redis')?.value).toBe(0);
    },
  );

  it('worker: not ready while its job queue (Redis) is down', async () => {
    const { ops } = service('worker');
    expect(await ops.readiness()).toEqual({ ok: true, checks: { postgres: true, redis: true } });
    redisUp = false;
    expect(await ops.readiness()).toEqual({ ok: false, checks: { postgres: true, redis: false } });
  });

  it('one line when Redis goes away and one when it returns, however many checks meet the outage', async () => {
    const { ops } = service('api');
    await ops.readiness(); // seen up
    redisUp = false;
    for (let i = 0; i < 50; i++) await ops.readiness();
    redisUp = true;
    for (let i = 0; i < 50; i++) await ops.readiness();
    expect(warnings).toEqual([
      expect.stringMatching(/^redis unreachable/),
      expect.stringMatching(/^redis reachable again after \d+ ms$/),
    ]);
  });

  it('a dependency still connecting just after start is not logged as an outage; once the grace is over it is', async () => {
    const { ops } = service('api');
    redisUp = false;
    await ops.readiness();
    expect(warnings).toEqual([]);
    (ops as unknown as { started: number }).started -= 10_000;
    await ops.readiness();
    await ops.readiness();
    expect(warnings).toEqual([expect.stringMatching(/^redis unreachable/)]);
  });

  it('build info carries the version and the node', async () => {
    const { ops, metrics } = service('api');
    ops.onModuleInit();
    ops.beforeApplicationShutdown();
    const [sample] = (await metrics.buildInfo.get()).values;
    expect(sample.labels).toEqual({ version: '0.1.0', node: expect.any(String) });
    expect(sample.value).toBe(1);
  });
});
