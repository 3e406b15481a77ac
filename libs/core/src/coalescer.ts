import { PumpScheduler } from './pump-scheduler';

/**
 * Coalesces concurrent lookups into shared round trips. A load runs at once while fewer than
 * `maxInFlight` batches are out; otherwise it waits and joins the next batch, which starts as soon
 * as one returns. A lone caller pays no delay; under load many callers share one query, so the
 * database sees a handful of queries instead of one per request.
 *
 * With `gather`, a batch starts on the next turn of the event loop instead of at once, so every
 * load made in the same turn (the requests one socket poll delivered) shares it (PumpScheduler).
 */
export class Coalescer<K, V> {
  private queue: Array<{ key: K; resolve: (value: V) => void; reject: (error: unknown) => void }> = [];
  private running = 0;
  private readonly scheduler: PumpScheduler;

  /** `run` answers the keys of one batch, position by position. */
  constructor(
    private readonly run: (keys: K[]) => Promise<V[]>,
    private readonly maxInFlight: number,
    private readonly maxBatch: number,
    gather: boolean | 'turn' = false,
  ) {
    this.scheduler = new PumpScheduler(gather, () => this.pump());
  }

  load(key: K): Promise<V> {
    return new Promise<V>((resolve, reject) => {
      this.queue.push({ key, resolve, reject });
      this.scheduler.request();
    });
  }

  private pump(): void {
    while (this.running < this.maxInFlight && this.queue.length > 0) {
      const batch = this.queue.splice(0, this.maxBatch);
      this.running++;
      void this.runBatch(batch).finally(() => {
        this.running--;
        this.pump();
      });
    }
  }

  private async runBatch(batch: typeof this.queue): Promise<void> {
    try {
      const values = await this.run(batch.map((pending) => pending.key));
      batch.forEach((pending, i) => pending.resolve(values[i]));
    } catch (error) {
      for (const pending of batch) pending.reject(error);
    }
  }
}
