import { createHash } from 'node:crypto';

/**
 * SAMP v1 (Simple Agent Message Protocol) records and their mapping onto ASMTP envelopes; the
 * field mapping is documented in docs/samp.md. Pure functions: the I/O is in commands/samp.ts.
 */

export interface SampRecord {
  id: string;
  ts: number;
  from: string;
  to: string;
  thread: string;
  body: string;
  /**
   * Roost's own fields on records it exports (SAMP readers ignore unknown fields): the envelope id
   * and sender handle the record came from, so importing it back recognises the envelope.
   */
  asmtp_id?: string;
  asmtp_from?: string;
}

const ENVELOPE_ID_RE = /^01[0-9A-HJKMNP-TV-Z]{24}$/;

export const ALIAS_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const HANDLE_RE = /^@[a-z0-9_-]+\.[a-z0-9_-]+$/;

/** JSON with sorted keys, no whitespace, non-ASCII raw: what SAMP hashes. */
function canonical(value: Record<string, string | number>): string {
  return `{${Object.keys(value)
    .sort()
    .map((key) => `${JSON.stringify(key)}:${JSON.stringify(value[key])}`)
    .join(',')}}`;
}

/** First 16 hex of SHA-256 over `{body, from, thread, to, ts}` (body NFC-normalised). */
export function sampId(record: Omit<SampRecord, 'id'>): string {
  const json = canonical({
    body: record.body.normalize('NFC'),
    from: record.from,
    thread: record.thread,
    to: record.to,
    ts: record.ts,
  });
  return createHash('sha256').update(json, 'utf8').digest('hex').slice(0, 16);
}

/** The thread of a first message: `YYYY-MM-DD-<from>-<slug>` (UTC date, slug of the first body line). */
export function deriveThread(from: string, ts: number, body: string): string {
  const date = new Date(ts * 1000).toISOString().slice(0, 10);
  const slug =
    (body.split('\n')[0] ?? '')
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '-')
      .replace(/^-+|-+$/g, '')
      .slice(0, 40)
      .replace(/-+$/g, '') || 'msg';
  return `${date}-${from}-${slug}`;
}

/** `[thread:X]` prefix: sets the thread and is stripped from the body. */
export function splitThreadPrefix(body: string): { thread?: string; body: string } {
  const m = /^\[thread:([^\]]*)\]\s?/.exec(body);
  if (!m) return { body };
  // eslint-disable-next-line no-control-regex -- a thread tag must not carry control characters
  return { thread: m[1].replace(/[\u0000-\u001f\u007f]/g, '').trim(), body: body.slice(m[0].length) };
}

/** One JSONL line → a record, or the reason it is skipped (never abort on a bad line). */
export function parseRecord(line: string): SampRecord | { error: string } {
  let value: Record<string, unknown>;
  try {
    value = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return { error: 'not JSON' };
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) return { error: 'not an object' };
  const { ts, from, to } = value;
  if (typeof ts !== 'number' || !Number.isInteger(ts) || ts < 0) return { error: 'ts must be integer seconds' };
  if (typeof from !== 'string' || !ALIAS_RE.test(from)) return { error: 'bad from' };
  if (typeof to !== 'string' || !ALIAS_RE.test(to)) return { error: 'bad to' };
  if (typeof value.body !== 'string') return { error: 'body must be a string' };
  let body = value.body;
  let thread = typeof value.thread === 'string' ? value.thread : undefined;
  if (thread === undefined) {
    const split = splitThreadPrefix(body);
    body = split.body;
    thread = split.thread ?? deriveThread(from, ts, body);
  }
  const id =
    typeof value.id === 'string' && /^[0-9a-f]{16}$/.test(value.id) ? value.id : sampId({ ts, from, to, thread, body });
  const origin =
    typeof value.asmtp_id === 'string' &&
    ENVELOPE_ID_RE.test(value.asmtp_id) &&
    typeof value.asmtp_from === 'string' &&
    HANDLE_RE.test(value.asmtp_from)
      ? { asmtp_id: value.asmtp_id, asmtp_from: value.asmtp_from }
      : {};
  return { id, ts, from, to, thread, body, ...origin };
}

/** Read a log file's lines: dedup by `(from, id)`, order by `ts` (stable: line order breaks ties). */
export function readLog(text: string): { records: SampRecord[]; skipped: Array<{ line: number; error: string }> } {
  const records: SampRecord[] = [];
  const skipped: Array<{ line: number; error: string }> = [];
  const seen = new Set<string>();
  text.split('\n').forEach((line, index) => {
    if (line.trim() === '') return;
    const parsed = parseRecord(line);
    if ('error' in parsed) {
      skipped.push({ line: index + 1, error: parsed.error });
      return;
    }
    const key = `${parsed.from}\u0000${parsed.id}`;
    if (seen.has(key)) return;
    seen.add(key);
    records.push(parsed);
  });
  records.sort((a, b) => a.ts - b.ts);
  return { records, skipped };
}

/** Alias ↔ handle: explicit `alias=@o.n` pairs first, else `@<owner>.<alias lower-cased, other chars → ->`. */
export class AliasMap {
  private readonly toHandle = new Map<string, string>();
  private readonly toAlias = new Map<string, string>();

  constructor(
    pairs: string[] = [],
    private readonly owner?: string,
  ) {
    for (const pair of pairs) {
      const [alias, handle] = pair.split('=');
      if (!alias || !ALIAS_RE.test(alias) || !handle || !HANDLE_RE.test(handle))
        throw new Error(`--map wants alias=@owner.name, got ${pair}`);
      this.toHandle.set(alias, handle);
      this.toAlias.set(handle, alias);
    }
  }

  handle(alias: string): string | undefined {
    const mapped = this.toHandle.get(alias);
    if (mapped) return mapped;
    if (!this.owner) return undefined;
    const name = alias.toLowerCase().replace(/[^a-z0-9_-]+/g, '-');
    const handle = `@${this.owner}.${name}`;
    return HANDLE_RE.test(handle) ? handle : undefined;
  }

  alias(handle: string): string {
    const mapped = this.toAlias.get(handle);
    if (mapped) return mapped;
    const name = handle.slice(handle.indexOf('.') + 1);
    return ALIAS_RE.test(name) ? name : `a${name}`.slice(0, 64);
  }
}

/**
 * The deterministic envelope-id key of a record: SAMP identifies a record by `(from, id)`, and the
 * sender is the mapped handle, not the alias, so importing one folder for two owners gives two
 * sets of ids instead of colliding (`ID_COLLISION`: an id belongs to one sender).
 */
export const importKey = (record: SampRecord, fromHandle: string) => `samp/v1:${fromHandle}:${record.id}`;

/**
 * The envelope id a record imports as: the envelope it was exported from when it names one and
 * the sender maps to the same handle (the same envelope coming home), else derived from the key.
 */
export function importId(
  record: SampRecord,
  fromHandle: string,
  derive: (key: string, ms: number) => string,
): { id: string; original: boolean } {
  if (record.asmtp_id && record.asmtp_from === fromHandle) return { id: record.asmtp_id, original: true };
  return { id: derive(importKey(record, fromHandle), record.ts * 1000), original: false };
}

export interface Refusal {
  file: string;
  id: string;
  code: string;
  message: string;
}

const REFUSAL_HINTS: Record<string, string> = {
  ID_COLLISION: 'these envelope ids belong to another sender: map the aliases to other handles (--owner, --map)',
  NOT_FOUND:
    'a recipient is unknown or does not accept mail from the sender: create it, or map the alias elsewhere (--map alias=@o.n)',
  RETRY_MISMATCH: 'an envelope with this id but other content exists: the record changed since it was imported',
};

/** A refused batch in a few lines: counts per code, then the first few reasons, each cut short. */
export function refusalSummary(refused: readonly Refusal[], shown = 3): { text: string; hint?: string } {
  const counts = new Map<string, number>();
  for (const r of refused) counts.set(r.code, (counts.get(r.code) ?? 0) + 1);
  const byCount = [...counts].sort((a, b) => b[1] - a[1]);
  const cut = (text: string) => (text.length > 100 ? `${text.slice(0, 99)}…` : text);
  const lines = [
    `refused ${refused.length}: ${byCount.map(([code, n]) => `${code} ×${n}`).join(', ')}`,
    ...refused.slice(0, shown).map((r) => `  ${r.file.split('/').pop()} ${r.id}: ${r.code} ${cut(r.message)}`),
    ...(refused.length > shown ? [`  … ${refused.length - shown} more (--json lists them all)`] : []),
  ];
  const hints = byCount.map(([code]) => REFUSAL_HINTS[code]).filter((h): h is string => h !== undefined);
  return { text: lines.join('\n'), ...(hints.length ? { hint: hints.join('; ') } : {}) };
}
