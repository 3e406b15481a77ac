import { CliError, EXIT } from './output';

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/** `90s`, `15m`, `1h30m`, `2d`, or plain milliseconds. */
export function parseDuration(text: string): number {
  if (/^\d+$/.test(text)) return Number(text);
  const re = /(\d+(?:\.\d+)?)(ms|s|m|h|d|w)/gy;
  let total = 0;
  let matched = 0;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    total += Number(m[1]) * UNITS[m[2]];
    matched = re.lastIndex;
  }
  if (matched !== text.length || matched === 0) {
    throw new CliError(`not a duration: ${text}`, EXIT.USAGE, 'use e.g. 90s, 15m, 1h30m, 2d', 'BAD_DURATION');
  }
  return Math.round(total);
}

/** An ISO date, epoch milliseconds, or a duration from now (`10m`). */
export function parseWhen(text: string, now = Date.now()): number {
  if (/^\d{13,}$/.test(text)) return Number(text);
  if (/^\d/.test(text) && /[-T:]/.test(text)) {
    const ms = Date.parse(text);
    if (Number.isNaN(ms))
      throw new CliError(`not a date: ${text}`, EXIT.USAGE, 'use ISO 8601, e.g. 2030-01-01T09:00:00Z', 'BAD_DATE');
    return ms;
  }
  return now + parseDuration(text);
}
