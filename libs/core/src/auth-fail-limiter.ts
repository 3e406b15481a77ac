import { Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import { InjectConfig, type Config } from '#config';
import { AsmtpError } from '#domain';
import { Metrics } from '#metrics';
import { ClientAddresses } from './client-address';
import { type BucketsRedis, TOKEN_BUCKETS } from './rate-limiter';
import { limiterRedis } from './limiter-redis';
import type { RedisOutage } from './redis-outage';

interface Bucket {
  tokens: number;
  at: number;
}

/** Addresses remembered as over their limit (per node), and local buckets, before pruning. */
const MAX_TRACKED = 100_000;

/**
 * Requests that fail authentication, limited per client address (EXTENSIONS.md §7): a token bucket
 * of `ROOST_AUTH_FAIL_LIMIT_PER_S` (burst 5×) shared by every node through Redis, taken once per
 * `401`. Past it the address gets `429 RATE_LIMITED` for the bucket's `Retry-After`, and while that
 * lasts this node answers its requests without Redis or Postgres, valid token or not (an address
 * guessing tokens cannot be told from one presenting a good one without the lookup it must not
 * cost). With Redis down each node keeps its own buckets.
 */
@Injectable()
export class AuthFailLimiter implements OnApplicationShutdown {
  private readonly logger = new Logger('auth-fail-limit');
  private readonly outage: RedisOutage;
  private readonly redis: BucketsRedis | undefined;
  private readonly addresses: ClientAddresses;
  private readonly blockedUntil = new Map<string, number>();
  private readonly buckets = new Map<string, Bucket>();
  private readonly perSecond: number;
  /** A failed Redis command or probe, in `roost_redis_errors_total{component="auth_fail_limit"}`. */
  private readonly countError = () => this.metrics.redisErrors.inc({ component: 'auth_fail_limit' });
  private readonly burst: number;
  private readonly prefix: string;

  constructor(
    @InjectConfig() config: Config,
    private readonly metrics: Metrics,
  ) {
    this.perSecond = config.authFail.perSecond;
    this.burst = config.authFail.burst;
    this.prefix = `${config.redisPrefix}authfail:`;
    this.addresses = new ClientAddresses(config.trustedProxies);
    ({ redis: this.redis, outage: this.outage } = limiterRedis<BucketsRedis>({
      url: this.perSecond > 0 ? config.redisUrl : null,
      scripts: { roostTokenBuckets: { lua: TOKEN_BUCKETS } },
      logger: this.logger,
      meanwhile: 'auth failures are limited per node',
      countError: this.countError,
    }));
  }

  /** The address a request's auth failures count against (`X-Forwarded-For` from trusted proxies only). */
  addressOf(peer: string | undefined, forwardedFor: string | string[] | undefined): string {
    return this.addresses.of(peer, forwardedFor);
  }

  /**
   * Run one authentication for a request from `address`. A `401` takes a token from the address's
   * bucket; with none left it becomes `429 RATE_LIMITED`, and so does every request from the
   * address until the bucket has a token again.
   */
  async guard<T>(address: string, authenticate: () => Promise<T>): Promise<T> {
    if (this.perSecond === 0) return authenticate();
    const until = this.blockedUntil.get(address);
    if (until !== undefined) {
      const waitMs = until - Date.now();
      if (waitMs > 0) throw this.limited(waitMs);
      this.blockedUntil.delete(address);
    }
    try {
      return await authenticate();
    } catch (error) {
      if (!(error instanceof AsmtpError) || error.status !== 401) throw error;
      const waitMs = await this.take(address);
      if (waitMs <= 0) throw error;
      if (this.blockedUntil.size >= MAX_TRACKED) this.forgetExpired(Date.now());
      this.blockedUntil.set(address, Date.now() + waitMs);
      throw this.limited(waitMs);
    }
  }

  private limited(waitMs: number): AsmtpError {
    this.metrics.rateLimited.inc({ limit: 'auth_fail' });
    return new AsmtpError(429, 'RATE_LIMITED', 'too many failed authentications from this address', undefined, {
      'retry-after': String(Math.max(1, Math.ceil(waitMs / 1000))),
    });
  }

  private async take(address: string): Promise<number> {
    if (this.redis && !this.outage.down) {
      try {
        const [wait] = await this.redis.roostTokenBuckets(1, `${this.prefix}${address}`, this.perSecond, this.burst);
        const waitMs = Number(wait);
        this.outage.succeeded();
        return waitMs;
      } catch (error) {
        this.countError();
        this.outage.failed(error);
      }
    }
    return this.takeLocal(address, Date.now());
  }

  private takeLocal(address: string, now: number): number {
    const bucket = this.buckets.get(address) ?? { tokens: this.burst, at: now };
    bucket.tokens = Math.min(this.burst, bucket.tokens + ((now - bucket.at) * this.perSecond) / 1000);
    bucket.at = now;
    let wait = 0;
    if (bucket.tokens >= 1) bucket.tokens -= 1;
    else wait = Math.ceil(((1 - bucket.tokens) * 1000) / this.perSecond);
    this.buckets.set(address, bucket);
    if (this.buckets.size > MAX_TRACKED) this.forgetFull(now);
    return wait;
  }

  private forgetFull(now: number): void {
    for (const [address, bucket] of this.buckets) {
      if (bucket.tokens + ((now - bucket.at) * this.perSecond) / 1000 >= this.burst) this.buckets.delete(address);
    }
  }

  private forgetExpired(now: number): void {
    for (const [address, until] of this.blockedUntil) if (until <= now) this.blockedUntil.delete(address);
  }

  onApplicationShutdown(): void {
    this.outage.close();
    this.redis?.disconnect();
  }
}
