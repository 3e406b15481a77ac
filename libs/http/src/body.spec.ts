import { exceedsDepth, MAX_JSON_DEPTH } from './body';

/** `depth` arrays nested inside one another, as JSON text (2 × depth characters). */
const nested = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);

describe('exceedsDepth', () => {
  it('refuses one level past the limit and accepts the limit, at the shortest text each can have', () => {
    expect(exceedsDepth(nested(MAX_JSON_DEPTH + 1), MAX_JSON_DEPTH)).toBe(true);
    expect(exceedsDepth(nested(MAX_JSON_DEPTH), MAX_JSON_DEPTH)).toBe(false);
    expect(exceedsDepth(nested(3), 2)).toBe(true);
    expect(exceedsDepth(nested(2), 2)).toBe(false);
  });

  it('counts objects as well as arrays, and ignores brackets inside strings', () => {
    expect(exceedsDepth('{"a":{"b":[1]}}', 2)).toBe(true);
    expect(exceedsDepth('{"a":"[[[[[[[["}', 2)).toBe(false);
    expect(exceedsDepth('{"a":"\\"[[[[[[[["}', 2)).toBe(false);
  });

  it('a long body that is shallow is not refused', () => {
    const text = JSON.stringify({ to: ['@a.b'], content_parts: [{ type: 'text', text: 'x'.repeat(50_000) }] });
    expect(exceedsDepth(text, MAX_JSON_DEPTH)).toBe(false);
  });
});
