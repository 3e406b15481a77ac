import { RoostError, shortId, type Schedule, type ScheduleInput } from '#client';
import { positiveInt, requireHandles } from '../args';
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

/** The operator's default minimum interval (EXTENSIONS.md §3); an operator may set another. */
export const DEFAULT_MIN_INTERVAL_MS = 60_000;

/**
 * The minimum `--every` the CLI checks before asking: ROOST_SCHEDULE_MIN_INTERVAL_MS when set in the
 * CLI's environment (the same setting the operator reads), else the operator's default.
 */
export function minIntervalMs(env: NodeJS.ProcessEnv = process.env): number {
  const value = Number(env.ROOST_SCHEDULE_MIN_INTERVAL_MS);
  return Number.isSafeInteger(value) && value >= 1 ? value : DEFAULT_MIN_INTERVAL_MS;
}

const when = (ms: number | null) => (ms === null ? '-' : new Date(ms).toISOString());

/** `1h`, `90s`, `1500ms`: the largest unit that divides the interval. */
export function durationText(ms: number): string {
  for (const [unit, size] of [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1000],
  ] as const) {
    if (ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}

const live = (s: Schedule) => s.status === 'active' || s.status === 'paused';

export const scheduleLine = (s: Schedule) =>
  [
    `${shortId(s.id)} ${s.status} to=${s.envelope.to.join(',')}`,
    `every=${s.interval_ms === null ? 'once' : durationText(s.interval_ms)}`,
    // A cancelled, completed or failed schedule never runs again: no next run to show.
    ...(live(s) ? [`next=${when(s.next_run_at)}`] : []),
    `sent=${s.send_count}${s.max_count ? `/${s.max_count}` : ''}`,
    ...(s.end_at !== null ? [`until=${when(s.end_at)}`] : []),
    ...(s.last_error ? [`error=${s.last_error}`] : []),
  ].join(' ');

/** The human view of `schedule show`. */
export function scheduleView(s: Schedule): string {
  const text = s.envelope.content_parts
    .map((p) => (p.type === 'text' ? String((p as { text: string }).text) : `[${p.type}]`))
    .join(' ');
  const rows: Array<[string, string | undefined]> = [
    ['schedule', `${s.id} (${shortId(s.id)})`],
    ['status', s.status],
    ['to', s.envelope.to.join(', ')],
    ['cc', s.envelope.cc?.join(', ')],
    ['subject', s.envelope.subject],
    ['content', text.length > 120 ? `${text.slice(0, 119)}…` : text],
    ['repeats', s.interval_ms === null ? 'once' : `every ${durationText(s.interval_ms)}`],
    ['next run', live(s) ? when(s.next_run_at) : undefined],
    ['sent', `${s.send_count}${s.max_count ? ` of ${s.max_count}` : ''}`],
    ['until', s.end_at !== null ? when(s.end_at) : undefined],
    ['last sent', s.last_sent_at !== null ? `${when(s.last_sent_at)} ${s.last_envelope_id ?? ''}`.trim() : undefined],
    ['last error', s.last_error ?? undefined],
    ['created', when(s.created_at)],
  ];
  return rows
    .filter(([, value]) => value !== undefined && value !== '')
    .map(([key, value]) => `${`${key}:`.padEnd(12)}${value}`)
    .join('\n');
}

/** The schedule input after the CLI's own checks, so a mistake never needs a round trip. */
export function scheduleInput(
  to: string[],
  options: ScheduleOptions,
  now = Date.now(),
  env: NodeJS.ProcessEnv = process.env,
): ScheduleInput {
  requireHandles(to, 'recipient');
  requireHandles(options.cc, '--cc');
  const data = (options.data ?? []).map((d) => {
    try {
      return { type: 'data' as const, data: JSON.parse(d) as Record<string, unknown> };
    } catch {
      throw new CliError(`--data is not JSON: ${d}`, EXIT.USAGE, undefined, 'BAD_DATA');
    }
  });
  const content_parts = [...(options.text ?? []).map((text) => ({ type: 'text' as const, text })), ...data];
  if (content_parts.length === 0) throw new CliError('nothing to send', EXIT.USAGE, 'give --text or --data', 'EMPTY');
  if (!options.every && !options.at) {
    throw new CliError(
      'a schedule needs --at (one delayed send) or --every (repeating)',
      EXIT.USAGE,
      'e.g. --at 10m, --at 2030-01-01T09:00:00Z, --every 1h --count 5',
      'BAD_SCHEDULE',
    );
  }
  const input: ScheduleInput = {
    envelope: {
      to,
      content_parts,
      ...(options.subject !== undefined ? { subject: options.subject } : {}),
      ...(options.cc?.length ? { cc: options.cc } : {}),
    },
  };
  if (options.at) input.start_at = parseWhen(options.at, now);
  if (options.every) {
    const interval = parseDuration(options.every);
    const min = minIntervalMs(env);
    if (interval < min) {
      throw new CliError(
        `--every ${options.every} is shorter than the minimum interval, ${durationText(min)}`,
        EXIT.USAGE,
        `the operator's minimum is ROOST_SCHEDULE_MIN_INTERVAL_MS (default ${durationText(DEFAULT_MIN_INTERVAL_MS)}); use --every ${durationText(min)} or more`,
        'BAD_SCHEDULE',
      );
    }
    if (options.count === undefined && options.until === undefined) {
      throw new CliError(
        'a repeating schedule needs --count or --until',
        EXIT.USAGE,
        `e.g. --every ${options.every} --count 5, or --every ${options.every} --until 2030-01-01T09:00:00Z`,
        'BAD_SCHEDULE',
      );
    }
    input.interval_ms = interval;
  }
  if (options.count !== undefined) input.max_count = positiveInt(options.count, '--count');
  if (options.until !== undefined) input.end_at = parseWhen(options.until, now);
  return input;
}

/** The operator's refusal in the CLI's words: `--every`, not `interval_ms`. */
function scheduleRefusal(error: unknown): unknown {
  if (!(error instanceof RoostError) || error.code !== 'INVALID_SCHEDULE') return error;
  const words = error.message
    .replace(/\binterval_ms\b/g, '--every (ms)')
    .replace(/\bmax_count\b/g, '--count')
    .replace(/\bend_at\b/g, '--until')
    .replace(/\bstart_at\b/g, '--at');
  const hint = /--every/.test(words)
    ? "the operator's minimum interval is its ROOST_SCHEDULE_MIN_INTERVAL_MS setting"
    : undefined;
  return new CliError(`refused (400 INVALID_SCHEDULE): ${words}`, EXIT.REJECTED, hint, error.code);
}

/** A full schedule id (`sch_` + ULID), or the short id the lists show (a suffix of ≥ 4 characters). */
export async function resolveScheduleId(session: Session, id: string): Promise<string> {
  if (/^sch_01[0-9A-HJKMNP-TV-Z]{24}$/i.test(id)) return `sch_${id.slice(4).toUpperCase()}`;
  const wanted = id.toUpperCase();
  if (!/^[0-9A-HJKMNP-TV-Z]{4,26}$/.test(wanted)) {
    throw new CliError(
      `${id} is neither a schedule id nor a short id`,
      EXIT.USAGE,
      'use sch_… or the short id `roost schedule list` shows',
      'BAD_ID',
    );
  }
  const matches = (await session.client().schedules())
    .filter((s) => s.id.toUpperCase().endsWith(wanted))
    .map((s) => s.id);
  if (matches.length === 1) return matches[0];
  if (matches.length === 0)
    throw new CliError(
      `no schedule of yours ends in ${wanted}`,
      EXIT.NOT_FOUND,
      'see `roost schedule list`',
      'NOT_FOUND',
    );
  throw new CliError(
    `${wanted} is ambiguous: ${matches.join(', ')}`,
    EXIT.USAGE,
    'use more characters, or the full id',
    'AMBIGUOUS_ID',
  );
}

export async function create(session: Session, to: string[], options: ScheduleOptions): Promise<void> {
  const input = scheduleInput(to, options);
  const schedule = await session
    .client()
    .createSchedule(input)
    .catch((error: unknown) => {
      throw scheduleRefusal(error);
    });
  session.print.out(() => `created ${schedule.id}\n${scheduleLine(schedule)}`, schedule);
}

export async function list(session: Session): Promise<void> {
  const schedules = await session.client().schedules();
  session.print.out(() => (schedules.length ? schedules.map(scheduleLine).join('\n') : 'no schedules'), { schedules });
}

export async function show(session: Session, id: string): Promise<void> {
  const schedule = await session.client().schedule(await resolveScheduleId(session, id));
  session.print.out(() => scheduleView(schedule), schedule);
}

export async function setStatus(session: Session, id: string, status: 'paused' | 'active'): Promise<void> {
  const schedule = await session.client().setScheduleStatus(await resolveScheduleId(session, id), status);
  session.print.out(() => scheduleLine(schedule), schedule);
}

export async function cancel(session: Session, id: string): Promise<void> {
  const schedule = await session.client().cancelSchedule(await resolveScheduleId(session, id));
  session.print.out(() => scheduleLine(schedule), schedule);
}
