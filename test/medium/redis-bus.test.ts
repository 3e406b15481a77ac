import { setTimeout as sleep } from 'node:timers/promises';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import Redis from 'ioredis';
import { RedisFrameBus, type HeaderFrame, type MonitorFrame } from '#bus';
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
    frames: [
      { mailbox_id: mailboxId, seq, envelope_id: envelopeId, created_at: 1000 + seq, header: `{"id":"${envelopeId}"}` },
    ],
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

  it("a delivery over several partitions writes each partition's entry as a single-partition XADD does", async () => {
    const id = ulid();
    const header = `{"id":"${id}","subject":"é"}`;
    const frames = [9, 13, 10, 3, 7].map((mailbox, i) => ({
      mailbox_id: mailbox,
      seq: 100 + i,
      envelope_id: id,
      created_at: 1234,
      header,
    }));
    await bus.publish({ committed_at: 5678, frames, monitor: [] });
    const last = async (partition: number) =>
      (await redis.xrevrange(bus.streamKey(partition), '+', '-', 'COUNT', 1))[0][1];
    // Partitions (of 4): 9 and 13 → 1, 10 → 2, 3 and 7 → 3; fields in the order a plain XADD writes.
    const fields = (r: string) => ['r', r, 'e', id, 't', '1234', 'c', '5678', 'h', header];
    expect(await last(1)).toEqual(fields('9:100,13:101'));
    expect(await last(2)).toEqual(fields('10:102'));
    expect(await last(3)).toEqual(fields('3:103,7:104'));
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
    // The same for a delivery over several partitions (one script call), beside single ones.
    const spread = delivery(1, 101, ulid());
    spread.frames.push({ ...spread.frames[0], mailbox_id: 6, seq: 1 });
    const mixed = await Promise.allSettled([
      bus.publish(delivery(1, 102, ulid())),
      bus.publish(spread),
      bus.publish(delivery(5, 2, ulid())),
    ]);
    expect(mixed.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(String((mixed[1] as PromiseRejectedResult).reason)).toMatch(/WRONGTYPE/);
    await redis.del(bus.streamKey(2));
  });
});

/** What /metrics reads from the bus at scrape: each partition's length and a holder's read lag. */
describe('RedisFrameBus.stats', () => {
  const prefix = `roost-test:${ulid()}:`;
  let holder: RedisFrameBus;
  let publisher: RedisFrameBus;
  let redis: Redis;

  const ready = async (bus: RedisFrameBus) => {
    const commands = (bus as unknown as { commands: Redis }).commands;
    if (commands.status !== 'ready') await new Promise((resolve) => commands.once('ready', resolve));
  };

  beforeAll(async () => {
    holder = new RedisFrameBus({ url: testRedisUrl(), prefix, partitions: 4, maxLen: 1000 });
    publisher = new RedisFrameBus({ url: testRedisUrl(), prefix, partitions: 4, maxLen: 1000 });
    redis = new Redis(testRedisUrl());
    await Promise.all([ready(holder), ready(publisher)]);
  });

  afterAll(async () => {
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
    await holder.close();
    await publisher.close();
  });

  const delivery = (mailboxId: number, seq: number) => ({
    committed_at: Date.now(),
    frames: [{ mailbox_id: mailboxId, seq, envelope_id: ulid(), created_at: 1000 + seq, header: '{}' }],
    monitor: [],
  });

  it('reports every partition length, and the entries a holder has not read yet (held partitions only)', async () => {
    await publisher.publish(delivery(6, 1)); // partition 2, before the hold: not lag
    expect(await holder.stats()).toEqual([
      { partition: 0, length: 0 },
      { partition: 1, length: 0 },
      { partition: 2, length: 1 },
      { partition: 3, length: 0 },
    ]);
    // A holder that reads nothing (no subscriber, so no read loop): every later entry is lag.
    await holder.hold(2);
    for (let seq = 2; seq <= 8; seq++) await publisher.publish(delivery(6, seq));
    await publisher.publish(delivery(5, 1)); // partition 1, not held
    const stats = await holder.stats();
    expect(stats[2]).toEqual({ partition: 2, length: 8, lagEntries: 7 });
    expect(stats[1]).toEqual({ partition: 1, length: 1 });
    holder.release(2);
    expect((await holder.stats())[2]).toEqual({ partition: 2, length: 8 });
  });

  it('a subscribed holder that keeps up shows no lag', async () => {
    const seen: number[] = [];
    holder.subscribe({
      onFrame: (frame) => seen.push(frame.seq),
      onMonitor: () => undefined,
      onControl: () => undefined,
      onResync: () => undefined,
    });
    await holder.hold(7); // partition 3
    for (let seq = 1; seq <= 5; seq++) await publisher.publish(delivery(7, seq));
    const deadline = Date.now() + 5_000;
    while (seen.length < 5 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(seen).toEqual([1, 2, 3, 4, 5]);
    expect((await holder.stats())[3]).toEqual({ partition: 3, length: 5, lagEntries: 0 });
  });

  it('fails (the scrape then drops the series) when Redis does not answer', async () => {
    const dead = new RedisFrameBus({ url: 'redis://127.0.0.1:1', prefix, partitions: 2, maxLen: 1000 });
    try {
      await expect(dead.stats()).rejects.toThrow();
    } finally {
      await dead.close();
    }
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
      onFrame: (frame: { mailbox_id: number; envelope_id: string }) =>
        seen[name].push(`${frame.mailbox_id}:${frame.envelope_id}`),
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
    await bus.publish({
      committed_at: Date.now(),
      frames: [{ mailbox_id: 2, seq: 1, envelope_id: id, created_at: 1, header: '{}' }],
      monitor: [],
    });
    await until(() => seen.a.length > 0 && seen.b.length > 0);
    expect(seen).toEqual({ a: [`2:${id}`], b: [`2:${id}`] });
  });
});

/** What a gateway reads back: every field and every `mailbox:seq` pair of the stream entries. */
describe('RedisFrameBus read', () => {
  const prefix = `roost-test:${ulid()}:`;
  let reader: RedisFrameBus;
  let publisher: RedisFrameBus;
  let redis: Redis;

  beforeAll(async () => {
    reader = new RedisFrameBus({ url: testRedisUrl(), prefix, partitions: 4, maxLen: 1000 });
    publisher = new RedisFrameBus({ url: testRedisUrl(), prefix, partitions: 4, maxLen: 1000 });
    redis = new Redis(testRedisUrl());
    // Both connected before the test holds: a hold while the reader's command connection is still
    // connecting cannot read the partition's tail (no offline queue), and a frame published before
    // the read loop takes the tail itself is left to the gateway's sweep, which this bus has not.
    for (const bus of [reader, publisher]) {
      const commands = (bus as unknown as { commands: Redis }).commands;
      if (commands.status !== 'ready') await new Promise((resolve) => commands.once('ready', resolve));
    }
  });

  afterAll(async () => {
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
    await reader.close();
    await publisher.close();
  });

  it("hands each held mailbox its frame (multi-digit ids and seqs, several per partition), then the sender's fact", async () => {
    const frames: HeaderFrame[] = [];
    const committed: number[] = [];
    const facts: MonitorFrame[] = [];
    reader.subscribe({
      onFrame: (frame, committedAt) => {
        frames.push(frame);
        committed.push(committedAt);
      },
      onMonitor: (frame) => facts.push(frame),
      onControl: () => undefined,
      onResync: () => undefined,
    });
    // Partition 2 carries 10 and 2, partition 3 carries 1234567 and 7 (not held); 12 is the sender.
    const held = [5, 10, 1234567, 2, 12];
    await Promise.all(held.map((id) => reader.hold(id)));
    const id = ulid();
    const header = `{"op":"envelope.notify","id":"${id}","subject":"héllo, wörld"}`;
    const recipients = [
      [5, 1],
      [10, 4_000_000_123],
      [7, 9],
      [1234567, 42],
      [2, 100],
    ];
    await publisher.publish({
      committed_at: 1_796_000_000_123,
      frames: recipients.map(([mailbox, seq]) => ({
        mailbox_id: mailbox,
        seq,
        envelope_id: id,
        created_at: 1_796_000_000_000,
        header,
      })),
      monitor: [{ mailbox_id: 12, frame: '{"op":"monitor.fact"}' }],
    });
    const deadline = Date.now() + 10_000;
    while ((frames.length < 4 || facts.length < 1) && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 10));
    const frame = (mailbox: number, seq: number) => ({
      mailbox_id: mailbox,
      seq,
      envelope_id: id,
      created_at: 1_796_000_000_000,
      header,
    });
    expect(frames.sort((a, b) => a.mailbox_id - b.mailbox_id)).toEqual([
      frame(2, 100),
      frame(5, 1),
      frame(10, 4_000_000_123),
      frame(1234567, 42),
    ]);
    expect(new Set(committed)).toEqual(new Set([1_796_000_000_123]));
    expect(facts).toEqual([{ mailbox_id: 12, frame: '{"op":"monitor.fact"}' }]);
  });
});

/**
 * The read loop must not keep what it has read: each XREAD reply is garbage once dispatched. It
 * used to be kept until close() (every wait raced one long-lived promise, whose reactions held each
 * race's result), so every reply survived into the old generation.
 */
describe('RedisFrameBus read loop', () => {
  it('keeps no XREAD reply reachable after dispatching it', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    // Hidden again for the other test files this worker runs next.
    setFlagsFromString('--no-expose-gc');
    const prefix = `roost-test:${ulid()}:`;
    const bus = new RedisFrameBus({ url: testRedisUrl(), prefix, partitions: 4, maxLen: 1000 });
    const commands = (bus as unknown as { commands: Redis }).commands;
    if (commands.status !== 'ready') await new Promise((resolve) => commands.once('ready', resolve));
    const seen: number[] = [];
    bus.subscribe({
      onFrame: (frame) => seen.push(frame.seq),
      onMonitor: () => undefined,
      onControl: () => undefined,
      onResync: () => undefined,
    });
    const replies: Array<WeakRef<object>> = [];
    const reader = (bus as unknown as { reader: Redis }).reader;
    const xread = reader.xread.bind(reader) as (...args: unknown[]) => Promise<object | null>;
    // Wrapped by hand: a jest spy would keep every returned promise (and its reply) in mock.results.
    (reader as unknown as { xread: unknown }).xread = (...args: unknown[]) => {
      const reply = xread(...args);
      reply.then(
        (value) => value && replies.push(new WeakRef(value)),
        () => undefined, // the read abandoned at close
      );
      return reply;
    };
    try {
      await bus.hold(1);
      for (let seq = 1; seq <= 5; seq++) {
        await bus.publish({
          committed_at: Date.now(),
          frames: [{ mailbox_id: 1, seq, envelope_id: ulid(), created_at: seq, header: `{"seq":${seq}}` }],
          monitor: [],
        });
        const deadline = Date.now() + 5_000;
        while (!seen.includes(seq) && Date.now() < deadline) await sleep(10);
      }
      expect(seen).toEqual([1, 2, 3, 4, 5]);
      expect(replies.length).toBeGreaterThanOrEqual(3);
      await sleep(50);
      gc();
      await sleep(10);
      gc();
      // The newest reply may still be on the loop's stack; every earlier one must be gone.
      expect(replies.slice(0, -1).filter((ref) => ref.deref() !== undefined)).toEqual([]);
    } finally {
      await bus.close();
      const redis = new Redis(testRedisUrl());
      const keys = await redis.keys(`${prefix}*`);
      if (keys.length > 0) await redis.del(...keys);
      redis.disconnect();
    }
  });
});
