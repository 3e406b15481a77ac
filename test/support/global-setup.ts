import pg from 'pg';
import Redis from 'ioredis';
import { testImages } from './services';

type Stoppable = { stop(): Promise<unknown> };
declare global {
  var __roostContainers: Stoppable[] | undefined;
}

async function reachable(kind: 'postgres' | 'redis', url: string): Promise<void> {
  if (kind === 'postgres') {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3000 });
    await client.connect();
    await client.end();
  } else {
    const redis = new Redis(url, {
      lazyConnect: true,
      connectTimeout: 3000,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    await redis.connect();
    await redis.quit();
  }
}

/** Resolve Postgres and Redis once for the run; start containers only when no URL is given. */
export default async function globalSetup(): Promise<void> {
  const required = process.env.ROOST_TEST_REQUIRE_SERVICES === '1';
  const containers: Stoppable[] = [];
  let databaseUrl = process.env.ROOST_TEST_DATABASE_URL ?? process.env.DATABASE_URL;
  let redisUrl = process.env.ROOST_TEST_REDIS_URL ?? process.env.REDIS_URL;
  if ((!databaseUrl || !redisUrl) && required) {
    throw new Error('ROOST_TEST_REQUIRE_SERVICES=1 but DATABASE_URL or REDIS_URL is not set');
  }
  const images = testImages();
  try {
    if (!databaseUrl) {
      const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
      const container = await new PostgreSqlContainer(images.postgres).start();
      containers.push(container);
      databaseUrl = container.getConnectionUri();
      process.stderr.write(
        `\ntest services: Postgres from ${images.postgres} (testcontainers) at ${container.getHost()}:${container.getPort()}\n`,
      );
    }
    if (!redisUrl) {
      const { RedisContainer } = await import('@testcontainers/redis');
      const container = await new RedisContainer(images.redis).start();
      containers.push(container);
      redisUrl = container.getConnectionUrl();
      process.stderr.write(`test services: Redis from ${images.redis} (testcontainers) at ${redisUrl}\n`);
    }
  } catch (error) {
    for (const container of containers) await container.stop().catch(() => undefined);
    throw new Error(
      `no DATABASE_URL/REDIS_URL, and starting containers failed (Docker running? images ${images.postgres}, ${images.redis}; ` +
        `ROOST_TEST_POSTGRES_IMAGE / ROOST_TEST_REDIS_IMAGE choose others): ${(error as Error).message}`,
      { cause: error },
    );
  }
  await reachable('postgres', databaseUrl).catch((error: Error) => {
    throw new Error(`Postgres at ${databaseUrl} is not reachable: ${error.message}`);
  });
  await reachable('redis', redisUrl).catch((error: Error) => {
    throw new Error(`Redis at ${redisUrl} is not reachable: ${error.message}`);
  });
  process.env.ROOST_TEST_DATABASE_URL = databaseUrl;
  process.env.ROOST_TEST_REDIS_URL = redisUrl;
  globalThis.__roostContainers = containers;
}
