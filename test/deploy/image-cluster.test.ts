import { PostgreSqlContainer, type StartedPostgreSqlContainer } from '@testcontainers/postgresql';
import { RedisContainer, type StartedRedisContainer } from '@testcontainers/redis';
import { Network, type StartedNetwork } from 'testcontainers';
import { textPart } from '#client';
import { loadMigrations } from '#db';
import { RoostContainer, type StartedRoostContainer } from '../../libs/testcontainers/src';
import { testImages } from '../support/services';
import { connect } from '../support/ws';
import {
  HARDENED,
  docker,
  dockerOk,
  eventually,
  inspect,
  report,
  stop,
  testImage,
  untilHealthy,
} from './image-support';

// The image as a cluster: Postgres and Redis containers on a private network, the migration
// (`roost migrate`, the Helm hook Job) run to completion, then one api, one gateway and one worker
// container, each hardened (RoostContainer: uid 1000, read-only root, tmpfs /tmp). A message sent
// through the api reaches a socket on the gateway; a schedule fires on the worker.
const image = testImage();
const adminToken = 'image-cluster-admin-token-0123456789';

describe('api, gateway and worker containers against Postgres and Redis', () => {
  let network: StartedNetwork;
  let postgres: StartedPostgreSqlContainer;
  let redis: StartedRedisContainer;
  let api: StartedRoostContainer;
  let gateway: StartedRoostContainer;
  let worker: StartedRoostContainer;
  const databaseUrl = 'postgres://roost:roost-password@postgres:5432/roost';
  const redisUrl = 'redis://redis:6379';

  beforeAll(async () => {
    const images = testImages();
    network = await new Network().start();
    [postgres, redis] = await Promise.all([
      new PostgreSqlContainer(images.postgres)
        .withNetwork(network)
        .withNetworkAliases('postgres')
        .withDatabase('roost')
        .withUsername('roost')
        .withPassword('roost-password')
        .start(),
      new RedisContainer(images.redis).withNetwork(network).withNetworkAliases('redis').start(),
    ]);
  });

  afterAll(async () => {
    for (const container of [worker, gateway, api, redis, postgres]) await container?.stop().catch(() => undefined);
    await network?.stop().catch(() => undefined);
  });

  const node = (role: 'api' | 'gateway' | 'worker') =>
    new RoostContainer(image)
      .withNetwork(network)
      .withRole(role)
      .withDatabaseUrl(databaseUrl)
      .withRedisUrl(redisUrl)
      .withAdminToken(adminToken);

  it('roost migrate applies every migration and exits 0, twice (idempotent)', async () => {
    for (let i = 0; i < 2; i++) {
      const migrate = await docker([
        'run',
        '--rm',
        '--network',
        network.getName(),
        ...HARDENED,
        '--env',
        `DATABASE_URL=${databaseUrl}`,
        image,
        'migrate',
      ]);
      expect([migrate.code, migrate.stderr]).toEqual([0, expect.any(String)]);
    }
    const applied = await postgres.exec([
      'psql',
      '-U',
      'roost',
      '-d',
      'roost',
      '-tAc',
      'select count(*) from schema_migrations',
    ]);
    expect(applied.exitCode).toBe(0);
    expect(Number(applied.output.trim())).toBe(loadMigrations().length);
  });

  it('starts api (with two agents), gateway and worker, each ready', async () => {
    // allSettled, so afterAll stops whichever started when another did not
    const started = await Promise.allSettled([
      node('api').withAgents({ handle: '@img.alice', policy: 'open' }, { handle: '@img.bob', policy: 'open' }).start(),
      node('gateway').start(),
      node('worker').start(),
    ]);
    [api, gateway, worker] = started.map((result) => (result.status === 'fulfilled' ? result.value : undefined!));
    for (const result of started) if (result.status === 'rejected') throw result.reason;
    for (const container of [api, gateway, worker]) {
      expect(await inspect(container.getId(), '{{.HostConfig.ReadonlyRootfs}} {{.Config.User}}')).toBe(
        'true 1000:1000',
      );
      expect(await dockerOk(['exec', container.getId(), 'id', '-u'])).toBe('1000');
    }
  });

  it('a message sent through the api reaches a socket on the gateway (Redis) and its body is served (Postgres)', async () => {
    const socket = await connect(gateway.getUrl(), { token: api.getAgentToken('@img.bob') });
    try {
      const accepted = await api
        .client('@img.alice')
        .send({ to: ['@img.bob'], subject: 'cluster', content_parts: [textPart('across')] });
      await socket.until(() => socket.ids.includes(accepted.id), 10_000, 'the frame on the gateway');
      expect((await api.client('@img.bob').message(accepted.id)).content_parts).toEqual([textPart('across')]);
    } finally {
      socket.close();
    }
  });

  it('the worker fires a schedule: its message reaches the gateway socket', async () => {
    const socket = await connect(gateway.getUrl(), { token: api.getAgentToken('@img.bob') });
    try {
      const schedule = await api.client('@img.alice').createSchedule({
        envelope: { to: ['@img.bob'], subject: 'scheduled', content_parts: [textPart('later')] },
        start_at: Date.now() + 1_000,
      });
      await socket.until(
        () => socket.notifies.some((frame) => frame.subject === 'scheduled'),
        30_000,
        'the scheduled frame',
      );
      // the firing commits the message, then records itself on the schedule
      const fired = await eventually(
        async () => {
          const current = await api.client('@img.alice').schedule(schedule.id);
          return current.send_count === 1 ? current : undefined;
        },
        10_000,
        'the schedule to record its firing',
      );
      expect(fired.last_envelope_id).toBe(socket.notifies.find((frame) => frame.subject === 'scheduled').id);
    } finally {
      socket.close();
    }
  });

  it("each role turns healthy by the image's HEALTHCHECK", async () => {
    await Promise.all([api, gateway, worker].map((container) => untilHealthy(container.getId())));
  });

  it('each role drains on docker stop and exits 0 on its own', async () => {
    for (const [role, container] of [
      ['gateway', gateway],
      ['worker', worker],
      ['api', api],
    ] as const) {
      const stopped = await stop(container.getId(), 30);
      expect([role, stopped.exitCode, stopped.oomKilled]).toEqual([role, 0, false]);
      expect(stopped.ms).toBeLessThan(25_000);
      report(`docker stop (${role}): ${stopped.ms} ms, exit ${stopped.exitCode}`);
    }
  });
});
