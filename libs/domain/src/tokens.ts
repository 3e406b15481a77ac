import { hash, randomBytes, timingSafeEqual } from 'node:crypto';

/** 32 CSPRNG bytes, base64url without padding (43 characters), as the reference mints them. */
export const mintToken = (): string => randomBytes(32).toString('base64url');

/**
 * Tokens are stored and looked up as lowercase hex SHA-256 of their UTF-8 bytes. Every
 * authenticated request hashes its token: `crypto.hash` (one call, no Hash object) takes about a
 * quarter of `createHash().update().digest()`'s time on Node 20.
 */
export const hashToken = (token: string): string => hash('sha256', token, 'hex');

export function hashesEqual(a: string, b: string): boolean {
  const left = Buffer.from(a, 'hex');
  const right = Buffer.from(b, 'hex');
  return left.length === right.length && left.length > 0 && timingSafeEqual(left, right);
}

/**
 * `Authorization: Bearer <token>` (scheme case-insensitive, whitespace trimmed). Returns null when
 * the header is absent or malformed: ASMTP.md §1.3.
 */
export function bearerFrom(header: string | undefined): string | null {
  if (typeof header !== 'string') return null;
  const match = /^Bearer\s+(.+)$/i.exec(header.trim());
  if (!match) return null;
  const token = match[1].trim();
  return token.length > 0 ? token : null;
}
