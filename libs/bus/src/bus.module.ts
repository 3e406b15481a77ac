import { Global, Module, type OnApplicationShutdown } from '@nestjs/common';
import { CONFIG, type Config } from '#config';
import { Metrics } from '#metrics';
import { FrameBus } from './bus';
import { InProcessFrameBus } from './in-process.bus';
import { RedisFrameBus } from './redis-streams.bus';

/** Redis Streams when REDIS_URL is set, else the in-process bus of the embedded default. */
function createBus(config: Config, metrics: Metrics): FrameBus {
  if (config.redisUrl === null) return new InProcessFrameBus();
  return new RedisFrameBus({
    url: config.redisUrl,
    prefix: config.redisPrefix,
    partitions: config.streams.partitions,
    maxLen: config.streams.maxLen,
    onReadLag: (lagMs) => metrics.streamReadLag.observe(Math.max(0, lagMs) / 1000),
    onError: (component) => metrics.redisErrors.inc({ component }),
  });
}

@Global()
@Module({
  providers: [{ provide: FrameBus, inject: [CONFIG, Metrics], useFactory: createBus }],
  exports: [FrameBus],
})
export class BusModule implements OnApplicationShutdown {
  constructor(private readonly bus: FrameBus) {}

  async onApplicationShutdown(): Promise<void> {
    if (this.bus instanceof RedisFrameBus) await this.bus.close();
  }
}
