import { Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { InjectConfig, type Config } from '#config';
import { JobRunner } from '#jobs';
import { RetentionProcessor } from './retention.processor';
import { SchedulesProcessor } from './schedules.processor';

/** Registers the worker's recurring jobs with the job runner (BullMQ or in-process timers). */
@Injectable()
export class WorkerService implements OnApplicationBootstrap, OnApplicationShutdown {
  constructor(
    private readonly runner: JobRunner,
    private readonly schedules: SchedulesProcessor,
    private readonly retention: RetentionProcessor,
    @InjectConfig() private readonly config: Config,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    await this.runner.start([
      {
        name: 'schedules.tick',
        everyMs: this.config.schedules.tickMs,
        run: async () => void (await this.schedules.tick()),
      },
      {
        name: 'retention.purge',
        everyMs: this.config.retention.intervalMs,
        run: async () => void (await this.retention.purge()),
      },
    ]);
  }

  async onApplicationShutdown(): Promise<void> {
    await this.runner.stop();
  }
}
