import { ENVELOPE_ID_RE, type RoostClient } from '#client';
import { CliError, EXIT } from './output';

const SUFFIX_RE = /^[0-9A-HJKMNP-TV-Z]{4,25}$/;

/**
 * A full envelope id, or the short id the triage lines show (a suffix of ≥ 4 characters), looked up
 * among the newest 2,000 envelopes the agent sent or received.
 */
export async function resolveId(client: RoostClient, id: string): Promise<string> {
  const wanted = id.toUpperCase();
  if (ENVELOPE_ID_RE.test(wanted)) return wanted;
  if (!SUFFIX_RE.test(wanted)) {
    throw new CliError(
      `${id} is neither an envelope id nor a short id`,
      EXIT.USAGE,
      'use the 26-character id or the short id `roost inbox` shows',
      'BAD_ID',
    );
  }
  const matches = new Set<string>();
  let scanned = 0;
  for await (const header of client.headers({ direction: 'both', order: 'desc', limit: 1000 })) {
    if (header.id.endsWith(wanted)) matches.add(header.id);
    if (++scanned >= 2000) break;
  }
  if (matches.size === 1) return [...matches][0];
  if (matches.size === 0) {
    throw new CliError(
      `no envelope ending in ${wanted} among your newest ${scanned}`,
      EXIT.NOT_FOUND,
      'use the full 26-character id',
      'NOT_FOUND',
    );
  }
  throw new CliError(
    `${wanted} is ambiguous: ${[...matches].join(', ')}`,
    EXIT.USAGE,
    'use more characters, or the full id',
    'AMBIGUOUS_ID',
  );
}
