import type { Schedule } from '#client';
import { type CliError } from '../output';
import { durationText, minIntervalMs, scheduleInput, scheduleLine, scheduleView } from './schedule';

const base = { text: ['x'] };

function refusal(run: () => unknown): CliError {
  try {
    run();
  } catch (error) {
    return error as CliError;
  }
  throw new Error('expected a CliError');
}

describe('schedule create: local checks', () => {
  it('refuses --every below the minimum, naming the setting and the minimum', () => {
    const error = refusal(() => scheduleInput(['@a.b'], { ...base, every: '5s', count: '2' }, 0, {}));
    expect(error.exitCode).toBe(2);
    expect(error.message).toBe('--every 5s is shorter than the minimum interval, 1m');
    expect(error.hint).toContain('ROOST_SCHEDULE_MIN_INTERVAL_MS');
  });

  it('honours ROOST_SCHEDULE_MIN_INTERVAL_MS from the environment', () => {
    expect(minIntervalMs({ ROOST_SCHEDULE_MIN_INTERVAL_MS: '1000' })).toBe(1000);
    expect(minIntervalMs({ ROOST_SCHEDULE_MIN_INTERVAL_MS: 'x' })).toBe(60_000);
    expect(
      scheduleInput(['@a.b'], { ...base, every: '5s', count: '2' }, 0, { ROOST_SCHEDULE_MIN_INTERVAL_MS: '1000' })
        .interval_ms,
    ).toBe(5000);
  });

  it('a repeating schedule needs --count or --until', () => {
    expect(refusal(() => scheduleInput(['@a.b'], { ...base, every: '1h' }, 0, {})).message).toBe(
      'a repeating schedule needs --count or --until',
    );
    expect(scheduleInput(['@a.b'], { ...base, every: '1h', until: '2d' }, 0, {})).toMatchObject({
      interval_ms: 3_600_000,
      end_at: 172_800_000,
    });
    expect(scheduleInput(['@a.b'], { ...base, at: '10m' }, 0, {})).toMatchObject({ start_at: 600_000 });
  });

  it('checks handles and --count before any request', () => {
    expect(refusal(() => scheduleInput(['bob'], { ...base, at: '1m' }, 0, {})).exitCode).toBe(2);
    expect(refusal(() => scheduleInput(['@a.b'], { ...base, every: '1h', count: '0' }, 0, {})).message).toMatch(
      /--count/,
    );
  });
});

describe('schedule lines', () => {
  const schedule: Schedule = {
    id: 'sch_01JV3Z8W7Q4M2N6P8R0T2V4X6Y',
    status: 'active',
    envelope: { to: ['@a.b'], content_parts: [{ type: 'text', text: 'standup' }] },
    interval_ms: 3_600_000,
    next_run_at: 1_000_000,
    last_sent_at: null,
    last_envelope_id: null,
    send_count: 0,
    max_count: 3,
    end_at: null,
    last_error: null,
    created_at: 0,
    updated_at: 0,
  };

  it('lead with the short id and show next= only while the schedule can run', () => {
    expect(scheduleLine(schedule)).toBe('2V4X6Y active to=@a.b every=1h next=1970-01-01T00:16:40.000Z sent=0/3');
    for (const status of ['cancelled', 'completed', 'failed'] as const)
      expect(scheduleLine({ ...schedule, status })).not.toContain('next=');
    expect(scheduleLine({ ...schedule, status: 'paused' })).toContain('next=');
  });

  it('show is a labelled view, not JSON', () => {
    const view = scheduleView({ ...schedule, status: 'cancelled' });
    expect(view).toContain('schedule:   sch_01JV3Z8W7Q4M2N6P8R0T2V4X6Y (2V4X6Y)');
    expect(view).toContain('repeats:    every 1h');
    expect(view).not.toContain('next run');
    expect(durationText(90_000)).toBe('90s');
  });
});
