import type { Logger } from '@nestjs/common';
import Redis from 'ioredis';
import { RedisOutage } from './redis-outage';

/** A limiter's scripts, by the command name each is defined as on its connection. */
export type LimiterScripts = Record<string, { lua: string; numberOfKeys?: number }>;

/** What a limiter keeps in Redis: its connection (none without Redis) and whether Redis is down. */
export interface LimiterRedis<R extends Redis> {
  redis: R | undefined;
  outage: RedisOutage;
}

/**
 * The connection of a limiter that shares its state through Redis (per-agent requests, auth
 * failures, sockets per agent) and the outage that tells it when to keep its per-node fallback.
 * A limiter must never hold a request up: one retry, no offline queue (a command while
 * disconnected fails at once), a 500 ms command timeout (a frozen Redis), connection errors left
 * to the outage rather than logged per attempt. While it is down a `PING` on the same connection
 * asks whether Redis answers again, and each failed one is counted as the limiter counts its
 * failed commands (`roost_redis_errors_total{component}`).
 */
export function limiterRedis<R extends Redis>(options: {
  /** `null`, or a limiter switched off: no connection, and the outage never starts. */
  url: string | null;
  scripts: LimiterScripts;
  logger: Logger;
  /** What the limiter does while Redis is down, e.g. "agent requests are limited per node". */
  meanwhile: string;
  countError: () => void;
}): LimiterRedis<R> {
  let redis: R | undefined;
  if (options.url !== null) {
    const connection = new Redis(options.url, {
      maxRetriesPerRequest: 1,
      enableOfflineQueue: false,
      commandTimeout: 500,
    });
    connection.on('error', () => undefined);
    for (const [name, script] of Object.entries(options.scripts)) connection.defineCommand(name, script);
    redis = connection as R;
  }
  const outage = new RedisOutage(options.logger, options.meanwhile, () => redis!.ping(), options.countError);
  return { redis, outage };
}
