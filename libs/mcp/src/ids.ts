import { ENVELOPE_ID_RE, type RoostClient } from '#client';
import { ToolRefusal } from './errors';

const SUFFIX_RE = /^[0-9A-HJKMNP-TV-Z]{4,25}$/;
const SCAN = 2000;

/** A full envelope id, or a short id (a suffix of ≥ 4 characters) among the newest 2,000 sent or received. */
export async function resolveId(client: RoostClient, id: string): Promise<string> {
  const wanted = id.toUpperCase();
  if (ENVELOPE_ID_RE.test(wanted)) return wanted;
  if (!SUFFIX_RE.test(wanted))
    throw new ToolRefusal(
      'INVALID_ENVELOPE_ID',
      `${id} is neither an envelope id nor a short id`,
      'use the 26-character id or the short id inbox shows',
    );
  const matches = new Set<string>();
  let scanned = 0;
  for await (const header of client.headers({ direction: 'both', order: 'desc', limit: 1000 })) {
    if (header.id.endsWith(wanted)) matches.add(header.id);
    if (++scanned >= SCAN) break;
  }
  if (matches.size === 1) return [...matches][0];
  if (matches.size === 0)
    throw new ToolRefusal(
      'NOT_FOUND',
      `no envelope ending in ${wanted} among your newest ${scanned}`,
      'use the full 26-character id',
    );
  throw new ToolRefusal(
    'INVALID_ENVELOPE_ID',
    `${wanted} matches ${[...matches].join(', ')}`,
    'use more characters or the full id',
  );
}
