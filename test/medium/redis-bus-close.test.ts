import { setTimeout as sleep } from 'node:timers/promises';
import { RedisFrameBus, type FrameSubscriber } from '#bus';
import { ulid } from '#domain';
import { RedisServer } from '../e2e/cluster';

/**
 * close() of the frame bus after a Redis outage, on a PRIVATE redis-server (killed and restarted
 * here; never the shared one). The reader's blocking XREAD is queued offline while ioredis
 * reconnects; `disconnect()` in that state cancels the reconnect timer and nothing ever settles the
 * queued read, so close() (and a gateway's SIGTERM drain) waited forever.
 */
describe('RedisFrameBus.close after a Redis outage (private redis-server)', () => {
  let server: RedisServer;

  beforeAll(async () => {
    server = await RedisServer.start();
  });
  afterAll(async () => {
    await server?.kill();
  });

  const subscriber: FrameSubscriber = {
    onFrame: () => undefined,
    onMonitor: () => undefined,
    onControl: () => undefined,
    onResync: () => undefined,
  };

  async function readingBus(): Promise<RedisFrameBus> {
    const bus = new RedisFrameBus({ url: server.url, prefix: `roost-test:${ulid()}:`, partitions: 4, maxLen: 1000 });
    bus.subscribe(subscriber);
    await bus.hold(1); // the read loop now blocks in XREAD on partition 1
    await sleep(300);
    return bus;
  }

  /** Settles, or says it hung: a hang is the failure, not slowness. */
  async function settles(promise: Promise<void>, ms = 8_000): Promise<'settled' | 'hung'> {
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([
      promise.then(() => 'settled' as const),
      new Promise<'hung'>((resolve) => (timer = setTimeout(() => resolve('hung'), ms))),
    ]);
    clearTimeout(timer);
    return outcome;
  }

  it('settles when closed right after Redis came back (still reconnecting)', async () => {
    const bus = await readingBus();
    await server.kill();
    await sleep(3_000); // the clients' reconnect backoff grows to ~0.5 s
    await server.start();
    expect(await settles(bus.close())).toBe('settled');
  }, 30_000);

  it('settles when closed while Redis is still down', async () => {
    const bus = await readingBus();
    await server.kill();
    await sleep(2_000);
    try {
      expect(await settles(bus.close())).toBe('settled');
    } finally {
      await server.start();
    }
  }, 30_000);

  it('settles when closed with Redis up (no outage)', async () => {
    const bus = await readingBus();
    expect(await settles(bus.close())).toBe('settled');
  }, 30_000);
});
