import { Injectable, Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import type Redis from 'ioredis';
import { InjectConfig, type Config } from '#config';
import { limiterRedis, type RedisOutage } from '#core';
import { AsmtpError, ulid } from '#domain';
import { Metrics } from '#metrics';

/** A lease lives this long unless its gateway renews it: a gateway that dies frees its agents' slots. */
export const LEASE_TTL_MS = 30_000;
const HEARTBEAT_MS = 10_000;

/**
 * One sorted set per agent: member = a socket's lease, score = when it expires (Redis clock).
 * Expired leases are dropped, the rest counted; under the cap the new lease is added.
 * Returns [1, 0] when granted, [0, ms until the oldest lease expires] when refused.
 */
const ACQUIRE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {0, math.max(0, tonumber(oldest[2]) - now)}
end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[2])
redis.call('PEXPIRE', KEYS[1], ttl)
return {1, 0}
`;

/** Renew every lease this gateway holds for one agent (and re-add them after a Redis restart). */
const RENEW = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], now + ttl, ARGV[i]) end
redis.call('PEXPIRE', KEYS[1], ttl)
return 0
`;

type LeaseRedis = Redis & {
  roostAcquireLease(key: string, max: number, member: string, ttl: number): Promise<[number, number]>;
  roostRenewLeases(key: string, ttl: number, ...members: string[]): Promise<number>;
};

/** One open socket's claim on its agent's `ROOST_WS_MAX_PER_AGENT` slots. */
export interface SocketLease {
  agentId: number;
  member: string;
}

/**
 * Per-agent socket cap across every gateway (EXTENSIONS.md §7). Each socket holds a lease in its
 * agent's sorted set in Redis, renewed by its gateway every 10 s and expiring 30 s after the last
 * renewal, so the sockets of a gateway that died stop counting within 30 s. With Redis unreachable
 * (or no Redis: embedded) each gateway caps the sockets it holds itself.
 */
@Injectable()
export class SocketLeases implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('ws-limit');
  private readonly outage: RedisOutage;
  private readonly redis: LeaseRedis | undefined;
  private readonly gatewayId = ulid();
  private readonly held = new Map<number, Set<string>>();
  private readonly max: number;
  /** A failed Redis command or probe, in `roost_redis_errors_total{component="ws_limit"}`. */
  private readonly countError = () => this.metrics.redisErrors.inc({ component: 'ws_limit' });
  private readonly prefix: string;
  private next = 0;
  private heartbeat: NodeJS.Timeout | undefined;

  constructor(
    @InjectConfig() config: Config,
    private readonly metrics: Metrics,
  ) {
    this.max = config.gateway.maxSocketsPerAgent;
    this.prefix = `${config.redisPrefix}ws:sockets:`;
    ({ redis: this.redis, outage: this.outage } = limiterRedis<LeaseRedis>({
      url: this.max > 0 ? config.redisUrl : null,
      scripts: {
        roostAcquireLease: { numberOfKeys: 1, lua: ACQUIRE },
        roostRenewLeases: { numberOfKeys: 1, lua: RENEW },
      },
      logger: this.logger,
      meanwhile: 'sockets per agent are capped per gateway',
      countError: this.countError,
    }));
  }

  onModuleInit(): void {
    if (this.redis) this.heartbeat = setInterval(() => void this.renew(), HEARTBEAT_MS).unref();
  }

  /** Redis key of an agent's leases (tests read it). */
  keyOf(agentId: number): string {
    return `${this.prefix}${agentId}`;
  }

  /** A slot for one more socket of the agent, or `429 RATE_LIMITED` with `Retry-After`. */
  async acquire(agentId: number): Promise<SocketLease | undefined> {
    if (this.max === 0) return undefined;
    const lease = { agentId, member: `${this.gatewayId}:${++this.next}` };
    const waitMs = await this.claim(lease);
    if (waitMs !== undefined) {
      this.metrics.rateLimited.inc({ limit: 'ws' });
      throw new AsmtpError(429, 'RATE_LIMITED', `at most ${this.max} open sockets per agent`, undefined, {
        'retry-after': String(Math.max(1, Math.ceil(waitMs / 1000))),
      });
    }
    let members = this.held.get(agentId);
    if (!members) this.held.set(agentId, (members = new Set()));
    members.add(lease.member);
    return lease;
  }

  /** The socket closed (or never opened): its slot is free at once. */
  release(lease: SocketLease | undefined): void {
    if (!lease) return;
    const members = this.held.get(lease.agentId);
    if (!members?.delete(lease.member)) return;
    if (members.size === 0) this.held.delete(lease.agentId);
    // If this fails the lease expires on its own (LEASE_TTL_MS).
    this.redis?.zrem(this.keyOf(lease.agentId), lease.member).catch(() => undefined);
  }

  /** undefined when granted; otherwise the milliseconds until a slot may free up. */
  private async claim(lease: SocketLease): Promise<number | undefined> {
    if (this.redis && !this.outage.down) {
      try {
        const [granted, waitMs] = await this.redis.roostAcquireLease(
          this.keyOf(lease.agentId),
          this.max,
          lease.member,
          LEASE_TTL_MS,
        );
        this.outage.succeeded();
        return granted === 1 ? undefined : Math.max(1_000, waitMs);
      } catch (error) {
        this.countError();
        this.outage.failed(error);
      }
    }
    return (this.held.get(lease.agentId)?.size ?? 0) < this.max ? undefined : HEARTBEAT_MS;
  }

  /** Renew (or, after a Redis restart, restore) every lease held here, one pipeline. */
  private async renew(): Promise<void> {
    if (!this.redis || this.held.size === 0) return;
    const pipeline = this.redis.pipeline() as ReturnType<Redis['pipeline']> & {
      roostRenewLeases(key: string, ttl: number, ...members: string[]): unknown;
    };
    for (const [agentId, members] of this.held)
      pipeline.roostRenewLeases(this.keyOf(agentId), LEASE_TTL_MS, ...members);
    try {
      const results = (await pipeline.exec()) ?? [];
      const failed = results.find(([error]) => error !== null)?.[0];
      if (failed) throw failed;
      this.outage.succeeded();
    } catch (error) {
      this.countError();
      this.outage.failed(error);
    }
  }

  /** Free this gateway's slots at once, so its clients reconnecting elsewhere are not refused. */
  async onApplicationShutdown(): Promise<void> {
    clearInterval(this.heartbeat);
    this.outage.close();
    if (this.redis && this.held.size > 0) {
      const pipeline = this.redis.pipeline();
      for (const [agentId, members] of this.held) pipeline.zrem(this.keyOf(agentId), ...members);
      this.held.clear();
      await pipeline.exec().catch(() => undefined);
    }
    this.redis?.disconnect();
  }
}
