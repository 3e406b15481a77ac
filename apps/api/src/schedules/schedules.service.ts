import { Injectable } from '@nestjs/common';
import { InjectConfig, type Config } from '#config';
import { AcceptService, Clock } from '#core';
import { SchedulesRepository } from '#db';
import {
  AsmtpError,
  badRequest,
  firstRunAt,
  isScheduleId,
  newScheduleId,
  notFound,
  scheduleView,
  ulid,
  type Agent,
  type Schedule,
} from '#domain';
import { validateRequest } from '#schemas';

/** `/schedules` (EXTENSIONS.md §3): an agent's own repeated and delayed deliveries. */
@Injectable()
export class SchedulesService {
  constructor(
    private readonly schedules: SchedulesRepository,
    private readonly accept: AcceptService,
    private readonly clock: Clock,
    @InjectConfig() private readonly config: Config,
  ) {}

  async create(owner: Agent, body: Record<string, unknown>) {
    const valid = validateRequest('schedule-create', body);
    const now = this.clock.now();
    const { envelope, ...timing } = valid;
    const first = firstRunAt(timing, now, this.config.schedules.minIntervalMs);
    // Validated as if sent now: the same codes, the same non-enumerating 404 as POST /messages.
    const { date_ms: _dateMs, ...template } = envelope;
    await this.accept.check(owner, { ...template, id: ulid(), date_ms: now });
    const created = await this.schedules.create(
      {
        id: newScheduleId(),
        owner_id: owner.id,
        status: 'active',
        envelope: JSON.stringify(template),
        interval_ms: timing.interval_ms ?? null,
        next_run_at: first,
        max_count: timing.max_count ?? null,
        end_at: timing.end_at ?? null,
        created_at: now,
      },
      this.config.schedules.perAgent,
    );
    if (!created) throw quotaExceeded(this.config.schedules.perAgent);
    return scheduleView(created);
  }

  async list(owner: Agent) {
    return { schedules: (await this.schedules.list(owner.id)).map(scheduleView) };
  }

  async get(owner: Agent, id: string) {
    return scheduleView(await this.find(owner, id));
  }

  /** Pause an active schedule, or resume a paused (or failed) one. */
  async update(owner: Agent, id: string, body: Record<string, unknown>) {
    const current = await this.find(owner, id);
    const { status } = validateRequest('schedule-patch', body);
    if (current.status === status) return scheduleView(current);
    const from: Schedule['status'][] = status === 'paused' ? ['active'] : ['paused', 'failed'];
    if (!from.includes(current.status)) {
      throw badRequest('INVALID_SCHEDULE', `a ${current.status} schedule cannot become ${status}`);
    }
    if (current.status === 'failed' && (await this.schedules.countLive(owner.id)) >= this.config.schedules.perAgent) {
      throw quotaExceeded(this.config.schedules.perAgent);
    }
    const updated = await this.schedules.setStatus(owner.id, id, status, from, this.clock.now());
    return scheduleView(updated ?? (await this.find(owner, id)));
  }

  /** Cancel: the schedule stays readable with status `cancelled`. */
  async cancel(owner: Agent, id: string) {
    const current = await this.find(owner, id);
    if (current.status === 'cancelled') return scheduleView(current);
    const updated = await this.schedules.setStatus(
      owner.id,
      id,
      'cancelled',
      ['active', 'paused', 'completed', 'failed'],
      this.clock.now(),
    );
    return scheduleView(updated ?? (await this.find(owner, id)));
  }

  /** Another agent's schedule is a plain 404. */
  private async find(owner: Agent, id: string): Promise<Schedule> {
    // An id Roost never mints (a NUL in it would even fail in SQL) names no schedule.
    const schedule = isScheduleId(id) ? await this.schedules.find(owner.id, id) : undefined;
    if (!schedule) throw notFound(`schedule ${id} not found`);
    return schedule;
  }
}

const quotaExceeded = (quota: number) =>
  new AsmtpError(429, 'QUOTA_EXCEEDED', `at most ${quota} active or paused schedules per agent`);
