import { AsmtpError } from './errors';
import { isEnvelopeId } from './ids';
import {
  afterRun,
  firstRunAt,
  isScheduleId,
  newScheduleId,
  runEnvelopeId,
  scheduleView,
  type Schedule,
} from './schedules';

const MIN = 60_000;
const NOW = 1_800_000_000_000;

/** The error `fn` throws, for asserting status and code together. */
function thrown(fn: () => unknown): { status: number; code: string } {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(AsmtpError);
    return { status: (error as AsmtpError).status, code: (error as AsmtpError).code };
  }
  throw new Error('did not throw');
}

describe('firstRunAt (EXTENSIONS.md §3, creation rules)', () => {
  it('refuses an interval below the minimum with 400 INVALID_SCHEDULE, and accepts exactly the minimum', () => {
    expect(thrown(() => firstRunAt({ interval_ms: MIN - 1, max_count: 3 }, NOW, MIN))).toEqual({
      status: 400,
      code: 'INVALID_SCHEDULE',
    });
    expect(firstRunAt({ interval_ms: MIN, max_count: 3 }, NOW, MIN)).toBe(NOW + MIN);
  });

  it('refuses a repeating schedule with neither max_count nor end_at', () => {
    expect(thrown(() => firstRunAt({ interval_ms: MIN }, NOW, MIN))).toEqual({ status: 400, code: 'INVALID_SCHEDULE' });
    expect(thrown(() => firstRunAt({ interval_ms: MIN, start_at: NOW + 5 }, NOW, MIN))).toEqual({
      status: 400,
      code: 'INVALID_SCHEDULE',
    });
  });

  it('accepts a repeating schedule bounded by max_count alone or by end_at alone', () => {
    expect(firstRunAt({ interval_ms: MIN, max_count: 1 }, NOW, MIN)).toBe(NOW + MIN);
    expect(firstRunAt({ interval_ms: MIN, end_at: NOW + 10 * MIN }, NOW, MIN)).toBe(NOW + MIN);
  });

  it('refuses end_at before the first run, and allows end_at exactly at it', () => {
    expect(thrown(() => firstRunAt({ interval_ms: MIN, end_at: NOW + MIN - 1 }, NOW, MIN))).toEqual({
      status: 400,
      code: 'INVALID_SCHEDULE',
    });
    expect(thrown(() => firstRunAt({ start_at: NOW + 1000, end_at: NOW + 999 }, NOW, MIN))).toEqual({
      status: 400,
      code: 'INVALID_SCHEDULE',
    });
    expect(firstRunAt({ interval_ms: MIN, end_at: NOW + MIN }, NOW, MIN)).toBe(NOW + MIN);
  });

  it('a one-shot (no interval_ms) fires at start_at, or now without one; the minimum does not apply to it', () => {
    expect(firstRunAt({}, NOW, MIN)).toBe(NOW);
    expect(firstRunAt({ start_at: NOW + 5 }, NOW, MIN)).toBe(NOW + 5);
    expect(firstRunAt({ start_at: NOW + 5 }, NOW, 10 * MIN)).toBe(NOW + 5);
  });

  it('a repeating schedule fires first at start_at when given, else one interval after now', () => {
    expect(firstRunAt({ interval_ms: 2 * MIN, max_count: 2 }, NOW, MIN)).toBe(NOW + 2 * MIN);
    expect(firstRunAt({ interval_ms: 2 * MIN, max_count: 2, start_at: NOW + 7 }, NOW, MIN)).toBe(NOW + 7);
  });
});

describe('afterRun (EXTENSIONS.md §3, firing rules)', () => {
  const repeating = { interval_ms: MIN, max_count: null, end_at: NOW + 100 * MIN };

  it('a one-shot completes after its run', () => {
    expect(afterRun({ interval_ms: null, max_count: null, end_at: null }, 1, NOW, NOW)).toEqual({
      next_run_at: null,
      completed: true,
    });
  });

  it('an on-time run schedules the next slot one interval later', () => {
    expect(afterRun(repeating, 1, NOW, NOW + 40)).toEqual({ next_run_at: NOW + MIN, completed: false });
  });

  it('max_count completes the schedule on its last run, not before', () => {
    const bounded = { interval_ms: MIN, max_count: 3, end_at: null };
    expect(afterRun(bounded, 2, NOW, NOW)).toEqual({ next_run_at: NOW + MIN, completed: false });
    expect(afterRun(bounded, 3, NOW, NOW)).toEqual({ next_run_at: null, completed: true });
  });

  it('end_at completes the schedule when the next slot would fall after it; a slot exactly at end_at still runs', () => {
    expect(afterRun({ interval_ms: MIN, max_count: null, end_at: NOW + MIN }, 1, NOW, NOW)).toEqual({
      next_run_at: NOW + MIN,
      completed: false,
    });
    expect(afterRun({ interval_ms: MIN, max_count: null, end_at: NOW + MIN - 1 }, 1, NOW, NOW)).toEqual({
      next_run_at: null,
      completed: true,
    });
  });

  it('missed runs are not replayed as a burst: the next run is the first grid slot strictly after now', () => {
    // Workers were down for 10.5 intervals: one firing now, the next on the grid after now.
    const late = afterRun(repeating, 1, NOW, NOW + 10 * MIN + MIN / 2);
    expect(late).toEqual({ next_run_at: NOW + 11 * MIN, completed: false });
    // Exactly on a grid slot: that slot is the one being fired now, so the next is one later.
    expect(afterRun(repeating, 1, NOW, NOW + 10 * MIN)).toEqual({ next_run_at: NOW + 11 * MIN, completed: false });
    // The next run is always on the grid of the original schedule and after now.
    for (const lateBy of [1, MIN - 1, MIN + 1, 37 * MIN + 12_345]) {
      const { next_run_at } = afterRun(repeating, 1, NOW, NOW + lateBy);
      expect(next_run_at! > NOW + lateBy).toBe(true);
      expect((next_run_at! - NOW) % MIN).toBe(0);
      expect(next_run_at! - (NOW + lateBy)).toBeLessThanOrEqual(MIN);
    }
  });

  it('a recovery past end_at completes instead of firing again', () => {
    expect(afterRun({ interval_ms: MIN, max_count: null, end_at: NOW + 5 * MIN }, 1, NOW, NOW + 10 * MIN)).toEqual({
      next_run_at: null,
      completed: true,
    });
  });
});

describe('runEnvelopeId', () => {
  it('is deterministic per (schedule, run) and a valid envelope id carrying the scheduled time', () => {
    const id = runEnvelopeId('sch_01JV3Z8W7Q4M2N6P8R0T2V4X6Y', 3, NOW);
    expect(isEnvelopeId(id)).toBe(true);
    expect(runEnvelopeId('sch_01JV3Z8W7Q4M2N6P8R0T2V4X6Y', 3, NOW)).toBe(id);
    // The 48-bit time prefix is the scheduled time, so the id sorts with its run.
    expect(id.slice(0, 10)).toBe(runEnvelopeId('sch_other', 9, NOW).slice(0, 10));
  });

  it('differs between runs and between schedules', () => {
    const ids = new Set<string>();
    for (const schedule of ['sch_A', 'sch_B'])
      for (let run = 1; run <= 50; run++) ids.add(runEnvelopeId(schedule, run, NOW));
    expect(ids.size).toBe(100);
  });
});

describe('newScheduleId and scheduleView', () => {
  it('mints sch_-prefixed ULIDs', () => {
    expect(newScheduleId()).toMatch(/^sch_01[0-9A-HJKMNP-TV-Z]{24}$/);
    expect(newScheduleId()).not.toBe(newScheduleId());
  });

  it('isScheduleId accepts what newScheduleId mints and nothing else', () => {
    expect(isScheduleId(newScheduleId())).toBe(true);
    for (const id of [
      'sch_',
      'sch_x',
      `sch_${'0'.repeat(26)}`,
      newScheduleId().toLowerCase(),
      'sch_\u0000',
      `${newScheduleId()} `,
      1,
      null,
    ]) {
      expect(isScheduleId(id)).toBe(false);
    }
  });

  it('shows every field of the wire object, unset ones as null, the envelope parsed, and no owner_id', () => {
    const schedule: Schedule = {
      id: 'sch_01JV3Z8W7Q4M2N6P8R0T2V4X6Y',
      owner_id: 7,
      status: 'active',
      envelope: JSON.stringify({ to: ['@a.b'], content_parts: [{ type: 'text', text: 'hi' }] }),
      interval_ms: null,
      next_run_at: NOW,
      last_sent_at: null,
      last_envelope_id: null,
      send_count: 0,
      max_count: null,
      end_at: null,
      last_error: null,
      created_at: NOW,
      updated_at: NOW,
    };
    const view = scheduleView(schedule);
    expect(Object.keys(view)).toEqual([
      'id',
      'status',
      'envelope',
      'interval_ms',
      'next_run_at',
      'last_sent_at',
      'last_envelope_id',
      'send_count',
      'max_count',
      'end_at',
      'last_error',
      'created_at',
      'updated_at',
    ]);
    expect(view.envelope).toEqual({ to: ['@a.b'], content_parts: [{ type: 'text', text: 'hi' }] });
    expect(view.max_count).toBeNull();
  });
});
