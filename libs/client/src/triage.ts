/**
 * The triage line of `roost inbox`, `roost hook` and the MCP `inbox` tool: one unread header in ≤ 30 tokens, so a model
 * can scan 80 of them for the price of a few JSON headers. Pure, dependency-free (the hook's fast
 * path loads it).
 *
 *   P8R0T2 5m @acme.alice "Deploy plan for Friday" text ~120t re !secret
 *
 * short id (last 6 characters of the ULID; every command takes it), age, sender, subject (36 chars
 * at most), type hint, size hint (approximate tokens), then markers: `re` (a reply), `cc+N`,
 * `!flag` (content guard), `rcpt:<status> for <short id>` (a receipt and the envelope it answers),
 * `sched` (sent by a schedule).
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

/** One line, no newline; the subject loses a leading `Re:` (the `re` marker says it) and is cut at `max` characters. */
export function subjectText(subject: string | undefined, max = SUBJECT_MAX): string {
  if (subject === undefined) return '-';
  let text = subject
    // eslint-disable-next-line no-control-regex -- control characters would break the one-line triage format
    .replace(/[\u0000-\u001f\u007f]+/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
  text = text.replace(/^(re|fwd?):\s*/i, '');
  if (text === '') return '-';
  if ([...text].length > max) {
    // Cut at a word boundary when one is near: a half word costs more tokens than it tells.
    let cut = [...text].slice(0, max - 1).join('');
    const space = cut.lastIndexOf(' ');
    if (space >= cut.length * 0.6) cut = cut.slice(0, space);
    text = `${cut.trimEnd()}…`;
  }
  return `"${text.replace(/"/g, "'")}"`;
}

/** Token budget of one line (measured with o200k_base and cl100k_base by `npm run bench -- triage`). */
export const LINE_TOKENS = 30;

/**
 * Conservative token costs of the fixed parts (o200k_base/cl100k_base): the subject gets what is
 * left of the line's budget, at ~3.3 characters a token.
 */
const cost = {
  id: 5,
  age: 2,
  handle: (handle: string) => Math.ceil(handle.length / 2.6),
  type: 1,
  size: 3,
  marker: 1,
  cc: 3,
  flag: 3,
  quotes: 2,
};

export function triageLine(header: TriageHeader, now: number = Date.now()): string {
  const head = [shortId(header.id), age(now - header.created_at), header.from];
  const tail = [header.type_hint];
  let used = cost.id + cost.age + cost.handle(header.from) + cost.type + cost.quotes;
  const sized = size(header.size_hint);
  if (sized) {
    tail.push(sized);
    used += cost.size;
  }
  // A receipt is always a reply and rarely has a subject: its status takes the subject's place.
  if (header.in_reply_to && !header.receipt) {
    tail.push('re');
    used += cost.marker;
  }
  if (header.cc?.length) {
    tail.push(`cc+${header.cc.length}`);
    used += cost.cc;
  }
  for (const flag of header.flags ?? []) {
    tail.push(`!${flag}`);
    used += cost.flag;
  }
  if (header.schedule_id) {
    tail.push('sched');
    used += cost.marker;
  }
  // A receipt names the envelope it answers by its short id: which of several sends it decides.
  const subject = header.receipt
    ? `rcpt:${header.receipt.status} for ${shortId(header.receipt.envelope_id)}`
    : subjectText(header.subject, Math.max(4, Math.min(SUBJECT_MAX, Math.floor((LINE_TOKENS - used) * 3.3))));
  return [...head, subject, ...tail].join(' ');
}

/** The block `roost inbox` prints: a count line, then one line per header. */
export function triageBlock(headers: TriageHeader[], now: number = Date.now(), more = false): string {
  if (headers.length === 0) return 'no unread mail';
  const lines = headers.map((header) => triageLine(header, now));
  return [`${headers.length}${more ? '+' : ''} unread (id age from subject type size):`, ...lines].join('\n');
}
