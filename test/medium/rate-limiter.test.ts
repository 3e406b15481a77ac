import type Redis from 'ioredis';
import { loadConfig } from '#config';
import { RateLimiter } from '#core';
import { ulid } from '#domain';
import { Metrics } from '#metrics';
import { testRedisUrl } from '../support/services';

/**
 * The per-agent limiter on Redis (EXTENSIONS.md §7) takes every send's token before anything else.
 * The senders one commit answers send again in the same event-loop turn, so their scripts must go
 * to Redis as one write: one write and one read per send cost the accept path half again its CPU
 * (docs/benchmarks.md, 2026-12-06 morning).
 */
describe('the per-agent rate limiter on Redis', () => {
  const limiters: RateLimiter[] = [];
  const limiter = (perSecond: number, burst: number, prefix: string) => {
    const made = new RateLimiter(
      loadConfig({
        DATABASE_URL: 'postgres://unused@127.0.0.1:1/unused',
        ROOST_ADMIN_TOKEN: 'unused-admin-token',
        REDIS_URL: testRedisUrl(),
        ROOST_REDIS_PREFIX: prefix,
        ROOST_RATE_LIMIT_PER_S: String(perSecond),
        ROOST_RATE_LIMIT_BURST: String(burst),
      }),
      new Metrics(),
    );
    limiters.push(made);
    return made;
  };
  /** Until its connection is up the limiter lets everything pass (no offline queue): wait for it. */
  const ready = async (made: RateLimiter) => {
    const redis = (made as unknown as { redis: Redis }).redis;
    if (redis.status !== 'ready') await new Promise((resolve) => redis.once('ready', resolve));
  };
  /** The limiter's connection, with a count of the writes made on its socket. */
  const writesOf = (made: RateLimiter) => {
    const redis = (made as unknown as { redis: Redis }).redis;
    const stream = (redis as unknown as { stream: { write: (...args: unknown[]) => boolean } }).stream;
    const write = stream.write.bind(stream);
    const counter = { writes: 0 };
    stream.write = (...args: unknown[]) => {
      counter.writes++;
      return write(...args);
    };
    return counter;
  };
  const outcome = (take: Promise<void>) =>
    take.then(
      () => 'passed',
      (error: Error & { status?: number }) => (error.status === 429 ? 'limited' : `failed: ${error.message}`),
    );

  afterAll(() => {
    for (const made of limiters) made.onApplicationShutdown();
  });

  it("the takes of one event-loop turn reach Redis in one write, each agent's bucket kept apart", async () => {
    const prefix = `roost-test-${ulid()}:`;
    const made = limiter(1, 3, prefix);
    await ready(made);
    await made.take(1); // the script loaded
    const counter = writesOf(made);
    // 20 agents once each, and agent 2 five times more (its burst of 3 includes its first take).
    const takes = [...Array.from({ length: 20 }, (_, i) => 100 + i), 2, 2, 2, 2, 2].map((agent) =>
      outcome(made.take(agent)),
    );
    const outcomes = await Promise.all(takes);
    expect(counter.writes).toBe(1);
    expect(outcomes.slice(0, 20)).toEqual(Array(20).fill('passed'));
    expect(outcomes.slice(20)).toEqual(['passed', 'passed', 'passed', 'limited', 'limited']);
  });

  it('the bucket is shared by every node: a second limiter (another api node) sees the tokens taken', async () => {
    const prefix = `roost-test-${ulid()}:`;
    const [a, b] = [limiter(1, 4, prefix), limiter(1, 4, prefix)];
    await Promise.all([ready(a), ready(b)]);
    const first = await Promise.all([1, 2].map(() => outcome(a.take(7))));
    const second = await Promise.all([1, 2, 3].map(() => outcome(b.take(7))));
    expect(first).toEqual(['passed', 'passed']);
    expect(second).toEqual(['passed', 'passed', 'limited']);
  });
});
