import { createHash, randomBytes } from 'node:crypto';

/**
 * Envelope ids are chosen by the client (ASMTP.md §1.1, §2.1): upper-case Crockford ULIDs starting
 * `01`. This is Roost's one ULID implementation: the published SDK must stand alone, and the
 * operator (libs/domain) and the conformance suite use it from here.
 */
const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
export const ENVELOPE_ID_PATTERN = '^01[0-9A-HJKMNP-TV-Z]{24}$';
export const ENVELOPE_ID_RE = new RegExp(ENVELOPE_ID_PATTERN);

export const isEnvelopeId = (value: unknown): value is string =>
  typeof value === 'string' && ENVELOPE_ID_RE.test(value);

function encodeTime(ms: number): string {
  let out = '';
  let rest = Math.floor(ms);
  for (let i = 0; i < 10; i++) {
    out = CROCKFORD[rest % 32] + out;
    rest = Math.floor(rest / 32);
  }
  return out;
}

/** 80 bits → 16 Crockford characters. */
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
    const next = Uint8Array.from(lastRandom);
    for (let i = 9; i >= 0; i--) {
      if (next[i] === 255) {
        next[i] = 0;
        continue;
      }
      next[i]++;
      break;
    }
    lastRandom = next;
    return encodeTime(lastTime) + encodeRandom(next);
  }
  lastTime = now;
  lastRandom = new Uint8Array(randomBytes(10));
  return encodeTime(now) + encodeRandom(lastRandom);
}

/**
 * A ULID derived from a key: the same key and time always give the same id, so a retried
 * firing or a re-import replays idempotently instead of minting a second envelope.
 */
export function deterministicUlid(key: string, timeMs: number): string {
  const digest = createHash('sha256').update(key).digest();
  return encodeTime(timeMs) + encodeRandom(digest.subarray(0, 10));
}
