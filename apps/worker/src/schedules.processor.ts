import { Injectable, Logger } from '@nestjs/common';
import { InjectConfig, type Config } from '#config';
import { AcceptService, Clock } from '#core';
import { AgentsRepository, SchedulesRepository } from '#db';
import { afterRun, AsmtpError, isUnavailable, runEnvelopeId, type Schedule } from '#domain';
import { Metrics } from '#metrics';

const CLAIM = 50;
const RETRY_AFTER_MS = 2_000;

/**
 * Fires due schedules (EXTENSIONS.md §3). Each firing is leased, goes through the same accept path
 * as `POST /messages`, and sends run n under an id derived from (schedule, n): a worker that dies
 * after the envelope committed but before the run was recorded is replaced after the lease, and
 * its successor's firing is an idempotent replay, so every due run yields exactly one envelope.
 */
@Injectable()
export class SchedulesProcessor {
  private readonly logger = new Logger('schedules');

  constructor(
    private readonly schedules: SchedulesRepository,
    private readonly agents: AgentsRepository,
    private readonly accept: AcceptService,
    private readonly clock: Clock,
    private readonly metrics: Metrics,
    @InjectConfig() private readonly config: Config,
  ) {}

  /** One tick: fire every schedule due now, in leased batches. */
  async tick(): Promise<number> {
    const now = this.clock.now();
    const oldest = await this.schedules.oldestDue(now);
    this.metrics.scheduleLag.set(oldest === null ? 0 : (now - oldest) / 1000);
    let fired = 0;
    for (;;) {
      const due = await this.schedules.claimDue(now, this.config.schedules.leaseMs, CLAIM);
      await Promise.all(due.map((schedule) => this.fire(schedule)));
      fired += due.length;
      if (due.length < CLAIM) return fired;
    }
  }

  private async fire(schedule: Schedule): Promise<void> {
    const run = schedule.send_count + 1;
    const scheduledAt = schedule.next_run_at!;
    const envelopeId = runEnvelopeId(schedule.id, run, scheduledAt);
    try {
      const owner = await this.agents.findById(schedule.owner_id);
      if (!owner) {
        // Deleted (its schedules go with it); one created in the same instant would otherwise come due forever.
        await this.schedules.recordFailure(schedule.id, run, 'NOT_FOUND: the owner was deleted', this.clock.now());
        return;
      }
      const template = JSON.parse(schedule.envelope) as Record<string, unknown>;
      const result = await this.accept.accept(
        owner,
        { ...template, id: envelopeId, date_ms: scheduledAt },
        { extensions: { schedule_id: schedule.id } },
      );
      const now = this.clock.now();
      await this.schedules.recordRun(schedule.id, run, envelopeId, afterRun(schedule, run, scheduledAt, now), now);
      this.metrics.scheduleFirings.inc({ result: result.replay ? 'replayed' : 'sent' });
    } catch (error) {
      if (error instanceof AsmtpError && error.status < 500) {
        await this.schedules.recordFailure(schedule.id, run, `${error.code}: ${error.message}`, this.clock.now());
        this.metrics.scheduleFirings.inc({ result: 'refused' });
        return;
      }
      this.metrics.scheduleFirings.inc({ result: 'error' });
      if (!isUnavailable(error)) this.logger.warn(`schedule ${schedule.id} run ${run}: ${(error as Error).message}`);
      // Retried on a later tick (a dependency blip must not make one tick spin on the same rows).
      await this.schedules.retryAt(schedule.id, this.clock.now() + RETRY_AFTER_MS).catch(() => undefined);
    }
  }
}
