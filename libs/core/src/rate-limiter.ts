import { Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import type Redis from 'ioredis';
import { InjectConfig, type Config } from '#config';
import { AsmtpError } from '#domain';
import { Metrics } from '#metrics';
import { Coalescer } from './coalescer';
import { limiterRedis } from './limiter-redis';
import type { RedisOutage } from './redis-outage';

/**
 * Token buckets (EXTENSIONS.md §7): `burst` tokens, refilled at `perSecond`, one atomic script on
 * the server's clock, so every api node shares each bucket. One token from each key of KEYS in
 * order (a key named twice gives two), on one reading of the clock: the per-agent limiter sends
 * the takes of one event-loop turn in one call, the auth-failure limiter one key. Returns each
 * take's wait in ms. The buckets are hashes (`tokens`, `at`), as the single-key script of earlier
 * releases kept them, so nodes of both share them during a rolling upgrade.
 */
export const TOKEN_BUCKETS = `
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = math.ceil(burst * 1000 / rate) + 1000
local waits = {}
for i, key in ipairs(KEYS) do
  local state = redis.call('HMGET', key, 'tokens', 'at')
  local tokens = tonumber(state[1])
  local at = tonumber(state[2])
  if tokens == nil then tokens = burst; at = now end
  tokens = math.min(burst, tokens + math.max(0, now - at) * rate / 1000)
  local wait = 0
  if tokens >= 1 then tokens = tokens - 1 else wait = math.ceil((1 - tokens) * 1000 / rate) end
  redis.call('HSET', key, 'tokens', tostring(tokens), 'at', now)
  redis.call('PEXPIRE', key, ttl)
  waits[i] = wait
end
return waits
`;

/** Takes one script call carries at most (a larger turn makes several calls). */
const TAKES_PER_CALL = 256;
/** Script calls out at once; takes made meanwhile wait for one to return and join the next. */
const CALLS_IN_FLIGHT = 4;

/** A connection with TOKEN_BUCKETS defined as `roostTokenBuckets`. */
export type BucketsRedis = Redis & {
  roostTokenBuckets(keys: number, ...keysThenArgs: Array<string | number>): Promise<number[]>;
};

interface Bucket {
  tokens: number;
  at: number;
}

@Injectable()
export class RateLimiter implements OnApplicationShutdown {
  private readonly logger = new Logger('rate-limit');
  private readonly redis: BucketsRedis | undefined;
  /** While Redis does not answer, each node keeps the agents' buckets itself (`takeLocal`). */
  private readonly outage: RedisOutage;
  private readonly buckets = new Map<number, Bucket>();
  /** The takes of each event-loop turn, gathered into script calls (`takeShared`). */
  private readonly takes = new Coalescer<number, number>(
    (agentIds) => this.call(agentIds),
    CALLS_IN_FLIGHT,
    TAKES_PER_CALL,
    'turn',
  );
  private readonly perSecond: number;
  /** Failed Redis commands and probes, in `roost_redis_errors_total{component="rate_limit"}`. */
  private readonly countErrors = (errors: number) => this.metrics.redisErrors.inc({ component: 'rate_limit' }, errors);
  private readonly burst: number;
  private readonly prefix: string;

  constructor(
    @InjectConfig() config: Config,
    private readonly metrics: Metrics,
  ) {
    this.perSecond = config.rateLimit.perSecond;
    this.burst = config.rateLimit.burst;
    this.prefix = `${config.redisPrefix}ratelimit:`;
    ({ redis: this.redis, outage: this.outage } = limiterRedis<BucketsRedis>({
      url: this.perSecond > 0 ? config.redisUrl : null,
      scripts: { roostTokenBuckets: { lua: TOKEN_BUCKETS } },
      logger: this.logger,
      meanwhile: 'agent requests are limited per node',
      countError: () => this.countErrors(1),
    }));
  }

  /** Take one token for the agent or throw 429 RATE_LIMITED with the seconds to wait. */
  async take(agentId: number): Promise<void> {
    if (this.perSecond === 0) return;
    const waitMs =
      this.redis && !this.outage.down ? await this.takes.load(agentId) : this.takeLocal(agentId, Date.now());
    if (waitMs > 0) {
      this.metrics.rateLimited.inc({ limit: 'agent' });
      throw new AsmtpError(429, 'RATE_LIMITED', 'too many requests', undefined, {
        'retry-after': String(Math.max(1, Math.ceil(waitMs / 1000))),
      });
    }
  }

  /**
   * Every send takes a token before anything else. The takes of one event-loop turn (the requests
   * one poll of the sockets delivered) go to Redis as one script call (TOKEN_BUCKETS), at most
   * CALLS_IN_FLIGHT calls at once; takes made meanwhile join the next. A call per take cost the
   * accept path half again its CPU with the limiter on, and Redis ~30 µs a call (docs/benchmarks.md,
   * 2026-12-06 night).
   *
   * A limiter outage must not take the API down, nor slow it: when a call fails, its takes (each
   * counted in `roost_redis_errors_total{component="rate_limit"}`) and every take after them until
   * Redis answers a probe again (`RedisOutage`), queued calls included, are decided by this node's
   * buckets without asking Redis.
   */
  private async call(agentIds: number[]): Promise<number[]> {
    if (!this.outage.down) {
      try {
        const waits = await this.redis!.roostTokenBuckets(
          agentIds.length,
          ...agentIds.map((id) => `${this.prefix}${id}`),
          this.perSecond,
          this.burst,
        );
        this.outage.succeeded();
        return agentIds.map((_, i) => Number(waits[i]));
      } catch (error) {
        this.countErrors(agentIds.length);
        this.outage.failed(error);
      }
    }
    const now = Date.now();
    return agentIds.map((id) => this.takeLocal(id, now));
  }

  private takeLocal(agentId: number, now: number): number {
    const bucket = this.buckets.get(agentId) ?? { tokens: this.burst, at: now };
    bucket.tokens = Math.min(this.burst, bucket.tokens + ((now - bucket.at) * this.perSecond) / 1000);
    bucket.at = now;
    let wait = 0;
    if (bucket.tokens >= 1) bucket.tokens -= 1;
    else wait = Math.ceil(((1 - bucket.tokens) * 1000) / this.perSecond);
    this.buckets.set(agentId, bucket);
    if (this.buckets.size > 100_000) this.forgetFull(now);
    return wait;
  }

  /** Buckets that refilled completely carry no state worth keeping. */
  private forgetFull(now: number): void {
    for (const [id, bucket] of this.buckets) {
      if (bucket.tokens + ((now - bucket.at) * this.perSecond) / 1000 >= this.burst) this.buckets.delete(id);
    }
  }

  onApplicationShutdown(): void {
    this.outage.close();
    this.redis?.disconnect();
  }
}
