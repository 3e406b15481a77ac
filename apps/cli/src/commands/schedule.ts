import type { Schedule, ScheduleInput } from '../../../../libs/client/src/types';
import { CliError, EXIT } from '../output';
import type { Session } from '../session';
import { parseDuration, parseWhen } from '../time';
import type { ComposeOptions } from './messages';


export interface ScheduleOptions extends ComposeOptions {
  every?: string;
  at?: string;
  count?: string;
  until?: string;
}

const when = (ms: number | null) => (ms === null ? '-' : new Date(ms).toISOString());

export const scheduleLine = (s: Schedule) =>
  `${s.id} ${s.status} to=${s.envelope.to.join(',')} every=${s.interval_ms === null ? 'once' : `${s.interval_ms}ms`} next=${when(s.next_run_at)} sent=${s.send_count}${s.max_count ? `/${s.max_count}` : ''}${s.last_error ? ` error=${s.last_error}` : ''}`;

export async function create(session: Session, to: string[], options: ScheduleOptions): Promise<void> {
  const texts = options.text ?? [];
  const data = (options.data ?? []).map((d) => {
    try {
      return { type: 'data' as const, data: JSON.parse(d) as Record<string, unknown> };
    } catch {
      throw new CliError(`--data is not JSON: ${d}`, EXIT.USAGE, undefined, 'BAD_DATA');
    }
  });
  const content_parts = [...texts.map((text) => ({ type: 'text' as const, text })), ...data];
  if (content_parts.length === 0) throw new CliError('nothing to send', EXIT.USAGE, 'give --text or --data', 'EMPTY');
  const input: ScheduleInput = {
    envelope: {
      to,
      content_parts,
      ...(options.subject !== undefined ? { subject: options.subject } : {}),
      ...(options.cc?.length ? { cc: options.cc } : {}),
    },
  };
  if (options.every) input.interval_ms = parseDuration(options.every);
  if (options.at) input.start_at = parseWhen(options.at);
  if (options.count) input.max_count = Number(options.count);
  if (options.until) input.end_at = parseWhen(options.until);
  if (!options.every && !options.at) {
    throw new CliError('a schedule needs --at (one delayed send) or --every (repeating)', EXIT.USAGE, 'e.g. --at 10m, --at 2030-01-01T09:00:00Z, --every 1h --count 5', 'BAD_SCHEDULE');
  }
  const schedule = await session.client().createSchedule(input);
  session.print.out(() => `created ${scheduleLine(schedule)}`, schedule);
}

export async function list(session: Session): Promise<void> {
  const schedules = await session.client().schedules();
  session.print.out(() => (schedules.length ? schedules.map(scheduleLine).join('\n') : 'no schedules'), { schedules });
}

export async function show(session: Session, id: string): Promise<void> {
  const schedule = await session.client().schedule(id);
  session.print.out(() => JSON.stringify(schedule, null, 2), schedule);
}

export async function setStatus(session: Session, id: string, status: 'paused' | 'active'): Promise<void> {
  const schedule = await session.client().setScheduleStatus(id, status);
  session.print.out(() => scheduleLine(schedule), schedule);
}

export async function cancel(session: Session, id: string): Promise<void> {
  const schedule = await session.client().cancelSchedule(id);
  session.print.out(() => scheduleLine(schedule), schedule);
}
