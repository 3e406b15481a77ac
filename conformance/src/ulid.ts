import { randomBytes, randomUUID } from 'node:crypto';

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

/** A ULID (ASMTP.md §1.1): 10 time characters and 16 random ones, upper-case Crockford base32. */
export function ulid(time: number = Date.now()): string {
  let head = '';
  for (let i = 0, t = time; i < 10; i++, t = Math.floor(t / 32)) head = CROCKFORD[t % 32] + head;
  const random = randomBytes(16);
  let tail = '';
  for (let i = 0; i < 16; i++) tail += CROCKFORD[random[i] % 32];
  return head + tail;
}

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

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
