import { randomBytes, randomUUID } from 'node:crypto';

/** A fresh UUID, as the ASMTP CLI sends in `Idempotency-Key`. */
export const uuid = (): string => randomUUID();

/** `n` random characters of `[a-z0-9]`. */
export function randomName(n: number, alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789'): string {
  const bytes = randomBytes(n);
  let out = '';
  for (let i = 0; i < n; i++) out += alphabet[bytes[i] % alphabet.length];
  return out;
}

/** `(created_at, id)` tuple order, ids compared by code units (byte order for ASCII ids). */
export function compareKeys(a: { created_at: number; id: string }, b: { created_at: number; id: string }): number {
  if (a.created_at !== b.created_at) return a.created_at - b.created_at;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}
