import { deterministicUlid, ENVELOPE_ID_PATTERN, isEnvelopeId, isFileId, newFileId, ulid } from './ids';

const VALID = '01JV3Z8W7Q4M2N6P8R0T2V4X6Y';

describe('isEnvelopeId (ASMTP §1.1, §2.1)', () => {
  it('accepts a 26-char upper-case Crockford ULID starting 01', () => {
    expect(VALID).toHaveLength(26);
    expect(isEnvelopeId(VALID)).toBe(true);
    expect(isEnvelopeId('01' + '0'.repeat(24))).toBe(true);
    expect(isEnvelopeId('01' + 'Z'.repeat(24))).toBe(true);
  });

  it('rejects the lower-case form of a valid id', () => {
    expect(isEnvelopeId(VALID.toLowerCase())).toBe(false);
  });

  it('rejects 25 and 27 characters', () => {
    expect(isEnvelopeId(VALID.slice(0, 25))).toBe(false);
    expect(isEnvelopeId(VALID + 'A')).toBe(false);
  });

  it.each(['00', '02', '7Z', '10'])('rejects the prefix %s', (prefix) => {
    expect(isEnvelopeId(prefix + VALID.slice(2))).toBe(false);
  });

  it.each(['I', 'L', 'O', 'U'])('rejects the ambiguous letter %s, excluded from Crockford base32', (letter) => {
    expect(isEnvelopeId(VALID.slice(0, 25) + letter)).toBe(false);
  });

  it('rejects surrounding whitespace, a file id and non-strings', () => {
    expect(isEnvelopeId(` ${VALID}`)).toBe(false);
    expect(isEnvelopeId(`${VALID}\n`)).toBe(false);
    expect(isEnvelopeId(`file_${VALID}`)).toBe(false);
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

  it('encodes the time in the first 10 characters, so later ms sort later', () => {
    const now = freshMs();
    const a = ulid(now);
    const b = ulid(now + 1);
    expect(a.slice(0, 10)).not.toBe(b.slice(0, 10));
    expect(a < b).toBe(true);
  });

  it('encodes a known time as its Crockford base32 prefix', () => {
    // 1_469_918_176_385 is the time of the reference ULID 01ARYZ6S41… in the ULID spec.
    expect(deterministicUlid('k', 1_469_918_176_385).slice(0, 10)).toBe('01ARYZ6S41');
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
  it('is stable for the same key and time', () => {
    expect(deterministicUlid('schedule:1:run:7', 1_747_000_000_000)).toBe(
      deterministicUlid('schedule:1:run:7', 1_747_000_000_000),
    );
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

describe('file ids', () => {
  it('newFileId is file_ + a 26-char ULID and passes isFileId', () => {
    const id = newFileId();
    expect(id).toMatch(/^file_[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(isFileId(id)).toBe(true);
  });

  it('isFileId rejects a bare ULID, lower case, wrong length and non-strings', () => {
    expect(isFileId(VALID)).toBe(false);
    expect(isFileId(`file_${VALID.toLowerCase()}`)).toBe(false);
    expect(isFileId(`file_${VALID.slice(1)}`)).toBe(false);
    expect(isFileId(`FILE_${VALID}`)).toBe(false);
    expect(isFileId(undefined)).toBe(false);
  });
});
