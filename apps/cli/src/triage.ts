/**
 * The triage line of `roost inbox` and `roost hook`: one unread header in ≤ 30 tokens, so a model
 * can scan 80 of them for the price of a few JSON headers. Pure, dependency-free (the hook's fast
 * path loads it).
 *
 *   P8R0T2 5m @acme.alice "Deploy plan for Friday" text ~120t re !secret
 *
 * short id (last 6 characters of the ULID; every command takes it), age, sender, subject (36 chars
 * at most), type hint, size hint (approximate tokens), then markers: `re` (a reply), `cc+N`,
 * `!flag` (content guard), `rcpt:<status>` (a receipt), `sched` (sent by a schedule).
 */

export interface TriageHeader {
  id: string;
  from: string;
  to?: string[];
  cc?: string[];
  subject?: string;
  in_reply_to?: string;
  type_hint: string;
  size_hint?: number;
  created_at: number;
  flags?: string[];
  receipt?: { envelope_id: string; status: string };
  schedule_id?: string;
}

export const SHORT_ID_LENGTH = 6;
export const SUBJECT_MAX = 36;

export const shortId = (id: string): string => id.slice(-SHORT_ID_LENGTH);

export function age(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86_400)}d`;
}

export function size(tokens: number | undefined): string {
  if (tokens === undefined) return '';
  if (tokens < 1000) return `~${tokens}t`;
  if (tokens < 10_000) return `~${(tokens / 1000).toFixed(1)}kt`;
  return `~${Math.round(tokens / 1000)}kt`;
}

/** One line, no newline; the subject loses a leading `Re:` (the `re` marker says it) and is cut at 36. */
export function subjectText(subject: string | undefined): string {
  if (subject === undefined) return '-';
  let text = subject.replace(/[\u0000-\u001f\u007f]+/g, ' ').replace(/\s+/g, ' ').trim();
  text = text.replace(/^(re|fwd?):\s*/i, '');
  if (text === '') return '-';
  if ([...text].length > SUBJECT_MAX) text = `${[...text].slice(0, SUBJECT_MAX - 1).join('').trimEnd()}…`;
  return `"${text.replace(/"/g, "'")}"`;
}

export function triageLine(header: TriageHeader, now: number = Date.now()): string {
  const parts = [shortId(header.id), age(now - header.created_at), header.from, subjectText(header.subject), header.type_hint];
  const sized = size(header.size_hint);
  if (sized) parts.push(sized);
  if (header.in_reply_to) parts.push('re');
  if (header.cc?.length) parts.push(`cc+${header.cc.length}`);
  for (const flag of header.flags ?? []) parts.push(`!${flag}`);
  if (header.receipt) parts.push(`rcpt:${header.receipt.status}`);
  if (header.schedule_id) parts.push('sched');
  return parts.join(' ');
}

/** The block `roost inbox` prints: a count line, then one line per header. */
export function triageBlock(headers: TriageHeader[], now: number = Date.now(), more = false): string {
  if (headers.length === 0) return 'no unread mail';
  const lines = headers.map((header) => triageLine(header, now));
  return [`${headers.length}${more ? '+' : ''} unread (id age from subject type size):`, ...lines].join('\n');
}
