import { Global, Module } from '@nestjs/common';
import { CONFIG, type Config } from '#config';
import { Metrics } from '#metrics';
import { BullMqJobRunner } from './bullmq.runner';
import { InProcessJobRunner } from './in-process.runner';
import { JobRunner, type JobObserver } from './jobs';

function createRunner(config: Config, metrics: Metrics): JobRunner {
  const observer: JobObserver = {
    onFinished: (name, seconds, failed) => {
      metrics.jobDuration.observe({ name }, seconds);
      if (failed) metrics.jobFailures.inc({ name });
    },
  };
  return config.redisUrl === null
    ? new InProcessJobRunner(observer)
    : new BullMqJobRunner({ url: config.redisUrl, prefix: config.redisPrefix, observer });
}

/** BullMQ when REDIS_URL is set, else in-process timers (the embedded default). */
@Global()
@Module({
  providers: [{ provide: JobRunner, inject: [CONFIG, Metrics], useFactory: createRunner }],
  exports: [JobRunner],
})
export class JobsModule {}
