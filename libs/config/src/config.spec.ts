import { createHash } from 'node:crypto';
import { isAbsolute, resolve } from 'node:path';
import { ConfigError, loadConfig } from './config';

const PG = 'postgres://roost:pw@db:5432/roost';
const TOKEN = 'an-admin-token-of-enough-length';
const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

/** The ConfigError `env` produces; fails the test when loadConfig succeeds or throws something else. */
function configError(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error(`expected a ConfigError for ${JSON.stringify(env)}`);
}

describe('loadConfig: defaults (embedded)', () => {
  const config = loadConfig({});

  it('runs every role embedded on PGlite with an in-process bus', () => {
    expect(config.role).toBe('all');
    expect(config.databaseUrl).toBeNull();
    expect(config.redisUrl).toBeNull();
  });

  it('listens on 127.0.0.1:8025 and derives the public URL from the port', () => {
    expect(config.port).toBe(8025);
    expect(config.host).toBe('127.0.0.1');
    expect(config.publicUrl).toBe('http://127.0.0.1:8025');
  });

  it('resolves the data directory ./.roost to an absolute path', () => {
    expect(isAbsolute(config.dataDir)).toBe(true);
    expect(config.dataDir).toBe(resolve('.roost'));
  });

  it('has no admin token yet (generated on first start) and sane tunables', () => {
    expect(config.adminToken).toBeNull();
    expect(config.adminTokenHash).toBeNull();
    expect(config.network).toBe('roost');
    expect(config.logLevel).toBe('info');
    expect(config.redisPrefix).toBe('roost:');
    expect(config.db.poolSize).toBe(20);
    expect(config.db.poolMin).toBe(4);
    expect(config.metricsPort).toBe(9464);
  });

  it('treats empty variables as unset', () => {
    expect(loadConfig({ PORT: '', DATABASE_URL: '', ROOST_ROLE: '', ROOST_NETWORK: '' })).toMatchObject({
      port: 8025,
      databaseUrl: null,
      role: 'all',
      network: 'roost',
    });
  });
});

describe('loadConfig: explicit values', () => {
  it('binds 0.0.0.0 by default when a shared Postgres is configured', () => {
    expect(loadConfig({ DATABASE_URL: PG, ROOST_ADMIN_TOKEN: TOKEN }).host).toBe('0.0.0.0');
  });

  it('accepts postgres: and postgresql: URLs, redis: and rediss: URLs', () => {
    expect(loadConfig({ DATABASE_URL: 'postgresql://x/y', ROOST_ADMIN_TOKEN: TOKEN }).databaseUrl).toBe(
      'postgresql://x/y',
    );
    expect(loadConfig({ REDIS_URL: 'rediss://r:6380' }).redisUrl).toBe('rediss://r:6380');
  });

  it('hashes ROOST_ADMIN_TOKEN into adminTokenHash (sha256 hex)', () => {
    const config = loadConfig({ ROOST_ADMIN_TOKEN: TOKEN });
    expect(config.adminToken).toBe(TOKEN);
    expect(config.adminTokenHash).toBe(sha256(TOKEN));
  });

  it('uses ROOST_ADMIN_TOKEN_HASH as given', () => {
    const hash = sha256('x');
    expect(loadConfig({ DATABASE_URL: PG, ROOST_ADMIN_TOKEN_HASH: hash }).adminTokenHash).toBe(hash);
  });

  it('allows split roles with Postgres and Redis', () => {
    const config = loadConfig({
      ROOST_ROLE: 'gateway',
      DATABASE_URL: PG,
      REDIS_URL: 'redis://r',
      ROOST_ADMIN_TOKEN: TOKEN,
    });
    expect(config.role).toBe('gateway');
  });

  it('strips trailing slashes from ROOST_PUBLIC_URL and follows PORT in the default', () => {
    expect(loadConfig({ ROOST_PUBLIC_URL: 'https://roost.example/v1//' }).publicUrl).toBe('https://roost.example/v1');
    expect(loadConfig({ PORT: '3000' }).publicUrl).toBe('http://127.0.0.1:3000');
  });

  it('ROOST_METRICS_PORT: 0 keeps /metrics on PORT; any other free port is a second listener', () => {
    expect(loadConfig({ ROOST_METRICS_PORT: '0' }).metricsPort).toBe(0);
    expect(loadConfig({ ROOST_METRICS_PORT: '9100', PORT: '8025' }).metricsPort).toBe(9100);
    expect(loadConfig({ ROOST_METRICS_PORT: '0', PORT: '0' }).metricsPort).toBe(0);
  });

  it('accepts PORT 0 (ephemeral, tests) and 65535', () => {
    expect(loadConfig({ PORT: '0' }).port).toBe(0);
    expect(loadConfig({ PORT: '65535' }).port).toBe(65535);
  });
});

describe('loadConfig: a transaction pooler in front of Postgres', () => {
  const env = { DATABASE_URL: PG, ROOST_ADMIN_TOKEN: TOKEN };

  it('assumes none, with named prepared statements', () => {
    expect(loadConfig(env).db).toMatchObject({ pooler: 'none', preparedStatements: true });
  });

  it('ROOST_DB_POOLER=transaction turns named statements off unless ROOST_DB_PREPARED_STATEMENTS says on', () => {
    expect(loadConfig({ ...env, ROOST_DB_POOLER: 'transaction' }).db).toMatchObject({
      pooler: 'transaction',
      preparedStatements: false,
    });
    expect(
      loadConfig({ ...env, ROOST_DB_POOLER: 'transaction', ROOST_DB_PREPARED_STATEMENTS: 'auto' }).db
        .preparedStatements,
    ).toBe(false);
    expect(
      loadConfig({ ...env, ROOST_DB_POOLER: 'transaction', ROOST_DB_PREPARED_STATEMENTS: 'on' }).db.preparedStatements,
    ).toBe(true);
  });

  it('ROOST_DB_PREPARED_STATEMENTS=off works without a pooler too', () => {
    expect(loadConfig({ ...env, ROOST_DB_PREPARED_STATEMENTS: 'off' }).db).toMatchObject({
      pooler: 'none',
      preparedStatements: false,
    });
  });
});

describe('loadConfig: each invalid variable gives a ConfigError naming it', () => {
  it.each<[string, string, Record<string, string>]>([
    ['PORT=abc', 'PORT', { PORT: 'abc' }],
    ['PORT=70000', 'PORT', { PORT: '70000' }],
    ['PORT=-1', 'PORT', { PORT: '-1' }],
    ['PORT=80.5', 'PORT', { PORT: '80.5' }],
    ['PORT=1e3', 'PORT', { PORT: '1e3' }],
    ['DATABASE_URL=mysql://x', 'DATABASE_URL', { DATABASE_URL: 'mysql://x' }],
    ['DATABASE_URL not a URL', 'DATABASE_URL', { DATABASE_URL: 'not a url' }],
    ['REDIS_URL=http://x', 'REDIS_URL', { REDIS_URL: 'http://x' }],
    ['ROOST_ROLE=nope', 'ROOST_ROLE', { ROOST_ROLE: 'nope' }],
    ['ROOST_ROLE=API (case-sensitive)', 'ROOST_ROLE', { ROOST_ROLE: 'API' }],
    ['ROOST_ROLE=api without DATABASE_URL', 'DATABASE_URL', { ROOST_ROLE: 'api', REDIS_URL: 'redis://r' }],
    [
      'ROOST_ROLE=worker without REDIS_URL',
      'REDIS_URL',
      { ROOST_ROLE: 'worker', DATABASE_URL: PG, ROOST_ADMIN_TOKEN: TOKEN },
    ],
    ['ROOST_ADMIN_TOKEN_HASH not hex', 'ROOST_ADMIN_TOKEN_HASH', { ROOST_ADMIN_TOKEN_HASH: 'z'.repeat(64) }],
    [
      'ROOST_ADMIN_TOKEN_HASH upper-case hex',
      'ROOST_ADMIN_TOKEN_HASH',
      { ROOST_ADMIN_TOKEN_HASH: sha256('x').toUpperCase() },
    ],
    ['ROOST_ADMIN_TOKEN_HASH 63 chars', 'ROOST_ADMIN_TOKEN_HASH', { ROOST_ADMIN_TOKEN_HASH: sha256('x').slice(1) }],
    ['DATABASE_URL set without any admin token', 'ROOST_ADMIN_TOKEN', { DATABASE_URL: PG }],
    ['ROOST_ADMIN_TOKEN shorter than 16', 'ROOST_ADMIN_TOKEN', { ROOST_ADMIN_TOKEN: 'short' }],
    ['ROOST_NETWORK with uppercase', 'ROOST_NETWORK', { ROOST_NETWORK: 'Roost' }],
    ['ROOST_NETWORK starting with -', 'ROOST_NETWORK', { ROOST_NETWORK: '-roost' }],
    ['ROOST_NETWORK of 65 chars', 'ROOST_NETWORK', { ROOST_NETWORK: 'a'.repeat(65) }],
    ['ROOST_PUBLIC_URL ftp://', 'ROOST_PUBLIC_URL', { ROOST_PUBLIC_URL: 'ftp://x' }],
    ['ROOST_LOG_LEVEL=loud', 'ROOST_LOG_LEVEL', { ROOST_LOG_LEVEL: 'loud' }],
    ['ROOST_DB_POOL_SIZE=1', 'ROOST_DB_POOL_SIZE', { ROOST_DB_POOL_SIZE: '1' }],
    ['ROOST_DB_POOL_MIN=-1', 'ROOST_DB_POOL_MIN', { ROOST_DB_POOL_MIN: '-1' }],
    ['ROOST_DB_STATEMENT_TIMEOUT_MS=5', 'ROOST_DB_STATEMENT_TIMEOUT_MS', { ROOST_DB_STATEMENT_TIMEOUT_MS: '5' }],
    ['ROOST_DB_POOLER=pgbouncer', 'ROOST_DB_POOLER', { ROOST_DB_POOLER: 'pgbouncer' }],
    ['ROOST_DB_POOLER=session', 'ROOST_DB_POOLER', { ROOST_DB_POOLER: 'session' }],
    ['ROOST_DB_PREPARED_STATEMENTS=false', 'ROOST_DB_PREPARED_STATEMENTS', { ROOST_DB_PREPARED_STATEMENTS: 'false' }],
    ['ROOST_ACCEPT_BATCH_MAX=0', 'ROOST_ACCEPT_BATCH_MAX', { ROOST_ACCEPT_BATCH_MAX: '0' }],
    ['ROOST_ACCEPT_WRITERS=65', 'ROOST_ACCEPT_WRITERS', { ROOST_ACCEPT_WRITERS: '65' }],
    ['ROOST_HTTP_REQUEST_TIMEOUT_MS=x', 'ROOST_HTTP_REQUEST_TIMEOUT_MS', { ROOST_HTTP_REQUEST_TIMEOUT_MS: 'x' }],
    ['ROOST_METRICS_PORT=70000', 'ROOST_METRICS_PORT', { ROOST_METRICS_PORT: '70000' }],
    ['ROOST_METRICS_PORT=x', 'ROOST_METRICS_PORT', { ROOST_METRICS_PORT: 'x' }],
    ['ROOST_METRICS_PORT equal to PORT', 'ROOST_METRICS_PORT', { ROOST_METRICS_PORT: '8025', PORT: '8025' }],
    ['ROOST_SHUTDOWN_TIMEOUT_MS=-5', 'ROOST_SHUTDOWN_TIMEOUT_MS', { ROOST_SHUTDOWN_TIMEOUT_MS: '-5' }],
  ])('%s → ConfigError(%s)', (_what, variable, env) => {
    const error = configError(env);
    expect(error.variable).toBe(variable);
    expect(error.message.startsWith(`${variable}: `)).toBe(true);
  });

  it('ROOST_NETWORK of exactly 64 characters is accepted', () => {
    expect(loadConfig({ ROOST_NETWORK: `a${'-'.repeat(63)}` }).network).toHaveLength(64);
  });

  it('does not echo the admin token in its error', () => {
    const secret = 'tiny-secret';
    expect(configError({ ROOST_ADMIN_TOKEN: secret }).message).not.toContain(secret);
  });
});

describe('loadConfig: limits (EXTENSIONS.md §7)', () => {
  it('defaults: 8 sockets per agent, 8 replays at once at 5,000 frames/s, 10 auth failures/s (burst 50), no trusted proxy', () => {
    const config = loadConfig({});
    expect(config.gateway.maxSocketsPerAgent).toBe(8);
    expect(config.gateway.replayConcurrency).toBe(8);
    expect(config.gateway.replayFramesPerSecond).toBe(5_000);
    expect(config.authFail).toEqual({ perSecond: 10, burst: 50 });
    expect(config.trustedProxies).toEqual([]);
  });

  it('parses ROOST_TRUSTED_PROXIES as addresses and CIDR blocks of either family', () => {
    expect(loadConfig({ ROOST_TRUSTED_PROXIES: '10.0.0.0/8, 192.168.1.7 ,::1/128,fd00::/8' }).trustedProxies).toEqual([
      { address: '10.0.0.0', prefix: 8, family: 'ipv4' },
      { address: '192.168.1.7', prefix: 32, family: 'ipv4' },
      { address: '::1', prefix: 128, family: 'ipv6' },
      { address: 'fd00::', prefix: 8, family: 'ipv6' },
    ]);
  });

  it.each(['10.0.0.0/33', 'example.com', '10.0.0.0/8/1', '::1/129', '10.0.0.0/x', '10.0.0/8'])(
    'refuses ROOST_TRUSTED_PROXIES=%s naming the variable',
    (value) => {
      expect(configError({ ROOST_TRUSTED_PROXIES: value }).variable).toBe('ROOST_TRUSTED_PROXIES');
    },
  );

  it.each([
    ['ROOST_WS_MAX_PER_AGENT', '-1'],
    ['ROOST_WS_REPLAY_CONCURRENCY', 'many'],
    ['ROOST_WS_REPLAY_FRAMES_PER_S', '1.5'],
    ['ROOST_AUTH_FAIL_LIMIT_PER_S', '-3'],
  ])('refuses %s=%s naming the variable', (variable, value) => {
    expect(configError({ [variable]: value }).variable).toBe(variable);
  });

  it('0 disables each bound', () => {
    const config = loadConfig({
      ROOST_WS_MAX_PER_AGENT: '0',
      ROOST_WS_REPLAY_CONCURRENCY: '0',
      ROOST_WS_REPLAY_FRAMES_PER_S: '0',
      ROOST_AUTH_FAIL_LIMIT_PER_S: '0',
    });
    expect([
      config.gateway.maxSocketsPerAgent,
      config.gateway.replayConcurrency,
      config.gateway.replayFramesPerSecond,
      config.authFail.perSecond,
    ]).toEqual([0, 0, 0, 0]);
  });
});
