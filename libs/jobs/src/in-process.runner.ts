import { Logger } from '@nestjs/common';
import { JobRunner, type JobDefinition, type JobObserver } from './jobs';

/** The embedded default: each job on its own timer in this process, never overlapping itself. */
export class InProcessJobRunner extends JobRunner {
  private readonly logger = new Logger('jobs');
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly running = new Set<Promise<void>>();

  constructor(private readonly observer?: JobObserver) {
    super();
  }

  async start(jobs: readonly JobDefinition[]): Promise<void> {
    for (const job of jobs) {
      let busy = false;
      const timer = setInterval(() => {
        if (busy) return;
        busy = true;
        const started = performance.now();
        const run = job
          .run()
          .then(
            () => this.observer?.onFinished(job.name, (performance.now() - started) / 1000, false),
            (error: unknown) => {
              this.observer?.onFinished(job.name, (performance.now() - started) / 1000, true);
              this.logger.warn(`job ${job.name} failed: ${(error as Error).message}`);
            },
          )
          .finally(() => {
            busy = false;
            this.running.delete(run);
          });
        this.running.add(run);
      }, job.everyMs);
      timer.unref();
      this.timers.push(timer);
    }
  }

  async stop(): Promise<void> {
    for (const timer of this.timers) clearInterval(timer);
    await Promise.allSettled([...this.running]);
  }

  async ready(): Promise<boolean> {
    return true;
  }

  async counts(): Promise<null> {
    return null; // timers, no queue
  }
}
