/** The envelope model of ASMTP.md §2: shapes, recipient expansion, derived hints, key order. */

import { jsonSize } from './json-size';

export type PartType = 'text' | 'image' | 'file' | 'data';
export type TypeHint = PartType | 'mixed';

export interface ContentPart {
  type: PartType;
  [key: string]: unknown;
}

/** A `POST /messages` body after validation; unknown top-level fields already dropped. */
export interface PostedEnvelope {
  id: string;
  to: string[];
  cc?: string[];
  subject?: string;
  in_reply_to?: string;
  references?: string[];
  date_ms: number;
  content_parts: ContentPart[];
  monitor?: string;
  /** Roost: content guard codes the sender overrides in block mode (never stored). */
  allow_warnings?: string[];
}

/** The stored body returned by `GET /messages/{id}`, in the reference key order. */
export interface StoredEnvelope {
  id: string;
  from: string;
  to: string[];
  date_ms: number;
  content_parts: ContentPart[];
  cc?: string[];
  subject?: string;
  in_reply_to?: string;
  references?: string[];
  monitor?: string;
}

/** Roost header extensions (EXTENSIONS.md): present only when they carry information. */
export interface HeaderExtensions {
  flags?: string[];
  receipt?: { envelope_id: string; status: string };
  schedule_id?: string;
}

/** `unique(to ++ cc)`, first occurrence wins (ASMTP.md §2.5 step 3). */
export function expandRecipients(to: readonly string[], cc: readonly string[] = []): string[] {
  return [...new Set([...to, ...cc])];
}

export function typeHintOf(parts: readonly ContentPart[]): TypeHint {
  const types = new Set(parts.map((part) => part.type));
  return types.size === 1 ? parts[0].type : 'mixed';
}

/** Approximate tokens of the parts as posted: ceil(UTF-16 length of their JSON / 4). */
export function sizeHintOf(parts: readonly ContentPart[]): number {
  return Math.ceil(jsonSize(parts, 'chars') / 4);
}

/** Build the stored body in the reference key order; absent optionals are omitted. */
export function storedEnvelopeOf(posted: PostedEnvelope, from: string, parts: ContentPart[]): StoredEnvelope {
  const body: StoredEnvelope = { id: posted.id, from, to: posted.to, date_ms: posted.date_ms, content_parts: parts };
  if (posted.cc !== undefined) body.cc = posted.cc;
  if (posted.subject !== undefined) body.subject = posted.subject;
  if (posted.in_reply_to !== undefined) body.in_reply_to = posted.in_reply_to;
  if (posted.references !== undefined && posted.references.length > 0) body.references = posted.references;
  if (posted.monitor !== undefined) body.monitor = posted.monitor;
  return body;
}

/**
 * The `envelope.notify` header of ASMTP.md §6.3 as JSON text, in the reference key order
 * `op, id, from, to, cc?, subject?, in_reply_to?, type_hint, size_hint, created_at, date_ms`,
 * then Roost's extension fields. It never carries body content.
 */
export function headerJsonOf(
  body: StoredEnvelope,
  derived: { type_hint: TypeHint; size_hint: number; created_at: number },
  extensions: HeaderExtensions = {},
): string {
  const header: Record<string, unknown> = { op: 'envelope.notify', id: body.id, from: body.from, to: body.to };
  if (body.cc !== undefined) header.cc = body.cc;
  if (body.subject !== undefined) header.subject = body.subject;
  if (body.in_reply_to !== undefined) header.in_reply_to = body.in_reply_to;
  header.type_hint = derived.type_hint;
  header.size_hint = derived.size_hint;
  header.created_at = derived.created_at;
  header.date_ms = body.date_ms;
  if (extensions.flags !== undefined && extensions.flags.length > 0) header.flags = extensions.flags;
  if (extensions.receipt !== undefined) header.receipt = extensions.receipt;
  if (extensions.schedule_id !== undefined) header.schedule_id = extensions.schedule_id;
  return JSON.stringify(header);
}

export type FeedDirection = 'in' | 'out' | 'self';

/**
 * The reference operator's key order for `GET /mailbox` headers (ASMTP.md §3.5), which differs
 * from the push frame's (§6.3): `direction`/`unread` follow the reference keys, and Roost's own
 * extension keys come last, so dropping them leaves the reference's bytes.
 */
export const LISTING_KEYS = [
  'op',
  'id',
  'from',
  'to',
  'type_hint',
  'created_at',
  'date_ms',
  'cc',
  'subject',
  'in_reply_to',
  'size_hint',
  'direction',
  'unread',
  'flags',
  'receipt',
  'schedule_id',
] as const;

/**
 * A stored header (push-frame order, `headerJsonOf`) as a listing header: the same fields in the
 * listing key order, plus `direction` and, on rows where the caller is a recipient in the `both`
 * feed, `unread` (ASMTP.md §3.5). Keys it does not know keep their relative order at the end.
 */
export function listingHeaderOf(headerJson: string, direction?: FeedDirection, unread?: boolean): string {
  const header = JSON.parse(headerJson) as Record<string, unknown>;
  if (direction !== undefined) header.direction = direction;
  if (unread !== undefined) header.unread = unread;
  const listed: Record<string, unknown> = {};
  for (const key of LISTING_KEYS) if (header[key] !== undefined) listed[key] = header[key];
  for (const key of Object.keys(header)) if (!(key in listed)) listed[key] = header[key];
  return JSON.stringify(listed);
}

/** `created_at` strictly greater than every recipient mailbox's last one, and never before the clock. */
export function nextCreatedAt(now: number, lastCreatedAts: readonly number[]): number {
  let createdAt = now;
  for (const last of lastCreatedAts) createdAt = createdAtAbove(createdAt, last);
  return createdAt;
}

/** One step of `nextCreatedAt`: `createdAt`, raised past one mailbox's `last` created_at if needed. */
export function createdAtAbove(createdAt: number, last: number): number {
  return last >= createdAt ? last + 1 : createdAt;
}
