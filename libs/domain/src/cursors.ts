import type { Cursor } from './query';

/** `(created_at, envelope_id)` order of ASMTP.md §3.5 (ids compared as byte strings). */
export function compareCursors(a: Cursor, b: Cursor): number {
  if (a.created_at !== b.created_at) return a.created_at < b.created_at ? -1 : 1;
  return a.envelope_id < b.envelope_id ? -1 : a.envelope_id > b.envelope_id ? 1 : 0;
}
