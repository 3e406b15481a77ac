import { encodeBigintArray, encodeTextArray } from './array-params';

/** array_send's format built the plain way (`Buffer.write` and `writeInt32BE` per element): the reference. */
function reference(values: readonly (string | null)[]): Buffer {
  const parts: Buffer[] = [];
  const head = Buffer.alloc(values.length === 0 ? 12 : 20);
  head.writeInt32BE(values.length === 0 ? 0 : 1, 0);
  head.writeInt32BE(values.includes(null) ? 1 : 0, 4);
  head.writeInt32BE(25, 8);
  if (values.length > 0) {
    head.writeInt32BE(values.length, 12);
    head.writeInt32BE(1, 16);
  }
  parts.push(head);
  for (const value of values) {
    const length = Buffer.alloc(4);
    if (value === null) {
      length.writeInt32BE(-1, 0);
      parts.push(length);
      continue;
    }
    const bytes = Buffer.from(value, 'utf8');
    length.writeInt32BE(bytes.length, 0);
    parts.push(length, bytes);
  }
  return Buffer.concat(parts);
}

function referenceBigints(values: readonly (number | null)[]): Buffer {
  const parts: Buffer[] = [Buffer.alloc(values.length === 0 ? 12 : 20)];
  parts[0].writeInt32BE(values.length === 0 ? 0 : 1, 0);
  parts[0].writeInt32BE(values.includes(null) ? 1 : 0, 4);
  parts[0].writeInt32BE(20, 8);
  if (values.length > 0) {
    parts[0].writeInt32BE(values.length, 12);
    parts[0].writeInt32BE(1, 16);
  }
  for (const value of values) {
    const element = Buffer.alloc(value === null ? 4 : 12);
    if (value === null) element.writeInt32BE(-1, 0);
    else {
      element.writeInt32BE(8, 0);
      element.writeBigInt64BE(BigInt(value), 4);
    }
    parts.push(element);
  }
  return Buffer.concat(parts);
}

const id = '01JV3Z8W7Q4M2N6P8R0T2V4X6Y';
const ascii64 = 'a'.repeat(64);
const ascii65 = 'b'.repeat(65);
const nonAscii63 = `${'c'.repeat(62)}é`;

describe('array parameters in the binary format', () => {
  it.each([
    ['empty', []],
    ['repeated ids, as entry rows repeat their envelope', [id, id, id, `${id.slice(0, -1)}Z`, `${id.slice(0, -1)}Z`]],
    ['kinds', ['to', 'to', 'cc', 'cc', 'to']],
    ['nulls between repeats', [id, null, id, null, null, id]],
    ['empty strings repeated', ['', '', 'x', '', '']],
    ['at and past the short limit', [ascii64, ascii64, ascii65, ascii65, ascii64]],
    [
      'non-ASCII, short and long, repeated',
      ['é', 'é', nonAscii63, nonAscii63, '中文 🦜', '中文 🦜', `${'d'.repeat(100)}ü`],
    ],
    ['a lone surrogate (written as U+FFFD, as Buffer.write does)', ['\ud800', '\ud800', 'x\udc00y']],
    ['long bodies repeated', ['x'.repeat(5000), 'x'.repeat(5000), `{"a":"${'é'.repeat(700)}"}`]],
  ] as Array<[string, Array<string | null>]>)('text[]: %s, byte for byte as the plain encoding', (_, values) => {
    expect(encodeTextArray(values).equals(reference(values))).toBe(true);
  });

  it('text[]: random strings with many repeats, byte for byte as the plain encoding', () => {
    const alphabet = ['a', 'Z', '0', '"', '\\', ' ', 'é', '中', '🦜', '\u007f', '\u0080'];
    let seed = 7;
    const random = (n: number) => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed % n;
    };
    for (let round = 0; round < 200; round++) {
      const values: Array<string | null> = [];
      for (let i = 0; i < 30; i++) {
        if (values.length > 0 && random(3) === 0) values.push(values[values.length - 1]);
        else if (random(10) === 0) values.push(null);
        else values.push(Array.from({ length: random(80) }, () => alphabet[random(alphabet.length)]).join(''));
      }
      expect(encodeTextArray(values).equals(reference(values))).toBe(true);
    }
  });

  it('bigint[]: byte for byte as the plain encoding, negatives, extremes, repeats and nulls', () => {
    const values = [
      0,
      1,
      -1,
      1_764_678_000_123,
      1_764_678_000_123,
      -1_764_678_000_123,
      2 ** 32,
      2 ** 32 - 1,
      -(2 ** 32),
      Number.MAX_SAFE_INTEGER,
      Number.MIN_SAFE_INTEGER,
      null,
      42,
    ];
    expect(encodeBigintArray(values).equals(referenceBigints(values))).toBe(true);
    expect(encodeBigintArray([]).equals(referenceBigints([]))).toBe(true);
    expect(() => encodeBigintArray([2 ** 53])).toThrow(RangeError);
  });
});
