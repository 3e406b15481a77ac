import { Logger } from '@nestjs/common';
import { Queue, Worker, type Job } from 'bullmq';
import Redis from 'ioredis';
import { JobRunner, type JobDefinition, type JobObserver } from './jobs';

export interface BullMqOptions {
  url: string;
  prefix: string;
  observer?: JobObserver;
}

const QUEUE = 'roost-jobs';

/**
 * BullMQ job schedulers: one scheduler per recurring job, shared by every worker process (upserted
 * idempotently at start and on every Redis reconnect), each job processed by one worker. Finished jobs are kept only in bounded
 * numbers (`removeOnComplete`/`removeOnFail`).
 */
export class BullMqJobRunner extends JobRunner {
  private readonly logger = new Logger('jobs');
  private readonly connection: Redis;
  /** The worker's own connection: BullMQ never closes a connection it was handed. */
  private workerConnection: Redis | undefined;
  private queue: Queue | undefined;
  private worker: Worker | undefined;

  constructor(private readonly options: BullMqOptions) {
    super();
    // BullMQ workers block on Redis: they need maxRetriesPerRequest null.
    this.connection = new Redis(options.url, { maxRetriesPerRequest: null });
    this.connection.on('error', () => undefined);
  }

  async start(jobs: readonly JobDefinition[]): Promise<void> {
    const byName = new Map(jobs.map((job) => [job.name, job]));
    const prefix = `${this.options.prefix}bull`;
    this.queue = new Queue(QUEUE, { connection: this.connection, prefix });
    this.queue.on('error', (error) => this.logger.warn(`job queue: ${error.message}`));
    await this.upsertSchedulers(jobs);
    // A Redis that comes back empty (restarted without persistence, failed over to an empty
    // replica) has forgotten the schedulers, and no job would ever run again until a worker
    // restarts: upsert them again on every reconnect (idempotent, as every worker's start is).
    this.connection.on('ready', () => {
      if (!this.queue) return;
      this.upsertSchedulers(jobs).catch((error: Error) => this.logger.warn(`job schedulers after reconnect: ${error.message}`));
    });
    this.workerConnection = this.connection.duplicate();
    this.worker = new Worker(
      QUEUE,
      async (bullJob: Job) => {
        const job = byName.get(bullJob.name);
        if (!job) return;
        const started = performance.now();
        try {
          await job.run();
          this.options.observer?.onFinished(job.name, (performance.now() - started) / 1000, false);
        } catch (error) {
          this.options.observer?.onFinished(job.name, (performance.now() - started) / 1000, true);
          throw error;
        }
      },
      {
        connection: this.workerConnection,
        prefix,
        concurrency: Math.max(1, jobs.length),
        removeOnComplete: { count: 100 },
        removeOnFail: { count: 1000 },
      },
    );
    this.worker.on('error', (error) => this.logger.warn(`job worker: ${error.message}`));
    this.worker.on('failed', (job, error) => this.logger.warn(`job ${job?.name ?? '?'} failed: ${error.message}`));
  }

  private async upsertSchedulers(jobs: readonly JobDefinition[]): Promise<void> {
    for (const job of jobs) {
      await this.queue!.upsertJobScheduler(job.name, { every: job.everyMs }, {
        name: job.name,
        opts: { removeOnComplete: { count: 100 }, removeOnFail: { count: 1000 } },
      });
    }
  }

  async stop(): Promise<void> {
    const queue = this.queue;
    this.queue = undefined; // no more upserts on reconnect
    await this.worker?.close();
    await queue?.close();
    this.workerConnection?.disconnect();
    this.connection.disconnect();
  }

  async ready(): Promise<boolean> {
    try {
      return (await this.connection.ping()) === 'PONG';
    } catch {
      return false;
    }
  }
}
