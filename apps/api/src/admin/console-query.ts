import { badRequest, canonicalInt, firstParam, isHandle, type QueryPairs } from '#domain';

export interface AgentListQuery {
  q?: string;
  limit: number;
  after?: string;
  /** `include=unread`: each agent carries its unread count. */
  unread: boolean;
}

export const AGENT_PAGE_DEFAULT = 50;
export const AGENT_PAGE_MAX = 200;
const MAX_NEEDLE = 100;

const invalidQuery = (message: string) => badRequest('INVALID_QUERY', message);

/**
 * `GET /_admin/agents` (docs/console-api.md): null when none of q, limit, after, include is given
 * (the reference listing, ASMTP.md §1.4, all agents); else the console's paged search.
 */
export function parseAgentListQuery(pairs: QueryPairs): AgentListQuery | null {
  const q = firstParam(pairs, 'q');
  const limitRaw = firstParam(pairs, 'limit');
  const after = firstParam(pairs, 'after');
  const include = firstParam(pairs, 'include');
  if (q === undefined && limitRaw === undefined && after === undefined && include === undefined) return null;
  // A NUL cannot reach Postgres in a text parameter; no handle or display name holds a control character.
  // eslint-disable-next-line no-control-regex -- refusing control characters is the point
  if (q !== undefined && (q.length > MAX_NEEDLE || /[\u0000-\u001f\u007f]/.test(q))) {
    throw invalidQuery(`q must be at most ${MAX_NEEDLE} characters, without control characters`);
  }
  let limit = AGENT_PAGE_DEFAULT;
  // An empty value is an absent one, as for GET /mailbox.
  if (limitRaw !== undefined && limitRaw !== '') {
    const parsed = canonicalInt(limitRaw);
    if (parsed === null || parsed < 1 || parsed > AGENT_PAGE_MAX)
      throw invalidQuery(`limit must be an integer from 1 to ${AGENT_PAGE_MAX}`);
    limit = parsed;
  }
  if (after !== undefined && after !== '' && !isHandle(after)) throw invalidQuery('after must be a handle');
  if (include !== undefined && include !== 'unread' && include !== '') throw invalidQuery('include must be unread');
  return {
    ...(q !== undefined && q !== '' ? { q } : {}),
    limit,
    ...(after !== undefined && after !== '' ? { after } : {}),
    unread: include === 'unread',
  };
}
