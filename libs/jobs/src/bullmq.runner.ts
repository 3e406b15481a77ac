import { Logger } from '@nestjs/common';
import { Queue, Worker, type Job } from 'bullmq';
import Redis from 'ioredis';
import { JOB_STATES, JobRunner, type JobDefinition, type JobObserver, type JobState } from './jobs';

export interface BullMqOptions {
  url: string;
  prefix: string;
  observer?: JobObserver;
}

/** The one job queue every worker shares (also read by api nodes for the console's backlog). */
export const JOB_QUEUE = 'roost-jobs';
const QUEUE = JOB_QUEUE;
/** Readiness and metrics ask Redis with this bound: the queue's connection waits forever by design. */
const ASK_TIMEOUT_MS = 1_000;
/** How long stopping waits for BullMQ to close cleanly before cutting the connections. */
const STOP_TIMEOUT_MS = 3_000;

/**
 * BullMQ job schedulers: one scheduler per recurring job, shared by every worker process (upserted
 * idempotently once Redis answers and on every reconnect), each job processed by one worker.
 * Finished jobs are kept only in bounded numbers (`removeOnComplete`/`removeOnFail`).
 *
 * Nothing here waits for Redis: start() returns at once and BullMQ connects in the background,
 * so a process whose Redis is down still starts and serves what needs only Postgres. An outage is
 * logged once when it begins and once when Redis answers again.
 */
export class BullMqJobRunner extends JobRunner {
  private readonly logger = new Logger('jobs');
  private readonly connection: Redis;
  /** The worker's own connection: BullMQ never closes a connection it was handed. */
  private workerConnection: Redis | undefined;
  private queue: Queue | undefined;
  private worker: Worker | undefined;
  private unreachable = false;

  constructor(private readonly options: BullMqOptions) {
    super();
    // BullMQ workers block on Redis: they need maxRetriesPerRequest null.
    this.connection = new Redis(options.url, { maxRetriesPerRequest: null });
    this.connection.on('error', (error: Error) => this.lost(error));
  }

  async start(jobs: readonly JobDefinition[]): Promise<void> {
    const byName = new Map(jobs.map((job) => [job.name, job]));
    const prefix = `${this.options.prefix}bull`;
    this.queue = new Queue(QUEUE, { connection: this.connection, prefix });
    this.queue.on('error', (error) => this.lost(error));
    // Upsert the schedulers whenever Redis (re)connects: a Redis that comes back empty (restarted
    // without persistence, failed over to an empty replica) has forgotten them, and no job would
    // ever run again until a worker restarts (idempotent, as every worker's start is).
    const upsert = () => {
      if (!this.queue) return;
      this.upsertSchedulers(jobs).catch((error: Error) => this.lost(error));
    };
    this.connection.on('ready', () => {
      if (this.unreachable) {
        this.unreachable = false;
        this.logger.warn('job queue: Redis reachable again');
      }
      upsert();
    });
    if (this.connection.status === 'ready') upsert();
    this.workerConnection = this.connection.duplicate();
    this.workerConnection.on('error', (error: Error) => this.lost(error));
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
    this.worker.on('error', (error) => this.lost(error));
    this.worker.on('failed', (job, error) => this.logger.warn(`job ${job?.name ?? '?'} failed: ${error.message}`));
  }

  /** One line per outage, however many connections and retries report it. */
  private lost(error: Error): void {
    if (this.unreachable || !this.queue) return;
    this.unreachable = true;
    this.logger.warn(`job queue: Redis unreachable, jobs wait until it answers (${error.message})`);
  }

  private async upsertSchedulers(jobs: readonly JobDefinition[]): Promise<void> {
    for (const job of jobs) {
      await this.queue!.upsertJobScheduler(
        job.name,
        { every: job.everyMs },
        {
          name: job.name,
          opts: { removeOnComplete: { count: 100 }, removeOnFail: { count: 1000 } },
        },
      );
    }
  }

  async stop(): Promise<void> {
    const queue = this.queue;
    this.queue = undefined; // no more upserts on reconnect
    // With Redis away BullMQ's close would wait for it: bounded, then the connections are cut.
    const closed = (async () => {
      await this.worker?.close(this.connection.status !== 'ready');
      await queue?.close();
    })();
    await Promise.race([
      closed.catch(() => undefined),
      new Promise((resolve) => setTimeout(resolve, STOP_TIMEOUT_MS).unref()),
    ]);
    this.workerConnection?.disconnect();
    this.connection.disconnect();
  }

  async ready(): Promise<boolean> {
    if (this.connection.status !== 'ready') return false;
    return (await bounded(this.connection.ping())) === 'PONG';
  }

  async counts(): Promise<Array<{ queue: string; state: JobState; jobs: number }> | null> {
    if (!this.queue || this.connection.status !== 'ready') return null;
    const counts = await bounded(this.queue.getJobCounts(...JOB_STATES));
    if (counts === undefined) return null;
    return JOB_STATES.map((state) => ({ queue: QUEUE, state, jobs: counts[state] ?? 0 }));
  }
}

/** The answer, or undefined when Redis fails or takes longer than ASK_TIMEOUT_MS. */
async function bounded<T>(ask: Promise<T>): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), ASK_TIMEOUT_MS)));
  try {
    return await Promise.race([ask.catch(() => undefined), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
