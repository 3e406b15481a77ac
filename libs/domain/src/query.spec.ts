import { AsmtpError } from './errors';
import {
  canonicalInt,
  encodeBlocksCursor,
  firstParam,
  MAX_BATCH_IDS,
  parseBlocksQuery,
  parseCursorPair,
  parseIdsQuery,
  parseMailboxQuery,
  parsePeek,
  parseQueryString,
  parseSearchQuery,
} from './query';

const A = '01JV3Z8W7Q4M2N6P8R0T2V4X6A';
const B = '01JV3Z8W7Q4M2N6P8R0T2V4X6B';
const C = '01JV3Z8W7Q4M2N6P8R0T2V4X6C';

const q = (raw: string) => parseQueryString(raw);

/** The AsmtpError `fn` throws; fails the test when it throws nothing or something else. */
function errorOf(fn: () => unknown): AsmtpError {
  try {
    fn();
  } catch (error) {
    if (error instanceof AsmtpError) return error;
    throw error;
  }
  throw new Error('expected an AsmtpError, nothing was thrown');
}

const codeOf = (fn: () => unknown): string => {
  const error = errorOf(fn);
  expect(error.status).toBe(400);
  return error.code;
};

describe('parseQueryString', () => {
  it('splits on & and =, decodes keys and keeps values raw', () => {
    expect(q('a=1&b=%40x&c')).toEqual([
      ['a', '1'],
      ['b', '%40x'],
      ['c', ''],
    ]);
  });

  it('decodes percent-encoded keys and + in keys', () => {
    expect(q('%61fter=1&a+b=2')).toEqual([
      ['after', '1'],
      ['a b', '2'],
    ]);
  });

  it('keeps everything after the first = in the value', () => {
    expect(q('cursor=abc==')).toEqual([['cursor', 'abc==']]);
  });

  it('skips empty pieces and returns nothing for an empty string', () => {
    expect(q('')).toEqual([]);
    expect(q('&&a=1&')).toEqual([['a', '1']]);
  });
});

describe('firstParam', () => {
  it('first occurrence wins (ASMTP §3.0)', () => {
    expect(firstParam(q('order=desc&order=asc'), 'order')).toBe('desc');
  });

  it('percent-decodes the value and turns + into a space', () => {
    expect(firstParam(q('q=hello+w%C3%B6rld%21'), 'q')).toBe('hello wörld!');
  });

  it('keeps a malformed escape literally instead of throwing', () => {
    expect(firstParam(q('q=100%'), 'q')).toBe('100%');
  });

  it('is undefined for an absent parameter and empty for a bare key', () => {
    expect(firstParam(q('a=1'), 'b')).toBeUndefined();
    expect(firstParam(q('a'), 'a')).toBe('');
  });
});

describe('canonicalInt: String(parseInt(x)) === x', () => {
  it.each([
    ['0', 0],
    ['1', 1],
    ['1000', 1000],
    ['9007199254740991', 9007199254740991],
  ])('accepts %j', (raw, value) => {
    expect(canonicalInt(raw)).toBe(value);
  });

  it.each([
    '01',
    '00',
    '1e3',
    '-0',
    '+1',
    ' 1',
    '1 ',
    '1.0',
    '1.5',
    '0x10',
    '',
    'abc',
    '9007199254740992',
    '99999999999999999999',
  ])('rejects %j', (raw) => {
    expect(canonicalInt(raw)).toBeNull();
  });

  it('accepts a canonical negative integer (callers check the range)', () => {
    expect(canonicalInt('-5')).toBe(-5);
  });
});

describe('parseMailboxQuery (ASMTP §3.5)', () => {
  it('defaults to direction in, order asc, limit 100, no unread filter, no cursor', () => {
    expect(parseMailboxQuery(q(''))).toEqual({ direction: 'in', order: 'asc', limit: 100 });
  });

  it('treats an empty limit as the default', () => {
    expect(parseMailboxQuery(q('limit=')).limit).toBe(100);
  });

  it('accepts every documented value', () => {
    expect(parseMailboxQuery(q('direction=both&order=desc&limit=1000'))).toEqual({
      direction: 'both',
      order: 'desc',
      limit: 1000,
    });
    expect(parseMailboxQuery(q('direction=out&limit=1')).limit).toBe(1);
  });

  it('keeps unread=true and unread=false on the in feed', () => {
    expect(parseMailboxQuery(q('unread=true')).unread).toBe(true);
    expect(parseMailboxQuery(q('unread=false')).unread).toBe(false);
  });

  it('silently ignores unread=false with out and both (§9.2.13)', () => {
    expect(parseMailboxQuery(q('direction=out&unread=false'))).not.toHaveProperty('unread');
    expect(parseMailboxQuery(q('direction=both&unread=false'))).not.toHaveProperty('unread');
  });

  it('returns the cursor pair', () => {
    expect(parseMailboxQuery(q(`after_created_at=0&after_envelope_id=${A}`)).after).toEqual({
      created_at: 0,
      envelope_id: A,
    });
  });

  it('first occurrence wins per parameter', () => {
    expect(parseMailboxQuery(q('direction=out&direction=sideways&limit=5&limit=0'))).toMatchObject({
      direction: 'out',
      limit: 5,
    });
  });

  it.each([
    ['direction=sideways', 'INVALID_QUERY'],
    ['direction=IN', 'INVALID_QUERY'],
    ['direction=', 'INVALID_QUERY'],
    ['order=up', 'INVALID_QUERY'],
    ['order=DESC', 'INVALID_QUERY'],
    ['limit=0', 'INVALID_QUERY'],
    ['limit=1001', 'INVALID_QUERY'],
    ['limit=01', 'INVALID_QUERY'],
    ['limit=-1', 'INVALID_QUERY'],
    ['limit=1e2', 'INVALID_QUERY'],
    ['limit=abc', 'INVALID_QUERY'],
    ['unread=yes', 'INVALID_QUERY'],
    ['unread=TRUE', 'INVALID_QUERY'],
    ['unread=', 'INVALID_QUERY'],
    ['unread=true&direction=out', 'INVALID_QUERY'],
    ['unread=true&direction=both', 'INVALID_QUERY'],
    ['after_created_at=1', 'INVALID_QUERY'],
    [`after_envelope_id=${A}`, 'INVALID_QUERY'],
    [`after_created_at=-1&after_envelope_id=${A}`, 'INVALID_QUERY'],
    [`after_created_at=01&after_envelope_id=${A}`, 'INVALID_QUERY'],
    [`after_created_at=1.5&after_envelope_id=${A}`, 'INVALID_QUERY'],
    ['after_created_at=1&after_envelope_id=nope', 'INVALID_ENVELOPE_ID'],
    [`after_created_at=1&after_envelope_id=${A.toLowerCase()}`, 'INVALID_ENVELOPE_ID'],
    ['after_created_at=1&after_envelope_id=', 'INVALID_ENVELOPE_ID'],
  ])('%s → %s', (raw, code) => {
    expect(codeOf(() => parseMailboxQuery(q(raw)))).toBe(code);
  });

  describe('validation order: direction, order, limit, unread, unread/direction, pairing, after_created_at, after_envelope_id', () => {
    it('direction fails before limit (limit=0&direction=sideways)', () => {
      expect(errorOf(() => parseMailboxQuery(q('limit=0&direction=sideways'))).message).toMatch(/direction/);
    });

    it('order fails before limit', () => {
      expect(errorOf(() => parseMailboxQuery(q('limit=0&order=up'))).message).toMatch(/order/);
    });

    it('limit fails before unread', () => {
      expect(errorOf(() => parseMailboxQuery(q('unread=yes&limit=0'))).message).toMatch(/limit/);
    });

    it('a bad unread value fails before the unread/direction conflict', () => {
      expect(errorOf(() => parseMailboxQuery(q('direction=out&unread=yes'))).message).toMatch(/true or false/);
    });

    it('the unread/direction conflict fails before cursor pairing', () => {
      expect(errorOf(() => parseMailboxQuery(q('direction=out&unread=true&after_created_at=1'))).message).toMatch(
        /direction=in/,
      );
    });

    it('cursor pairing fails before the value of after_created_at', () => {
      expect(errorOf(() => parseMailboxQuery(q('after_created_at=bad'))).message).toMatch(/together/);
    });

    it('after_created_at (INVALID_QUERY) fails before after_envelope_id (INVALID_ENVELOPE_ID)', () => {
      expect(codeOf(() => parseMailboxQuery(q('after_created_at=-1&after_envelope_id=bad')))).toBe('INVALID_QUERY');
    });

    it('an otherwise valid query with a bad after_envelope_id is INVALID_ENVELOPE_ID', () => {
      expect(
        codeOf(() => parseMailboxQuery(q('direction=both&order=desc&limit=5&after_created_at=5&after_envelope_id=x'))),
      ).toBe('INVALID_ENVELOPE_ID');
    });
  });
});

describe('parseCursorPair', () => {
  it('is undefined with neither parameter', () => {
    expect(parseCursorPair(q('limit=5'))).toBeUndefined();
  });

  it('accepts a percent-encoded envelope id and a large created_at', () => {
    expect(parseCursorPair(q(`after_created_at=1747000000123&after_envelope_id=%30%31${A.slice(2)}`))).toEqual({
      created_at: 1747000000123,
      envelope_id: A,
    });
  });
});

describe('parseIdsQuery (ASMTP §3.4)', () => {
  it('returns the ids in request order', () => {
    expect(parseIdsQuery(q(`ids=${B},${A}`))).toEqual([B, A]);
  });

  it('collapses duplicates keeping first-occurrence order', () => {
    expect(parseIdsQuery(q(`ids=${B},${A},${B},${C},${A}`))).toEqual([B, A, C]);
  });

  it('percent-decodes each element', () => {
    expect(parseIdsQuery(q(`ids=%30%31${A.slice(2)},${B}`))).toEqual([A, B]);
  });

  it('splits only on an unencoded comma: %2C inside an element makes it malformed', () => {
    expect(codeOf(() => parseIdsQuery(q(`ids=${A}%2C${B}`)))).toBe('INVALID_ENVELOPE_ID');
  });

  it('accepts exactly 100 ids', () => {
    expect(parseIdsQuery(q(`ids=${Array(MAX_BATCH_IDS).fill(A).join(',')}`))).toEqual([A]);
  });

  it('101 ids → INVALID_QUERY, counted before de-duplication', () => {
    expect(MAX_BATCH_IDS).toBe(100);
    expect(codeOf(() => parseIdsQuery(q(`ids=${Array(101).fill(A).join(',')}`)))).toBe('INVALID_QUERY');
  });

  it.each([
    ['', 'INVALID_QUERY', 'missing'],
    ['other=1', 'INVALID_QUERY', 'missing'],
    ['ids=', 'INVALID_QUERY', 'empty'],
    ['ids', 'INVALID_QUERY', 'bare key'],
    [`ids=${A}&ids=${B}`, 'INVALID_QUERY', 'given twice'],
    [`ids=${A},,${B}`, 'INVALID_ENVELOPE_ID', 'empty element A,,B'],
    [`ids=${A},`, 'INVALID_ENVELOPE_ID', 'trailing comma'],
    [`ids=,${A}`, 'INVALID_ENVELOPE_ID', 'leading comma'],
    [`ids=${A},${B.toLowerCase()}`, 'INVALID_ENVELOPE_ID', 'one lower-case element fails the whole request'],
    [`ids=${A},%20${B}`, 'INVALID_ENVELOPE_ID', 'encoded whitespace'],
  ])('%j → %s (%s)', (raw, code) => {
    expect(codeOf(() => parseIdsQuery(q(raw)))).toBe(code);
  });
});

describe('parseSearchQuery (ASMTP §3.9)', () => {
  it('defaults limit to 20 and has no cursor', () => {
    expect(parseSearchQuery(q('q=ab'))).toEqual({ q: 'ab', limit: 20 });
  });

  it('accepts q of 2 and 100 characters, decoded', () => {
    expect(parseSearchQuery(q('q=a+b')).q).toBe('a b');
    expect(parseSearchQuery(q(`q=${'x'.repeat(100)}`)).q).toHaveLength(100);
  });

  it('measures q after percent-decoding', () => {
    // 50 × "%C3%A9" is 300 raw characters but 50 decoded ones.
    expect(parseSearchQuery(q(`q=${'%C3%A9'.repeat(50)}`)).q).toBe('é'.repeat(50));
  });

  it('accepts limit 1 and 50 and keeps a cursor up to 200 characters', () => {
    expect(parseSearchQuery(q('q=ab&limit=1')).limit).toBe(1);
    expect(parseSearchQuery(q(`q=ab&limit=50&cursor=${'c'.repeat(200)}`))).toEqual({
      q: 'ab',
      limit: 50,
      cursor: 'c'.repeat(200),
    });
  });

  it('drops an empty cursor', () => {
    expect(parseSearchQuery(q('q=ab&cursor='))).not.toHaveProperty('cursor');
  });

  it.each([
    ['', 'missing q'],
    ['q=', 'empty q'],
    ['q=a', 'q of 1 character'],
    [`q=${'x'.repeat(101)}`, 'q of 101 characters'],
    ['q=ab&limit=0', 'limit 0'],
    ['q=ab&limit=51', 'limit 51'],
    ['q=ab&limit=01', 'non-canonical limit'],
    ['q=ab&limit=x', 'non-numeric limit'],
    [`q=ab&cursor=${'c'.repeat(201)}`, 'cursor over 200 characters'],
  ])('%j → INVALID_QUERY (%s)', (raw) => {
    expect(codeOf(() => parseSearchQuery(q(raw)))).toBe('INVALID_QUERY');
  });
});

describe('parseBlocksQuery (ASMTP §3.7)', () => {
  it('defaults to limit 100 and offset 0', () => {
    expect(parseBlocksQuery(q(''))).toEqual({ limit: 100, offset: 0 });
  });

  it("parses the limit leniently like the reference's parseInt: '5x' → 5", () => {
    expect(parseBlocksQuery(q('limit=5x')).limit).toBe(5);
    expect(parseBlocksQuery(q('limit=007')).limit).toBe(7);
  });

  it.each(['', 'x', '0', '101', '-1'])('limit=%j → INVALID_LIMIT', (raw) => {
    expect(codeOf(() => parseBlocksQuery(q(`limit=${raw}`)))).toBe('INVALID_LIMIT');
  });

  it.each([0, 1, 100, 12345, 2 ** 40])('encodeBlocksCursor(%d) round-trips through the query string', (offset) => {
    const cursor = encodeBlocksCursor(offset);
    expect(parseBlocksQuery(q(`cursor=${cursor}`)).offset).toBe(offset);
    expect(parseBlocksQuery(q(`cursor=${encodeURIComponent(cursor)}`)).offset).toBe(offset);
  });

  it('encodes the reference cursor: standard base64 of {"offset":N}', () => {
    expect(Buffer.from(encodeBlocksCursor(7), 'base64').toString('utf8')).toBe('{"offset":7}');
  });

  it('an empty cursor means offset 0', () => {
    expect(parseBlocksQuery(q('cursor=')).offset).toBe(0);
  });

  const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');
  it.each([
    ['not base64 JSON', 'garbage!!'],
    ['JSON null', b64('null')],
    ['JSON array', b64('[1]')],
    ['no offset', b64('{}')],
    ['negative offset', b64('{"offset":-1}')],
    ['fractional offset', b64('{"offset":1.5}')],
    ['string offset', b64('{"offset":"1"}')],
  ])('a bad cursor (%s) → INVALID_CURSOR', (_what, cursor) => {
    expect(codeOf(() => parseBlocksQuery(q(`cursor=${encodeURIComponent(cursor)}`)))).toBe('INVALID_CURSOR');
  });
});

describe('parsePeek (Roost extension on GET /messages)', () => {
  it('is false when absent or false, true when true', () => {
    expect(parsePeek(q(''))).toBe(false);
    expect(parsePeek(q('peek=false'))).toBe(false);
    expect(parsePeek(q('peek=true'))).toBe(true);
  });

  it('refuses any other value with INVALID_QUERY', () => {
    expect(() => parsePeek(q('peek=1'))).toThrow('peek must be true or false');
  });
});
