import type { Fault, FaultKind } from './faults';
import type { Attempt, Send } from './load';

/** An attempt without an HTTP answer whose connection was reset (not refused, not timed out). */
export function isReset(attempt: Pick<Attempt, 'status' | 'code'>): boolean {
  return attempt.status === 0 && ['ECONNRESET', 'UND_ERR_SOCKET', 'EPIPE'].includes(attempt.code ?? '');
}

/** The status column of an attempt: the HTTP status, or why there was none. */
export function outcome(attempt: Pick<Attempt, 'status' | 'code'>): string {
  if (attempt.status !== 0) return String(attempt.status);
  if (isReset(attempt)) return 'reset';
  if (attempt.code === 'ECONNREFUSED') return 'refused';
  if (attempt.code === 'TimeoutError') return 'timeout';
  return 'no answer';
}

export interface FaultFigures {
  kind: FaultKind;
  target: string;
  at_s: number;
  mode?: string;
  detail?: string;
  down_ms: number;
  /** Requests started while the fault was on (until its target was up again, plus a second). */
  requests: number;
  /** Failed requests by status (503, 500, …) or by why there was no answer (reset, refused, timeout). */
  failed: Record<string, number>;
  resets: number;
  /** Seconds from the end of the fault until its target was up and a new request got 202; null: never. */
  recovery_s: number | null;
  /** 202s given during the fault that are not in every recipient's mailbox. */
  lost: number;
  /** 202s given during the fault stored more than once in a mailbox. */
  duplicates: number;
  /** lock-mailbox: the longest a send to the locked mailbox waited for its answer. */
  max_wait_ms?: number;
}

export interface KindFigures {
  kind: FaultKind;
  count: number;
  requests: number;
  failed: Record<string, number>;
  resets: number;
  /** The slowest recovery of this kind (null if one never recovered). */
  recovery_s_max: number | null;
  lost: number;
  duplicates: number;
}

export interface FigureInput {
  faults: Fault[];
  /** Every send (load and final burst), with every attempt. */
  sends: Send[];
  /** The api node names in the order of `Attempt.api`. */
  apiNames: string[];
  lostIds: Set<string>;
  duplicateIds: Set<string>;
  startedAt: number;
  /** The clock for faults still open (default: now). */
  now?: number;
}

const GRACE_MS = 1_000;
const round = (value: number) => Math.round(value * 10) / 10;
const inc = (map: Record<string, number>, key: string, by = 1) => (map[key] = (map[key] ?? 0) + by);

/**
 * Per fault: the requests started while it was on, how they failed, the resets among them, how
 * long the system took to recover once the fault ended, and whether a 202 given meanwhile was
 * lost or duplicated. Then the failures these figures prove (a drain that reset a request, a
 * locked mailbox that answered other than 202/503, a fault never recovered from).
 */
/** Faults that leave an api process down (its requests refused or reset) for a while. */
const API_DOWN_KINDS = new Set(['kill-api', 'sigterm', 'outage-api']);

export function faultFigures(input: FigureInput): { each: FaultFigures[]; byKind: KindFigures[]; failures: string[] } {
  const now = input.now ?? Date.now();
  const failures: string[] = [];
  const attempts = input.sends.flatMap((send) => send.attempts.map((attempt) => ({ send, attempt })));
  const each = input.faults.map((fault): FaultFigures => {
    const healed = fault.healedAt ?? fault.upAt ?? fault.at + fault.downMs;
    const windowEnd = (fault.upAt ?? Math.max(healed, now)) + GRACE_MS;
    const concerns = (send: Send) => fault.kind !== 'lock-mailbox' || [...send.to, ...send.cc].includes(fault.target);
    const during = attempts.filter(
      ({ send, attempt }) => attempt.at >= fault.at && attempt.at <= windowEnd && concerns(send),
    );
    const failed: Record<string, number> = {};
    for (const { attempt } of during) if (attempt.status !== 202) inc(failed, outcome(attempt));
    const accepted = new Set(
      during.filter(({ send, attempt }) => attempt.status === 202 && send.accepted).map(({ send }) => send.id),
    );
    const firstOk = attempts
      .filter(({ send, attempt }) => attempt.status === 202 && attempt.at >= healed && concerns(send))
      .reduce((min, { attempt }) => Math.min(min, attempt.at + attempt.ms), Infinity);
    const recovered = Math.max(fault.upAt ?? healed, firstOk);
    const figures: FaultFigures = {
      kind: fault.kind,
      target: fault.target,
      at_s: round((fault.at - input.startedAt) / 1000),
      ...(fault.mode ? { mode: fault.mode } : {}),
      ...(fault.detail ? { detail: fault.detail } : {}),
      down_ms: fault.downMs,
      requests: during.length,
      failed,
      resets: during.filter(({ attempt }) => isReset(attempt)).length,
      recovery_s: Number.isFinite(recovered) ? round(Math.max(0, recovered - healed) / 1000) : null,
      lost: [...accepted].filter((id) => input.lostIds.has(id)).length,
      duplicates: [...accepted].filter((id) => input.duplicateIds.has(id)).length,
    };
    const label = `${fault.kind} ${fault.target} at ${figures.at_s} s`;
    if (figures.recovery_s === null) failures.push(`${label}: never recovered (no 202 after it ended)`);
    if (figures.lost > 0) failures.push(`${label}: ${figures.lost} envelopes answered 202 meanwhile were lost`);
    if (figures.duplicates > 0)
      failures.push(`${label}: ${figures.duplicates} envelopes answered 202 meanwhile were duplicated`);
    if (fault.kind === 'sigterm') {
      const drain = fault.drain;
      if (drain && (drain.signal !== null || drain.code !== 0)) {
        failures.push(
          `${label}: the drain did not end by itself (exit ${drain.signal ?? drain.code} after ${drain.ms} ms)`,
        );
      }
      // A request to the draining api must get an answer (202, or 503 with Connection: close) or
      // be refused; a reset means an in-flight request was cut.
      const api = input.apiNames.indexOf(fault.target);
      if (api >= 0) {
        const drainEnd = fault.at + (drain?.ms ?? fault.downMs);
        const cut = during.filter(
          ({ attempt }) => attempt.api === api && attempt.at <= drainEnd && isReset(attempt),
        ).length;
        if (cut > 0) failures.push(`${label}: ${cut} in-flight requests to the draining node were reset`);
      }
    }
    if (fault.kind === 'lock-mailbox') {
      figures.max_wait_ms = during.reduce((max, { attempt }) => Math.max(max, attempt.ms), 0);
      // A refusal or reset by an api another fault had down (kill -9, SIGTERM, a whole-role
      // outage, overlapping this one) is that fault's, not the lock's: a request started while the
      // api was down, or one still in flight when it was taken down (sends queued behind the lock
      // wait seconds, so a kill -9 of their api meanwhile resets them all: CI saw 47 at once).
      const apiDown = (attempt: Attempt) =>
        attempt.status === 0 &&
        input.faults.some(
          (other) =>
            other !== fault &&
            API_DOWN_KINDS.has(other.kind) &&
            other.target.split('+').includes(input.apiNames[attempt.api]) &&
            attempt.at + attempt.ms >= other.at &&
            attempt.at <= (other.upAt ?? now) + GRACE_MS,
        );
      const lockFailed: Record<string, number> = {};
      for (const { attempt } of during)
        if (attempt.status !== 202 && attempt.status !== 503 && !apiDown(attempt)) inc(lockFailed, outcome(attempt));
      const other = Object.keys(lockFailed);
      if (other.length > 0) {
        failures.push(
          `${label}: sends to the locked mailbox answered ${other.map((s) => `${s}×${lockFailed[s]}`).join(', ')} (only 202 or 503 expected)`,
        );
      }
    }
    return figures;
  });

  const kinds = [...new Set(each.map((f) => f.kind))];
  const byKind = kinds.map((kind): KindFigures => {
    const of = each.filter((f) => f.kind === kind);
    const failed: Record<string, number> = {};
    for (const f of of) for (const [status, n] of Object.entries(f.failed)) inc(failed, status, n);
    return {
      kind,
      count: of.length,
      requests: of.reduce((a, f) => a + f.requests, 0),
      failed,
      resets: of.reduce((a, f) => a + f.resets, 0),
      recovery_s_max: of.some((f) => f.recovery_s === null) ? null : Math.max(...of.map((f) => f.recovery_s!)),
      lost: of.reduce((a, f) => a + f.lost, 0),
      duplicates: of.reduce((a, f) => a + f.duplicates, 0),
    };
  });
  return { each, byKind, failures };
}

/** The per-kind rows of the summary table. */
export function faultTable(byKind: KindFigures[]): string[] {
  const header = ['fault', 'n', 'requests', 'failed by status', 'resets', 'recovery s (max)', 'lost', 'dup'];
  const rows = byKind.map((k) => [
    k.kind,
    String(k.count),
    String(k.requests),
    Object.entries(k.failed)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([status, n]) => `${status}×${n}`)
      .join(' ') || '-',
    String(k.resets),
    k.recovery_s_max === null ? 'NEVER' : String(k.recovery_s_max),
    String(k.lost),
    String(k.duplicates),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i])).join(' | ')} |`;
  const rule = `+${widths.map((w) => '-'.repeat(w + 2)).join('+')}+`;
  return [rule, line(header), rule, ...rows.map(line), rule];
}

export interface PostgresOutage {
  start: number;
  end: number;
  /**
   * A blackhole partition of Postgres overlapped it, so no node could see the crash: every query
   * and new connection stalled in the proxy instead of failing. Its requests wait, within their
   * timeouts, and may well get 202 once both faults are over, so it need not produce a 503.
   */
  masked: boolean;
}

/** Each Postgres restart as an outage, from its crash until it accepted queries again. */
export function postgresOutages(faults: Fault[], now: number): PostgresOutage[] {
  const blackholes = faults.filter((f) => f.kind === 'partition-postgres' && f.mode === 'blackhole');
  return faults
    .filter((fault) => fault.kind === 'restart-postgres')
    .map((fault) => {
      const start = fault.at;
      const end = fault.upAt ?? now;
      return { start, end, masked: blackholes.some((b) => b.at <= end && (b.healedAt ?? now) >= start) };
    });
}
