/**
 * Where the medium and e2e tiers find Postgres and Redis: ROOST_TEST_DATABASE_URL /
 * ROOST_TEST_REDIS_URL, else DATABASE_URL / REDIS_URL, else containers started by
 * testcontainers (global-setup) from ROOST_TEST_POSTGRES_IMAGE / ROOST_TEST_REDIS_IMAGE. With
 * ROOST_TEST_REQUIRE_SERVICES=1 (CI) a missing service fails the run instead of being replaced or
 * skipped.
 */

/**
 * The images testcontainers starts: the official ones unless ROOST_TEST_POSTGRES_IMAGE /
 * ROOST_TEST_REDIS_IMAGE name others (CI builds look-alikes from Debian's packages where no
 * registry is reachable: test/support/images/, .ci/docker.sh).
 */
export function testImages(): { postgres: string; redis: string } {
  return {
    postgres: process.env.ROOST_TEST_POSTGRES_IMAGE || 'postgres:16-alpine',
    redis: process.env.ROOST_TEST_REDIS_IMAGE || 'redis:7-alpine',
  };
}
export function testDatabaseUrl(): string {
  const url = process.env.ROOST_TEST_DATABASE_URL ?? process.env.DATABASE_URL;
  if (!url) throw new Error('no Postgres for tests: set DATABASE_URL (or ROOST_TEST_DATABASE_URL)');
  return url;
}

export function testRedisUrl(): string {
  const url = process.env.ROOST_TEST_REDIS_URL ?? process.env.REDIS_URL;
  if (!url) throw new Error('no Redis for tests: set REDIS_URL (or ROOST_TEST_REDIS_URL)');
  return url;
}

export const testBackend = (): 'postgres' | 'pglite' =>
  process.env.ROOST_TEST_BACKEND === 'pglite' ? 'pglite' : 'postgres';
