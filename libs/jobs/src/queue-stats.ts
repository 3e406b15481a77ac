import { Queue } from 'bullmq';
import Redis from 'ioredis';
import { JOB_QUEUE } from './bullmq.runner';

export interface QueueCounts {
  queue: string;
  waiting: number;
  delayed: number;
  failed: number;
}

/** A read that waits longer than this counts as unreadable (the console still answers). */
const ASK_TIMEOUT_MS = 1_000;

/**
 * Backlog of the BullMQ job queue as seen from any node (the console's overview on an api node,
 * which runs no worker). The connection opens on the first read, never queues commands offline
 * and fails fast, so an api node whose Redis is down answers at once.
 */
export class JobQueueStats {
  private connection: Redis | undefined;
  private queue: Queue | undefined;

  constructor(private readonly options: { url: string; prefix: string }) {}

  /** Counts of the queue, or null when Redis does not answer in time. */
  async counts(): Promise<QueueCounts[] | null> {
    if (!this.queue) {
      this.connection = new Redis(this.options.url, {
        maxRetriesPerRequest: 1,
        enableOfflineQueue: false,
        commandTimeout: ASK_TIMEOUT_MS,
      });
      this.connection.on('error', () => undefined); // surfaced as a null answer
      this.queue = new Queue(JOB_QUEUE, { connection: this.connection, prefix: `${this.options.prefix}bull` });
      this.queue.on('error', () => undefined);
    }
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), ASK_TIMEOUT_MS)));
    try {
      if (this.connection?.status !== 'ready') await Promise.race([this.queue.waitUntilReady(), timeout]);
      const counts = await Promise.race([
        this.queue.getJobCounts('waiting', 'delayed', 'failed').catch(() => null),
        timeout,
      ]);
      if (!counts) return null;
      return [
        { queue: JOB_QUEUE, waiting: counts.waiting ?? 0, delayed: counts.delayed ?? 0, failed: counts.failed ?? 0 },
      ];
    } catch {
      return null;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Bounded: with Redis away BullMQ's close would wait for it. */
  async close(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<void>((resolve) => (timer = setTimeout(resolve, ASK_TIMEOUT_MS)));
    await Promise.race([this.queue?.close().catch(() => undefined), bound]);
    clearTimeout(timer);
    this.connection?.disconnect();
  }
}
