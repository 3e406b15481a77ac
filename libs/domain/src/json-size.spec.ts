import { jsonSize } from './json-size';

const measure = (value: unknown) => {
  const json = JSON.stringify(value) as string | undefined;
  return json === undefined ? [0, 0] : [json.length, Buffer.byteLength(json, 'utf8')];
};

const tricky = [
  '',
  'plain ascii',
  'quote " backslash \\ slash /',
  'controls \b\t\n\f\r \u0000 \u0001 \u001f \u007f',
  'é ü ß 中文 ‼',
  '🦜 pair',
  'lone high \ud83e end',
  'lone low \udd9c end',
  '\ud83e',
  'x'.repeat(900) + ' the quick brown fox jumps over the lazy dog',
];

describe('jsonSize', () => {
  test.each(tricky)('a string: as JSON.stringify measures it (%j)', (text) => {
    expect([jsonSize(text, 'chars'), jsonSize(text, 'bytes')]).toEqual(measure(text));
  });

  test('parts as posted, with every JSON value kind and members JSON.stringify skips', () => {
    const values: unknown[] = [
      [{ type: 'text', text: 'hello "you"' }],
      [{ type: 'data', data: { a: [1, -2.5, 1e21, 3e-7, true, false, null], 'ké\u0001y': { nested: ['🦜'] } } }],
      { a: undefined, b: () => 1, c: Symbol('s'), d: 1 },
      [undefined, () => 1, Symbol('s'), NaN, Infinity, -0],
      {},
      [],
      Object.create(null) as object,
      { date: new Date(0), map: new Map([[1, 2]]) },
      { toJSON: () => 'replaced' },
      42,
      null,
      undefined,
    ];
    for (const value of values) expect([jsonSize(value, 'chars'), jsonSize(value, 'bytes')]).toEqual(measure(value));
  });

  test('random JSON values (strings from the whole UTF-16 range)', () => {
    let seed = 7;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const text = () =>
      String.fromCharCode(...Array.from({ length: Math.floor(next() * 12) }, () => Math.floor(next() * 0x10000)));
    const value = (depth: number): unknown => {
      const kind = Math.floor(next() * (depth > 3 ? 4 : 6));
      if (kind === 0) return text();
      if (kind === 1) return Math.floor(next() * 1e6) / 7;
      if (kind === 2) return next() < 0.5;
      if (kind === 3) return null;
      if (kind === 4) return Array.from({ length: Math.floor(next() * 4) }, () => value(depth + 1));
      return Object.fromEntries(Array.from({ length: Math.floor(next() * 4) }, () => [text(), value(depth + 1)]));
    };
    for (let i = 0; i < 2_000; i++) {
      const v = value(0);
      expect([jsonSize(v, 'chars'), jsonSize(v, 'bytes')]).toEqual(measure(v));
    }
  });

  test('random texts of escapes, controls, pairs and lone surrogates: both ways of measuring agree with JSON.stringify', () => {
    let seed = 11;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    // Each piece weighs differently in JSON: as is, a two- or six-character escape, 2-3 UTF-8 bytes, a pair.
    const pieces = ['a', ' ', '"', '\\', '\n', '\r', '\t', '\b', '\f', '\u0000', '\u001f', '\u007f', 'é', '中', '🦜'];
    const lone = ['\ud83e', '\udd9c'];
    let lonely = 0;
    for (let i = 0; i < 5_000; i++) {
      const withLone = i % 2 === 1;
      let text = '';
      for (let n = Math.floor(next() * 64); n > 0; n--) {
        const from = withLone && next() < 0.1 ? lone : pieces;
        text += from[Math.floor(next() * from.length)];
      }
      if (/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(text)) lonely++;
      expect([jsonSize(text, 'chars'), jsonSize(text, 'bytes')]).toEqual(measure(text));
    }
    expect(lonely).toBeGreaterThan(1_000); // both paths taken many times
  });
});
