import type Redis from 'ioredis';
import { loadConfig } from '#config';
import { RateLimiter } from '#core';
import { ulid } from '#domain';
import { Metrics } from '#metrics';
import { testRedisUrl } from '../support/services';
import { RedisServer } from '../e2e/cluster';

/**
 * The per-agent limiter on Redis (EXTENSIONS.md §7) takes every send's token before anything else.
 * The senders one commit answers send again in the same event-loop turn, so their takes must go to
 * Redis as one script call: a call (a write and a read) per send cost the accept path half again
 * its CPU (docs/benchmarks.md, 2026-12-06 night).
 */
describe('the per-agent rate limiter on Redis', () => {
  const limiters: RateLimiter[] = [];
  const limiter = (perSecond: number, burst: number, prefix: string, redisUrl = testRedisUrl()) => {
    const made = new RateLimiter(
      loadConfig({
        DATABASE_URL: 'postgres://unused@127.0.0.1:1/unused',
        ROOST_ADMIN_TOKEN: 'unused-admin-token',
        REDIS_URL: redisUrl,
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
  /** The limiter's connection, with a count of the commands sent and of the writes made on its socket. */
  const countsOf = (made: RateLimiter) => {
    const redis = (made as unknown as { redis: Redis }).redis;
    const stream = (redis as unknown as { stream: { write: (...args: unknown[]) => boolean } }).stream;
    const write = stream.write.bind(stream);
    const sendCommand = redis.sendCommand.bind(redis);
    const counts = { writes: 0, commands: 0, pings: 0 };
    stream.write = (...args: unknown[]) => {
      counts.writes++;
      return write(...args);
    };
    redis.sendCommand = (...args: Parameters<Redis['sendCommand']>) => {
      if (args[0].name === 'ping') counts.pings++;
      else counts.commands++;
      return sendCommand(...args);
    };
    return counts;
  };
  const outcome = (take: Promise<void>) =>
    take.then(
      () => 'passed',
      (error: Error & { status?: number }) => (error.status === 429 ? 'limited' : `failed: ${error.message}`),
    );

  afterAll(() => {
    for (const made of limiters) made.onApplicationShutdown();
  });

  it("the takes of one event-loop turn reach Redis as one script call, each agent's bucket kept apart", async () => {
    const prefix = `roost-test-${ulid()}:`;
    const made = limiter(1, 3, prefix);
    await ready(made);
    await made.take(1); // the script loaded
    const counts = countsOf(made);
    // 20 agents once each, and agent 2 five times more (its burst of 3 includes its first take).
    const takes = [...Array.from({ length: 20 }, (_, i) => 100 + i), 2, 2, 2, 2, 2].map((agent) =>
      outcome(made.take(agent)),
    );
    const outcomes = await Promise.all(takes);
    expect(counts).toEqual({ commands: 1, writes: 1, pings: 0 });
    expect(outcomes.slice(0, 20)).toEqual(Array(20).fill('passed'));
    expect(outcomes.slice(20)).toEqual(['passed', 'passed', 'passed', 'limited', 'limited']);
  });

  it('takes made in separate callbacks of one turn (as requests are) share a call', async () => {
    const made = limiter(1, 5, `roost-test-${ulid()}:`);
    await ready(made);
    await made.take(1);
    const counts = countsOf(made);
    const outcomes = await Promise.all(
      Array.from(
        { length: 10 },
        (_, i) => new Promise<string>((resolve) => setImmediate(() => resolve(outcome(made.take(200 + i))))),
      ),
    );
    expect(outcomes).toEqual(Array(10).fill('passed'));
    expect(counts.commands).toBe(1);
  });

  it('a turn of more takes than one call carries is split into calls of 256, each take answered', async () => {
    const made = limiter(1, 1, `roost-test-${ulid()}:`);
    await ready(made);
    await made.take(1);
    const counts = countsOf(made);
    const outcomes = await Promise.all(Array.from({ length: 600 }, (_, i) => outcome(made.take(1000 + (i % 300)))));
    expect(counts.commands).toBe(3);
    // 300 agents twice each, burst 1: each agent's first take passes, its second waits.
    expect(outcomes.slice(0, 300)).toEqual(Array(300).fill('passed'));
    expect(outcomes.slice(300)).toEqual(Array(300).fill('limited'));
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

  it("a frozen Redis (SIGSTOP): one call waits out its timeout, then takes use this node's buckets without asking it, until it answers again", async () => {
    const server = await RedisServer.start();
    const made = limiter(1, 3, `roost-test-${ulid()}:`, server.url);
    try {
      await ready(made);
      expect(await outcome(made.take(7))).toBe('passed'); // the shared bucket: 2 left
      const counts = countsOf(made);

      server.pause();
      let started = performance.now();
      // The first call meets the freeze and fails after the command timeout (500 ms); its take is
      // decided by this node's bucket for agent 7, full (3) as nothing was taken from it before.
      expect(await outcome(made.take(7))).toBe('passed');
      const firstMs = performance.now() - started;
      expect(counts.commands).toBe(1);
      // From then on no take is sent to Redis: 10 more are answered at once by the same bucket.
      started = performance.now();
      const outcomes = await Promise.all(Array.from({ length: 10 }, () => outcome(made.take(7))));
      const restMs = performance.now() - started;
      expect(outcomes).toEqual(['passed', 'passed', ...Array(8).fill('limited')]);
      expect(counts.commands).toBe(1);
      expect(firstMs).toBeGreaterThanOrEqual(450);
      expect(restMs).toBeLessThan(250);

      server.resume();
      // A probe (PING, once a second) finds it back; takes are shared again.
      const deadline = Date.now() + 5_000;
      while ((made as unknown as { outage: { down: boolean } }).outage.down && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 50));
      expect((made as unknown as { outage: { down: boolean } }).outage.down).toBe(false);
      expect(counts.pings).toBeGreaterThanOrEqual(1);
      // The shared bucket kept its 2 tokens (plus what refilled), apart from this node's.
      expect(await outcome(made.take(7))).toBe('passed');
      expect(counts.commands).toBe(2);
    } finally {
      server.resume();
      made.onApplicationShutdown(); // before the server goes, or its reconnect timer outlives the test
      await server.kill();
    }
  });
});
