import Redis from 'ioredis';
import { RedisFrameBus } from '#bus';
import { ulid } from '#domain';
import { testRedisUrl } from '../support/services';

/** The Redis Streams bus on the test Redis: deliveries of one tick share a pipeline. */
describe('RedisFrameBus.publish', () => {
  const prefix = `roost-test:${ulid()}:`;
  let bus: RedisFrameBus;
  let redis: Redis;

  beforeAll(async () => {
    bus = new RedisFrameBus({ url: testRedisUrl(), prefix, partitions: 4, maxLen: 1000 });
    redis = new Redis(testRedisUrl());
    // The bus publishes without an offline queue: wait until its connection is up.
    const commands = (bus as unknown as { commands: Redis }).commands;
    if (commands.status !== 'ready') await new Promise((resolve) => commands.once('ready', resolve));
  });

  afterAll(async () => {
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
    await bus.close();
  });

  const delivery = (mailboxId: number, seq: number, envelopeId: string) => ({
    committed_at: Date.now(),
    frames: [{ mailbox_id: mailboxId, seq, envelope_id: envelopeId, created_at: 1000 + seq, header: `{"id":"${envelopeId}"}` }],
    monitor: [],
  });

  it('deliveries published in one tick all land, in publish order, one entry per partition each', async () => {
    const pipelines = jest.spyOn((bus as unknown as { commands: Redis }).commands, 'pipeline');
    const ids = Array.from({ length: 20 }, () => ulid());
    await Promise.all(ids.map((id, i) => bus.publish(delivery(1, i + 1, id))));
    // One pipeline, so the 20 XADDs reach Redis in one write.
    expect(pipelines).toHaveBeenCalledTimes(1);
    pipelines.mockRestore();
    const entries = await redis.xrange(bus.streamKey(1), '-', '+');
    expect(entries.map(([, fields]) => fields[fields.indexOf('e') + 1])).toEqual(ids);
    expect(entries.map(([, fields]) => fields[fields.indexOf('r') + 1])).toEqual(ids.map((_, i) => `1:${i + 1}`));
  });

  it('a command that fails rejects only the publish it belongs to', async () => {
    // Partition 2's stream key holds a string: XADD to it fails with WRONGTYPE.
    await redis.set(bus.streamKey(2), 'not a stream');
    const results = await Promise.allSettled([
      bus.publish(delivery(1, 100, ulid())),
      bus.publish(delivery(2, 1, ulid())),
      bus.publish(delivery(5, 1, ulid())), // partition 1 as well
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(String((results[1] as PromiseRejectedResult).reason)).toMatch(/WRONGTYPE/);
    await redis.del(bus.streamKey(2));
  });
});

/** Several subscribers on one bus: the gateway and the api's MCP mail watch in one process. */
describe('RedisFrameBus subscribers', () => {
  const prefix = `roost-test:${ulid()}:`;
  let bus: RedisFrameBus;
  let redis: Redis;

  beforeAll(() => {
    bus = new RedisFrameBus({ url: testRedisUrl(), prefix, partitions: 4, maxLen: 1000 });
    redis = new Redis(testRedisUrl());
  });

  afterAll(async () => {
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
    await bus.close();
  });

  const until = async (check: () => boolean) => {
    const deadline = Date.now() + 10_000;
    while (!check()) {
      if (Date.now() > deadline) throw new Error('timed out');
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  };

  it('delivers every frame to each subscriber, and a partition held while the reader blocks ends that block', async () => {
    const seen = { a: [] as string[], b: [] as string[] };
    const subscriber = (name: 'a' | 'b') => ({
      onFrame: (frame: { mailbox_id: number; envelope_id: string }) => seen[name].push(`${frame.mailbox_id}:${frame.envelope_id}`),
      onMonitor: () => undefined,
      onControl: () => undefined,
      onResync: () => undefined,
    });
    bus.subscribe(subscriber('a'));
    bus.subscribe(subscriber('b'));
    await bus.hold(1);
    const internals = bus as unknown as { blocking: boolean; readerId: string | undefined; commands: Redis };
    await until(() => internals.blocking && internals.readerId !== undefined);
    const calls = jest.spyOn(internals.commands, 'call');
    await bus.hold(2); // partition 2, new while the reader blocks on partition 1
    expect(calls).toHaveBeenCalledWith('CLIENT', 'UNBLOCK', internals.readerId);
    calls.mockRestore();
    const id = ulid();
    await bus.publish({ committed_at: Date.now(), frames: [{ mailbox_id: 2, seq: 1, envelope_id: id, created_at: 1, header: '{}' }], monitor: [] });
    await until(() => seen.a.length > 0 && seen.b.length > 0);
    expect(seen).toEqual({ a: [`2:${id}`], b: [`2:${id}`] });
  });
});
