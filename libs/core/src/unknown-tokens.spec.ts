import { UnknownTokens } from './unknown-tokens';

describe('UnknownTokens (the negative cache of bearer tokens)', () => {
  it('refuses a hash within its window and forgets it after', () => {
    const cache = new UnknownTokens(5_000);
    cache.add('a', 1_000);
    expect(cache.has('a', 1_000)).toBe(true);
    expect(cache.has('a', 5_999)).toBe(true);
    expect(cache.has('a', 6_000)).toBe(false);
    expect(cache.size).toBe(0);
  });

  it('forget drops an entry at once (a token issued on this node)', () => {
    const cache = new UnknownTokens(5_000);
    cache.add('a', 0);
    cache.forget('a');
    expect(cache.has('a', 1)).toBe(false);
  });

  it('holds at most maxEntries, dropping the oldest first', () => {
    const cache = new UnknownTokens(5_000, 3);
    for (const hash of ['a', 'b', 'c']) cache.add(hash, 0);
    cache.add('a', 1); // refreshed: now the newest
    cache.add('d', 2);
    expect(cache.size).toBe(3);
    expect(['a', 'b', 'c', 'd'].filter((hash) => cache.has(hash, 3))).toEqual(['a', 'c', 'd']);
  });
});
