import { randomBytes } from 'node:crypto';

/**
 * Envelope ids are chosen by the client (ASMTP.md §2.1): upper-case Crockford ULIDs starting `01`.
 * Kept here rather than imported so the published package stands alone.
 */
const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
export const ENVELOPE_ID_RE = /^01[0-9A-HJKMNP-TV-Z]{24}$/;

export const isEnvelopeId = (value: unknown): value is string => typeof value === 'string' && ENVELOPE_ID_RE.test(value);

function encodeTime(ms: number): string {
  let out = '';
  let rest = Math.floor(ms);
  for (let i = 0; i < 10; i++) {
    out = CROCKFORD[rest % 32] + out;
    rest = Math.floor(rest / 32);
  }
  return out;
}

function encodeRandom(bytes: Uint8Array): string {
  let out = '';
  let acc = 0;
  let bits = 0;
  for (let i = 0; i < 10; i++) {
    acc = (acc << 8) | bytes[i];
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      out += CROCKFORD[(acc >> bits) & 31];
    }
    acc &= (1 << bits) - 1;
  }
  return out;
}

let lastTime = -1;
let lastRandom = new Uint8Array(10);

/** A monotonic ULID: ids minted in the same millisecond sort in minting order. */
export function ulid(now: number = Date.now()): string {
  if (now <= lastTime) {
    for (let i = 9; i >= 0; i--) {
      if (lastRandom[i] === 255) {
        lastRandom[i] = 0;
        continue;
      }
      lastRandom[i]++;
      break;
    }
    return encodeTime(lastTime) + encodeRandom(lastRandom);
  }
  lastTime = now;
  lastRandom = new Uint8Array(randomBytes(10));
  return encodeTime(now) + encodeRandom(lastRandom);
}
