import { createHash } from 'node:crypto';
import { bearerFrom, hashesEqual, hashToken, mintToken } from './tokens';

describe('mintToken (ASMTP §1.3)', () => {
  it('is 43 characters of base64url without padding (32 bytes)', () => {
    const token = mintToken();
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(token, 'base64url')).toHaveLength(32);
  });

  it('is fresh every time', () => {
    const tokens = new Set(Array.from({ length: 100 }, mintToken));
    expect(tokens.size).toBe(100);
  });
});

describe('hashToken', () => {
  it('is lowercase hex sha256 of the UTF-8 token', () => {
    expect(hashToken('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(hashToken('é')).toBe(
      createHash('sha256')
        .update(Buffer.from([0xc3, 0xa9]))
        .digest('hex'),
    );
  });

  it('is 64 lowercase hex characters', () => {
    expect(hashToken(mintToken())).toMatch(/^[0-9a-f]{64}$/);
  });
});

describe('hashesEqual', () => {
  it('is true for equal hashes and false for different ones', () => {
    expect(hashesEqual(hashToken('a'), hashToken('a'))).toBe(true);
    expect(hashesEqual(hashToken('a'), hashToken('b'))).toBe(false);
  });

  it('is false for different lengths and for two empty strings', () => {
    expect(hashesEqual(hashToken('a'), hashToken('a').slice(0, 62))).toBe(false);
    expect(hashesEqual('', '')).toBe(false);
  });
});

describe('bearerFrom (ASMTP §1.3)', () => {
  it.each([
    ['Bearer tok', 'tok'],
    ['bearer tok', 'tok'],
    ['BEARER tok', 'tok'],
    ['  Bearer   tok  ', 'tok'],
    ['Bearer\ttok', 'tok'],
    ['Bearer a b', 'a b'],
    ['Bearer x', 'x'],
  ])('%j → %j', (header, token) => {
    expect(bearerFrom(header)).toBe(token);
  });

  it.each([
    [undefined, 'absent header'],
    ['', 'empty header'],
    ['   ', 'only whitespace'],
    ['Bearer', 'scheme only'],
    ['Bearer    ', 'scheme and spaces'],
    ['Basic x', 'another scheme'],
    ['Bearertok', 'no separator'],
    ['tok', 'bare token'],
    ['Token tok', 'wrong scheme name'],
  ])('%j → null (%s)', (header, _what) => {
    expect(bearerFrom(header)).toBeNull();
  });
});
