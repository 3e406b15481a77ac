import { type AsmtpError, badRequest } from './errors';
import { isEnvelopeId } from './ids';

/** Raw `key=value` pairs of a query string, keys decoded, values kept raw (so `ids` can split on `,`). */
export type QueryPairs = ReadonlyArray<readonly [string, string]>;

export function decodeComponent(raw: string): string {
  const spaced = raw.replace(/\+/g, ' ');
  try {
    return decodeURIComponent(spaced);
  } catch {
    return spaced; // as WHATWG URLSearchParams does: a malformed escape stays literal
  }
}

export function parseQueryString(raw: string): QueryPairs {
  if (raw === '') return [];
  const pairs: Array<readonly [string, string]> = [];
  for (const piece of raw.split('&')) {
    if (piece === '') continue;
    const eq = piece.indexOf('=');
    const key = eq === -1 ? piece : piece.slice(0, eq);
    const value = eq === -1 ? '' : piece.slice(eq + 1);
    pairs.push([decodeComponent(key), value] as const);
  }
  return pairs;
}

/** First occurrence wins (ASMTP.md §3.0). */
export function firstParam(pairs: QueryPairs, name: string): string | undefined {
  const pair = pairs.find(([key]) => key === name);
  return pair === undefined ? undefined : decodeComponent(pair[1]);
}

/** `String(parseInt(x)) === x`: no sign, no leading zeros, no exponent, within the safe range. */
export function canonicalInt(value: string): number | null {
  const parsed = Number.parseInt(value, 10);
  if (String(parsed) !== value || !Number.isSafeInteger(parsed)) return null;
  return parsed;
}

const invalidQuery = (message: string): AsmtpError => badRequest('INVALID_QUERY', message);

export interface Cursor {
  created_at: number;
  envelope_id: string;
}

export type MailboxDirection = 'in' | 'out' | 'both';

export interface MailboxQuery {
  direction: MailboxDirection;
  order: 'asc' | 'desc';
  limit: number;
  unread?: boolean;
  after?: Cursor;
}

/**
 * `GET /mailbox` query parameters in the validation order of ASMTP.md §3.5: direction, order,
 * limit, unread, unread/direction conflict, cursor pairing, after_created_at, after_envelope_id.
 */
export function parseMailboxQuery(pairs: QueryPairs): MailboxQuery {
  const direction = firstParam(pairs, 'direction') ?? 'in';
  if (direction !== 'in' && direction !== 'out' && direction !== 'both') {
    throw invalidQuery('direction must be in, out or both');
  }
  const order = firstParam(pairs, 'order') ?? 'asc';
  if (order !== 'asc' && order !== 'desc') throw invalidQuery('order must be asc or desc');
  const limit = parseLimit(firstParam(pairs, 'limit'), 1000, 100);
  const unreadRaw = firstParam(pairs, 'unread');
  if (unreadRaw !== undefined && unreadRaw !== 'true' && unreadRaw !== 'false') {
    throw invalidQuery('unread must be true or false');
  }
  const unread = unreadRaw === undefined ? undefined : unreadRaw === 'true';
  if (unread === true && direction !== 'in') throw invalidQuery('unread=true requires direction=in');
  const cursor = parseCursorPair(pairs);
  return {
    direction,
    order,
    limit,
    ...(unread !== undefined && direction === 'in' ? { unread } : {}),
    ...(cursor ? { after: cursor } : {}),
  };
}

/** `after_created_at` + `after_envelope_id`: both or neither (also used by `/connect` resume). */
export function parseCursorPair(pairs: QueryPairs): Cursor | undefined {
  const createdAtRaw = firstParam(pairs, 'after_created_at');
  const envelopeIdRaw = firstParam(pairs, 'after_envelope_id');
  if ((createdAtRaw === undefined) !== (envelopeIdRaw === undefined)) {
    throw invalidQuery('after_created_at and after_envelope_id go together');
  }
  if (createdAtRaw === undefined || envelopeIdRaw === undefined) return undefined;
  const createdAt = canonicalInt(createdAtRaw);
  if (createdAt === null || createdAt < 0) throw invalidQuery('after_created_at must be a canonical integer ≥ 0');
  if (!isEnvelopeId(envelopeIdRaw)) throw badRequest('INVALID_ENVELOPE_ID', 'after_envelope_id is not an envelope id');
  return { created_at: createdAt, envelope_id: envelopeIdRaw };
}

function parseLimit(raw: string | undefined, max: number, fallback: number): number {
  if (raw === undefined || raw === '') return fallback;
  const limit = canonicalInt(raw);
  if (limit === null || limit < 1 || limit > max) throw invalidQuery(`limit must be an integer from 1 to ${max}`);
  return limit;
}

export const MAX_BATCH_IDS = 100;

/** `GET /messages?ids=A,B`: ASMTP.md §3.4. Returns de-duplicated ids in first-occurrence order. */
export function parseIdsQuery(pairs: QueryPairs): string[] {
  const occurrences = pairs.filter(([key]) => key === 'ids');
  if (occurrences.length === 0) throw invalidQuery('ids is required');
  if (occurrences.length > 1) throw invalidQuery('ids must be given once');
  const raw = occurrences[0][1];
  if (raw === '') throw invalidQuery('ids must not be empty');
  const elements = raw.split(',');
  if (elements.length > MAX_BATCH_IDS) throw invalidQuery(`at most ${MAX_BATCH_IDS} ids per request`);
  const ids = elements.map(decodeComponent);
  for (const id of ids) {
    if (!isEnvelopeId(id)) throw badRequest('INVALID_ENVELOPE_ID', 'ids holds a malformed envelope id');
  }
  return [...new Set(ids)];
}

/**
 * `peek=true` on `GET /messages/{id}` and `GET /messages?ids=` (Roost extension, used by the MCP
 * `read` tool): the body without marking it read. Absent or `false`: plain ASMTP.
 */
export function parsePeek(pairs: QueryPairs): boolean {
  const raw = firstParam(pairs, 'peek');
  if (raw === undefined || raw === 'false') return false;
  if (raw === 'true') return true;
  throw invalidQuery('peek must be true or false');
}

export interface SearchQuery {
  q: string;
  limit: number;
  cursor?: string;
}

/** `/search`, `/search/agents`, `/search/messages`: ASMTP.md §3.9. */
export function parseSearchQuery(pairs: QueryPairs): SearchQuery {
  const q = firstParam(pairs, 'q');
  if (q === undefined || q.length < 2 || q.length > 100) throw invalidQuery('q must be 2 to 100 characters');
  const limit = parseLimit(firstParam(pairs, 'limit'), 50, 20);
  const cursor = firstParam(pairs, 'cursor');
  if (cursor !== undefined && cursor.length > 200) throw invalidQuery('cursor is too long');
  return { q, limit, ...(cursor !== undefined && cursor !== '' ? { cursor } : {}) };
}

export interface BlocksQuery {
  limit: number;
  offset: number;
}

/** `GET /agents/me/blocks`: lenient limit (reference `parseInt`), opaque base64 offset cursor. */
export function parseBlocksQuery(pairs: QueryPairs): BlocksQuery {
  const limitRaw = firstParam(pairs, 'limit');
  let limit = 100;
  if (limitRaw !== undefined) {
    const parsed = Number.parseInt(limitRaw, 10);
    if (!Number.isSafeInteger(parsed) || parsed < 1 || parsed > 100) {
      throw badRequest('INVALID_LIMIT', 'limit must be an integer from 1 to 100');
    }
    limit = parsed;
  }
  const cursorRaw = firstParam(pairs, 'cursor');
  const offset = cursorRaw === undefined || cursorRaw === '' ? 0 : decodeBlocksCursor(cursorRaw);
  return { limit, offset };
}

export const encodeBlocksCursor = (offset: number): string =>
  Buffer.from(JSON.stringify({ offset }), 'utf8').toString('base64');

function decodeBlocksCursor(cursor: string): number {
  try {
    const decoded: unknown = JSON.parse(Buffer.from(cursor, 'base64').toString('utf8'));
    const offset = (decoded as { offset?: unknown } | null)?.offset;
    if (typeof offset === 'number' && Number.isSafeInteger(offset) && offset >= 0) return offset;
  } catch {
    // falls through to the error below
  }
  throw badRequest('INVALID_CURSOR', 'cursor is not valid');
}
