import { createHash } from 'node:crypto';
import { isIP } from 'node:net';
import { resolve } from 'node:path';

export type Role = 'all' | 'api' | 'gateway' | 'worker';
export const ROLES: readonly Role[] = ['all', 'api', 'gateway', 'worker'];

/** Every setting Roost reads, parsed and validated once at start-up. */
export interface Config {
  role: Role;
  host: string;
  port: number;
  /**
   * Port of the second listener that serves `/metrics`, `/healthz` and `/readyz` on `host`, where
   * the Ingress never routes; 0 = no second listener, `/metrics` stays on `port`.
   */
  metricsPort: number;
  /** Base URL clients use; file URLs start with it (ASMTP.md §7.2). */
  publicUrl: string;
  network: string;
  version: string;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** Postgres URL; null = the embedded PGlite database in `dataDir`. */
  databaseUrl: string | null;
  /** Redis URL; null = in-process bus and timers. */
  redisUrl: string | null;
  redisPrefix: string;
  dataDir: string;
  /** Operator admin token as a SHA-256 hex hash; null = generate one (embedded only). */
  adminTokenHash: string | null;
  adminToken: string | null;
  db: {
    poolSize: number;
    /** Connections opened at start-up (hot statements prepared on each) and kept when idle. */
    poolMin: number;
    statementTimeoutMs: number;
    /**
     * `transaction`: DATABASE_URL is a transaction pooler (PgBouncer `pool_mode = transaction`):
     * no startup parameters, the statement timeout set per transaction, no named statements
     * unless `preparedStatements` says so.
     */
    pooler: 'none' | 'transaction';
    /** Hot queries as named prepared statements (ROOST_DB_PREPARED_STATEMENTS; auto = no pooler). */
    preparedStatements: boolean;
    /** How long start-up waits for an unreachable Postgres before giving up. */
    startupWaitMs: number;
  };
  accept: {
    /** Most envelopes committed in one shared transaction. */
    batchMax: number;
    /** Concurrent accept transactions per process. */
    writers: number;
    /**
     * How long a send's sender lookup is kept for the same token's next sends to the same
     * recipients (ROOST_ACCEPT_KEEP_LOOKUPS_MS; 0: every send looks up afresh).
     */
    keepLookupsMs: number;
  };
  http: {
    requestTimeoutMs: number;
    shutdownTimeoutMs: number;
  };
  streams: {
    /** Fixed partition count of the frame streams (all nodes must agree). */
    partitions: number;
    /** Approximate MAXLEN of each partition stream. */
    maxLen: number;
  };
  schedules: {
    /** Smallest interval of a repeating schedule. */
    minIntervalMs: number;
    /** Most active or paused schedules per agent. */
    perAgent: number;
    /** How often workers look for due schedules. */
    tickMs: number;
    /** How long a firing is leased to one worker before another may take it over. */
    leaseMs: number;
  };
  retention: {
    /** How often the purge job runs. */
    intervalMs: number;
    /** Rows deleted per statement (bounded batches keep locks short). */
    batchSize: number;
  };
  guard: {
    /** Content above this many bytes is flagged `large`. */
    largeBytes: number;
  };
  rateLimit: {
    /** Sustained requests per second per agent; 0 disables the limit. */
    perSecond: number;
    burst: number;
  };
  /** Requests failing authentication, per client address (EXTENSIONS.md §7). */
  authFail: {
    /** Sustained failures per second per address; 0 disables the limit. Burst is 5×. */
    perSecond: number;
    burst: number;
  };
  /** Peers whose `X-Forwarded-For` is believed (load balancers, ingress): CIDR blocks. */
  trustedProxies: Cidr[];
  /** Test-only accelerated clock for schedules: `now = epoch + (real - epoch) * speed`. */
  clock: { speed: number; epochMs: number };
  gateway: {
    pingIntervalMs: number;
    /** Send-buffer bound per socket; past it the socket is closed 4008 (slow consumer). */
    maxBufferedBytes: number;
    /** How often held mailboxes are checked against Postgres (lost frames, revoked tokens). */
    sweepIntervalMs: number;
    /** Largest client frame accepted before the socket is closed (clients send nothing). */
    maxClientFrameBytes: number;
    /** Open sockets per agent across every gateway; 0 = no limit. */
    maxSocketsPerAgent: number;
    /** Resume replays running at once on one gateway (more wait their turn); 0 = no bound. */
    replayConcurrency: number;
    /** Frames per second one socket's replay may send; 0 = no bound. */
    replayFramesPerSecond: number;
  };
}

/** One `ROOST_TRUSTED_PROXIES` entry: an address block. */
export interface Cidr {
  address: string;
  prefix: number;
  family: 'ipv4' | 'ipv6';
}

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    problem: string,
  ) {
    super(`${variable}: ${problem}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

function text(env: Env, name: string, fallback: string): string {
  const value = env[name];
  return value === undefined || value === '' ? fallback : value;
}

function optional(env: Env, name: string): string | null {
  const value = env[name];
  return value === undefined || value === '' ? null : value;
}

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!/^-?\d+$/.test(raw.trim()) || !Number.isSafeInteger(value) || value < min || value > max) {
    throw new ConfigError(name, `expected an integer from ${min} to ${max}, got "${raw}"`);
  }
  return value;
}

function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], fallback: T): T {
  const raw = text(env, name, fallback);
  if (!(allowed as readonly string[]).includes(raw)) {
    throw new ConfigError(name, `expected one of ${allowed.join(', ')}, got "${raw}"`);
  }
  return raw as T;
}

function url(env: Env, name: string, protocols: readonly string[]): string | null {
  const raw = optional(env, name);
  if (raw === null) return null;
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(name, 'not a valid URL');
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(name, `expected a ${protocols.join(' or ')} URL`);
  }
  return raw;
}

/** `10.0.0.0/8, 192.168.1.7, ::1/128`: a comma-separated list of addresses or CIDR blocks. */
function cidrs(env: Env, name: string): Cidr[] {
  const raw = optional(env, name);
  if (raw === null) return [];
  return raw
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '')
    .map((entry) => {
      const [address, prefixText, ...rest] = entry.split('/');
      const version = isIP(address);
      const max = version === 4 ? 32 : 128;
      const prefix = prefixText === undefined ? max : Number(prefixText);
      if (
        version === 0 ||
        rest.length > 0 ||
        (prefixText !== undefined && !/^\d{1,3}$/.test(prefixText)) ||
        prefix > max
      ) {
        throw new ConfigError(name, `"${entry}" is not an IP address or CIDR block`);
      }
      return { address, prefix, family: version === 4 ? 'ipv4' : 'ipv6' };
    });
}

const PACKAGE_VERSION = '0.1.0';

export function loadConfig(env: Env = process.env): Config {
  const role = oneOf(env, 'ROOST_ROLE', ROLES, 'all');
  const databaseUrl = url(env, 'DATABASE_URL', ['postgres:', 'postgresql:']);
  const redisUrl = url(env, 'REDIS_URL', ['redis:', 'rediss:']);
  const embedded = databaseUrl === null;
  if (embedded && role !== 'all') {
    throw new ConfigError('DATABASE_URL', `ROOST_ROLE=${role} needs a shared Postgres; only "all" runs embedded`);
  }
  if (role !== 'all' && redisUrl === null) {
    throw new ConfigError('REDIS_URL', `ROOST_ROLE=${role} needs Redis to reach the other roles`);
  }
  const port = integer(env, 'PORT', 8025, 0, 65535);
  const metricsPort = integer(env, 'ROOST_METRICS_PORT', 9464, 0, 65535);
  if (metricsPort !== 0 && metricsPort === port) {
    throw new ConfigError('ROOST_METRICS_PORT', `must differ from PORT (${port}); 0 serves /metrics on PORT`);
  }
  const host = text(env, 'ROOST_HOST', embedded ? '127.0.0.1' : '0.0.0.0');
  const publicUrl = (url(env, 'ROOST_PUBLIC_URL', ['http:', 'https:']) ?? `http://127.0.0.1:${port}`).replace(
    /\/+$/,
    '',
  );

  const adminToken = optional(env, 'ROOST_ADMIN_TOKEN');
  const adminTokenHashRaw = optional(env, 'ROOST_ADMIN_TOKEN_HASH');
  if (adminTokenHashRaw !== null && !/^[0-9a-f]{64}$/.test(adminTokenHashRaw)) {
    throw new ConfigError('ROOST_ADMIN_TOKEN_HASH', 'expected 64 lowercase hex characters (sha256 of the token)');
  }
  if (!embedded && adminToken === null && adminTokenHashRaw === null) {
    throw new ConfigError('ROOST_ADMIN_TOKEN', 'required with DATABASE_URL (or set ROOST_ADMIN_TOKEN_HASH)');
  }
  if (adminToken !== null && adminToken.length < 16) {
    throw new ConfigError('ROOST_ADMIN_TOKEN', 'must be at least 16 characters');
  }

  const pooler = oneOf(env, 'ROOST_DB_POOLER', ['none', 'transaction'] as const, 'none');
  const prepared = oneOf(env, 'ROOST_DB_PREPARED_STATEMENTS', ['auto', 'on', 'off'] as const, 'auto');

  const network = text(env, 'ROOST_NETWORK', 'roost');
  if (!/^[a-z0-9][a-z0-9_-]{0,63}$/.test(network)) {
    throw new ConfigError('ROOST_NETWORK', 'expected ^[a-z0-9][a-z0-9_-]{0,63}$');
  }

  return {
    role,
    host,
    port,
    metricsPort,
    publicUrl,
    network,
    version: PACKAGE_VERSION,
    logLevel: oneOf(env, 'ROOST_LOG_LEVEL', ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], 'info'),
    databaseUrl,
    redisUrl,
    redisPrefix: text(env, 'ROOST_REDIS_PREFIX', 'roost:'),
    dataDir: resolve(text(env, 'ROOST_DATA_DIR', './.roost')),
    adminToken,
    adminTokenHash:
      adminTokenHashRaw ?? (adminToken === null ? null : createHash('sha256').update(adminToken, 'utf8').digest('hex')),
    db: {
      poolSize: integer(env, 'ROOST_DB_POOL_SIZE', 20, 2, 1000),
      poolMin: integer(env, 'ROOST_DB_POOL_MIN', 4, 0, 1000),
      statementTimeoutMs: integer(env, 'ROOST_DB_STATEMENT_TIMEOUT_MS', 15_000, 100, 3_600_000),
      pooler,
      preparedStatements: prepared === 'auto' ? pooler === 'none' : prepared === 'on',
      startupWaitMs: integer(env, 'ROOST_DB_STARTUP_WAIT_MS', 60_000, 0, 3_600_000),
    },
    accept: {
      batchMax: integer(env, 'ROOST_ACCEPT_BATCH_MAX', 128, 1, 10_000),
      writers: integer(env, 'ROOST_ACCEPT_WRITERS', 4, 1, 64),
      keepLookupsMs: integer(env, 'ROOST_ACCEPT_KEEP_LOOKUPS_MS', 60_000, 0, 3_600_000),
    },
    http: {
      requestTimeoutMs: integer(env, 'ROOST_HTTP_REQUEST_TIMEOUT_MS', 30_000, 1000, 3_600_000),
      shutdownTimeoutMs: integer(env, 'ROOST_SHUTDOWN_TIMEOUT_MS', 10_000, 0, 600_000),
    },
    streams: {
      partitions: integer(env, 'ROOST_STREAM_PARTITIONS', 16, 1, 1024),
      maxLen: integer(env, 'ROOST_STREAM_MAXLEN', 100_000, 100, 100_000_000),
    },
    schedules: {
      minIntervalMs: integer(env, 'ROOST_SCHEDULE_MIN_INTERVAL_MS', 60_000, 1, 365 * 24 * 3_600_000),
      perAgent: integer(env, 'ROOST_SCHEDULES_PER_AGENT', 100, 0, 1_000_000),
      tickMs: integer(env, 'ROOST_SCHEDULE_TICK_MS', 1_000, 10, 3_600_000),
      leaseMs: integer(env, 'ROOST_SCHEDULE_LEASE_MS', 30_000, 100, 3_600_000),
    },
    retention: {
      intervalMs: integer(env, 'ROOST_RETENTION_INTERVAL_MS', 60_000, 100, 24 * 3_600_000),
      batchSize: integer(env, 'ROOST_RETENTION_BATCH', 5_000, 1, 1_000_000),
    },
    guard: {
      largeBytes: integer(env, 'ROOST_GUARD_LARGE_BYTES', 16 * 1024, 1, 1024 * 1024 * 1024),
    },
    rateLimit: {
      perSecond: integer(env, 'ROOST_RATE_LIMIT_PER_S', 100, 0, 1_000_000),
      burst: integer(env, 'ROOST_RATE_LIMIT_BURST', 300, 1, 10_000_000),
    },
    authFail: (() => {
      const perSecond = integer(env, 'ROOST_AUTH_FAIL_LIMIT_PER_S', 10, 0, 1_000_000);
      return { perSecond, burst: perSecond * 5 };
    })(),
    trustedProxies: cidrs(env, 'ROOST_TRUSTED_PROXIES'),
    clock: {
      speed: integer(env, 'ROOST_CLOCK_SPEED', 1, 1, 100_000),
      epochMs: integer(env, 'ROOST_CLOCK_EPOCH_MS', 0, 0, Number.MAX_SAFE_INTEGER),
    },
    gateway: {
      pingIntervalMs: integer(env, 'ROOST_WS_PING_INTERVAL_MS', 25_000, 100, 3_600_000),
      maxBufferedBytes: integer(env, 'ROOST_WS_MAX_BUFFERED_BYTES', 1024 * 1024, 1024, 1024 * 1024 * 1024),
      sweepIntervalMs: integer(env, 'ROOST_WS_SWEEP_INTERVAL_MS', 5_000, 100, 3_600_000),
      maxClientFrameBytes: integer(env, 'ROOST_WS_MAX_CLIENT_FRAME_BYTES', 64 * 1024, 128, 16 * 1024 * 1024),
      maxSocketsPerAgent: integer(env, 'ROOST_WS_MAX_PER_AGENT', 8, 0, 100_000),
      replayConcurrency: integer(env, 'ROOST_WS_REPLAY_CONCURRENCY', 8, 0, 10_000),
      replayFramesPerSecond: integer(env, 'ROOST_WS_REPLAY_FRAMES_PER_S', 5_000, 0, 10_000_000),
    },
  };
}
