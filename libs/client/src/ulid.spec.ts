import vectors from '../../../test/data/ulid-vectors.json';
import { deterministicUlid, ENVELOPE_ID_PATTERN, isEnvelopeId, ulid } from './ulid';

describe('isEnvelopeId (ASMTP §1.1, §2.1)', () => {
  it.each(vectors.valid)('accepts %j', (id) => {
    expect(id).toHaveLength(26);
    expect(isEnvelopeId(id)).toBe(true);
  });

  // Lower case, 25 and 27 characters, prefixes other than 01, the letters Crockford excludes,
  // surrounding whitespace and a file id.
  it.each(vectors.invalid)('rejects %j', (id) => {
    expect(isEnvelopeId(id)).toBe(false);
  });

  it('rejects non-strings', () => {
    expect(isEnvelopeId(null)).toBe(false);
    expect(isEnvelopeId(1)).toBe(false);
  });

  it('exports the grammar of ASMTP §1.1 verbatim', () => {
    expect(ENVELOPE_ID_PATTERN).toBe('^01[0-9A-HJKMNP-TV-Z]{24}$');
  });
});

describe('ulid()', () => {
  // ulid() keeps the last minted time; each test uses a millisecond later than any earlier call.
  let step = 0;
  const freshMs = (): number => Date.now() + 1_000_000 + ++step * 100_000;

  it('mints a valid envelope id', () => {
    for (let i = 0; i < 50; i++) expect(isEnvelopeId(ulid())).toBe(true);
  });

  it.each(vectors.time)('encodes $ms ms as the prefix $prefix', ({ ms, prefix }) => {
    // 1_469_918_176_385 is the time of the reference ULID 01ARYZ6S41… in the ULID spec.
    expect(deterministicUlid('k', ms).slice(0, 10)).toBe(prefix);
  });

  it('encodes its time as deterministicUlid does', () => {
    const now = freshMs();
    expect(ulid(now).slice(0, 10)).toBe(deterministicUlid('k', now).slice(0, 10));
  });

  it('encodes the time in the first 10 characters, so later ms sort later', () => {
    const now = freshMs();
    const a = ulid(now);
    const b = ulid(now + 1);
    expect(a.slice(0, 10)).not.toBe(b.slice(0, 10));
    expect(a < b).toBe(true);
  });

  it('is strictly monotonic within one millisecond', () => {
    const now = freshMs();
    const ids = Array.from({ length: 1000 }, () => ulid(now));
    for (let i = 1; i < ids.length; i++) expect(ids[i] > ids[i - 1]).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    expect(new Set(ids.map((id) => id.slice(0, 10))).size).toBe(1);
  });

  it('stays monotonic when the clock steps backwards', () => {
    const now = freshMs();
    const first = ulid(now);
    const second = ulid(now - 5_000);
    expect(second > first).toBe(true);
  });
});

describe('deterministicUlid', () => {
  it.each(vectors.deterministic)('derives $id from $key at $ms', ({ key, ms, id }) => {
    expect(deterministicUlid(key, ms)).toBe(id);
  });

  it('differs by key at the same time, keeping the same time prefix', () => {
    const a = deterministicUlid('schedule:1:run:7', 1_747_000_000_000);
    const b = deterministicUlid('schedule:1:run:8', 1_747_000_000_000);
    expect(a).not.toBe(b);
    expect(a.slice(0, 10)).toBe(b.slice(0, 10));
  });

  it('differs by time for the same key', () => {
    expect(deterministicUlid('k', 1_747_000_000_000)).not.toBe(deterministicUlid('k', 1_747_000_000_001));
  });

  it('is a valid envelope id', () => {
    expect(isEnvelopeId(deterministicUlid('anything', Date.now()))).toBe(true);
  });
});
