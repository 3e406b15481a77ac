import type { Logger } from '@nestjs/common';

/** How often a Redis that failed is asked (`PING`) whether it answers again. */
export const REDIS_PROBE_MS = 1_000;

/**
 * A limiter's Redis, up or down. A command that fails puts it down; while it is down the limiter
 * keeps its per-node fallback and sends Redis nothing on a request's path (`down`), and a probe
 * asks every `REDIS_PROBE_MS` whether it answers again. A Redis that is frozen rather than gone (a
 * stalled host or fork, a partition that resets nothing) answers no command until its timeout
 * (500 ms): without this every request would wait that long, and under load the waiting queue
 * grew for as long as the freeze lasted.
 *
 * One warning when it goes down and one line when it is back, instead of one per request: a
 * limiter outage is a state, not a stream of events.
 */
export class RedisOutage {
  private isDown = false;
  /** A probe is due (its timer) or in flight: one chain of probes at a time. */
  private probing = false;
  private probeTimer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly logger: Logger,
    /** What the limiter does meanwhile, e.g. "limiting per node". */
    private readonly meanwhile: string,
    /** Resolves when Redis answers (a `PING` on the limiter's connection). */
    private readonly probe: () => Promise<unknown>,
    /**
     * Counts a probe that failed, as the limiter counts its failed commands
     * (`roost_redis_errors_total`): the counter keeps rising while Redis is down, though no
     * request asks it, so an alert on its rate holds for the whole outage.
     */
    private readonly probeFailed: () => void = () => undefined,
    private readonly probeMs = REDIS_PROBE_MS,
  ) {}

  /** Redis failed and has not answered since: use the per-node fallback without asking it. */
  get down(): boolean {
    return this.isDown;
  }

  failed(error: unknown): void {
    if (this.isDown) return;
    this.isDown = true;
    this.logger.warn(`Redis unavailable (${(error as Error).message}); ${this.meanwhile} until it returns`);
    this.scheduleProbe();
  }

  succeeded(): void {
    if (!this.isDown) return;
    this.isDown = false;
    this.cancelDueProbe();
    // warn, as the line that opened the outage: Nest's `log` is pino's debug, not written at info.
    this.logger.warn('Redis is back; limits are shared again');
  }

  /** Stops probing (shutdown). */
  close(): void {
    this.closed = true;
    this.cancelDueProbe();
  }

  /**
   * A probe `probeMs` from now, unless one is due or in flight. A probe in flight when Redis came
   * back (another command answered) and failed again goes on: its answer decides.
   */
  private scheduleProbe(): void {
    if (this.closed || this.probing) return;
    this.probing = true;
    this.probeTimer = setTimeout(() => {
      this.probeTimer = undefined;
      this.probe().then(
        () => {
          this.probing = false;
          this.succeeded();
        },
        () => {
          this.probing = false;
          this.probeFailed();
          if (this.isDown) this.scheduleProbe();
        },
      );
    }, this.probeMs);
    this.probeTimer.unref();
  }

  private cancelDueProbe(): void {
    if (this.probeTimer === undefined) return;
    clearTimeout(this.probeTimer);
    this.probeTimer = undefined;
    this.probing = false;
  }
}
