import { badRequest } from './errors';
import { deterministicUlid, isEnvelopeId, ulid } from './ids';

/** Schedules (EXTENSIONS.md §3): pure rules; the worker and the REST surface share them. */
export type ScheduleStatus = 'active' | 'paused' | 'completed' | 'cancelled' | 'failed';

export interface Schedule {
  id: string;
  owner_id: number;
  status: ScheduleStatus;
  /** The `POST /messages` body without `id`, as JSON text. */
  envelope: string;
  interval_ms: number | null;
  next_run_at: number | null;
  last_sent_at: number | null;
  last_envelope_id: string | null;
  send_count: number;
  max_count: number | null;
  end_at: number | null;
  last_error: string | null;
  created_at: number;
  updated_at: number;
}

export interface ScheduleTiming {
  interval_ms?: number;
  start_at?: number;
  max_count?: number;
  end_at?: number;
}

export const newScheduleId = (): string => `sch_${ulid()}`;
/** The shape `newScheduleId` mints (`sch_` + a ULID); anything else names no schedule. */
export const isScheduleId = (value: unknown): value is string =>
  typeof value === 'string' && value.startsWith('sch_') && isEnvelopeId(value.slice(4));

const invalid = (message: string) => badRequest('INVALID_SCHEDULE', message);

/**
 * The first run of a new schedule, after its rules: an interval at least `minIntervalMs`; a
 * repeating schedule bounded by `max_count` or `end_at`; `end_at` after the first run. Without
 * `interval_ms` it is a one-shot at `start_at` (now when absent); a repeating schedule without
 * `start_at` first fires one interval after creation.
 */
export function firstRunAt(timing: ScheduleTiming, now: number, minIntervalMs: number): number {
  const repeating = timing.interval_ms !== undefined;
  if (repeating && timing.interval_ms! < minIntervalMs) {
    throw invalid(`interval_ms must be at least ${minIntervalMs}`);
  }
  if (repeating && timing.max_count === undefined && timing.end_at === undefined) {
    throw invalid('a repeating schedule needs max_count or end_at');
  }
  const first = timing.start_at ?? (repeating ? now + timing.interval_ms! : now);
  if (timing.end_at !== undefined && timing.end_at < first) throw invalid('end_at is before the first run');
  return first;
}

/**
 * After the run scheduled at `scheduledAt` was sent: the next run time (null when done) and whether
 * the schedule is complete. Runs missed while workers were down are not replayed as a burst: the
 * next run is the first slot of the interval grid after `now`.
 */
export function afterRun(
  schedule: Pick<Schedule, 'interval_ms' | 'max_count' | 'end_at'>,
  sendCount: number,
  scheduledAt: number,
  now: number,
): { next_run_at: number | null; completed: boolean } {
  const interval = schedule.interval_ms;
  if (interval === null) return { next_run_at: null, completed: true };
  if (schedule.max_count !== null && sendCount >= schedule.max_count) return { next_run_at: null, completed: true };
  let next = scheduledAt + interval;
  if (next <= now) next = scheduledAt + interval * (Math.floor((now - scheduledAt) / interval) + 1);
  if (schedule.end_at !== null && next > schedule.end_at) return { next_run_at: null, completed: true };
  return { next_run_at: next, completed: false };
}

/** Run `n` of a schedule always sends the same envelope id, so a repeated firing is a replay. */
export const runEnvelopeId = (scheduleId: string, run: number, scheduledAt: number): string =>
  deterministicUlid(`schedule:${scheduleId}:${run}`, scheduledAt);

/** The schedule object of the wire (EXTENSIONS.md §3); unset fields are null. */
export function scheduleView(schedule: Schedule): Record<string, unknown> {
  return {
    id: schedule.id,
    status: schedule.status,
    envelope: JSON.parse(schedule.envelope) as unknown,
    interval_ms: schedule.interval_ms,
    next_run_at: schedule.next_run_at,
    last_sent_at: schedule.last_sent_at,
    last_envelope_id: schedule.last_envelope_id,
    send_count: schedule.send_count,
    max_count: schedule.max_count,
    end_at: schedule.end_at,
    last_error: schedule.last_error,
    created_at: schedule.created_at,
    updated_at: schedule.updated_at,
  };
}
