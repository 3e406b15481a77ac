import { AsmtpError } from './errors';
import {
  ALLOWED_FILE_TYPES,
  checkUpload,
  FILE_TTL_MS,
  MAX_FILE_BYTES,
  multipartBoundary,
  parseFirstFilePart,
  sanitizeFilename,
} from './files';

function errorOf(fn: () => unknown): AsmtpError {
  try {
    fn();
  } catch (error) {
    if (error instanceof AsmtpError) return error;
    throw error;
  }
  throw new Error('expected an AsmtpError, nothing was thrown');
}

const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d]);
const JPEG = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 1, 2]);
const PDF = Buffer.from('%PDF-1.7\n...', 'latin1');
const GIF87 = Buffer.from('GIF87a....', 'latin1');
const GIF89 = Buffer.from('GIF89a....', 'latin1');

describe('upload limits (ASMTP §7.1)', () => {
  it('caps files at 10 MiB and expires them after 24 h', () => {
    expect(MAX_FILE_BYTES).toBe(10_485_760);
    expect(FILE_TTL_MS).toBe(86_400_000);
  });

  it('allows exactly the nine documented types', () => {
    expect([...ALLOWED_FILE_TYPES].sort()).toEqual(
      [
        'application/json',
        'application/octet-stream',
        'application/pdf',
        'image/gif',
        'image/jpeg',
        'image/png',
        'text/csv',
        'text/markdown',
        'text/plain',
      ].sort(),
    );
  });
});

describe('checkUpload (ASMTP §7.1 content checks)', () => {
  it.each([
    ['image/png', PNG],
    ['image/jpeg', JPEG],
    ['application/pdf', PDF],
    ['image/gif', GIF87],
    ['image/gif', GIF89],
    ['text/plain', Buffer.from('x')],
    ['application/octet-stream', Buffer.from([0])],
  ])('accepts %s with matching bytes', (type, bytes) => {
    expect(checkUpload(type, bytes)).toBe(type);
  });

  it('strips parameters and lower-cases the declared type', () => {
    expect(checkUpload('Text/Plain; charset=utf-8', Buffer.from('hi'))).toBe('text/plain');
    expect(checkUpload(' IMAGE/PNG ;x=y', PNG)).toBe('image/png');
  });

  it('does not sniff types without magic bytes', () => {
    expect(checkUpload('application/json', Buffer.from('not json at all'))).toBe('application/json');
  });

  it('accepts exactly 10 MiB', () => {
    expect(checkUpload('text/plain', Buffer.alloc(MAX_FILE_BYTES, 0x61))).toBe('text/plain');
  });

  it.each([
    ['disallowed type', 'image/svg+xml', Buffer.from('<svg/>'), /not allowed/],
    ['empty type', '', Buffer.from('x'), /not allowed/],
    ['empty file', 'text/plain', Buffer.alloc(0), /empty/],
    ['10 MiB + 1', 'text/plain', Buffer.alloc(MAX_FILE_BYTES + 1), /10 MiB/],
    ['PNG type with non-PNG bytes', 'image/png', Buffer.from('hello world'), /do not match/],
    ['PNG type with a truncated signature', 'image/png', PNG.subarray(0, 7), /do not match/],
    ['JPEG type with PNG bytes', 'image/jpeg', PNG, /do not match/],
    ['PDF type with a lower-case signature', 'application/pdf', Buffer.from('%pdf-1.4'), /do not match/],
    ['GIF type with GIF88a', 'image/gif', Buffer.from('GIF88a....'), /do not match/],
  ])('%s → 400 INVALID_FILE', (_what, type, bytes, message) => {
    const error = errorOf(() => checkUpload(type, bytes));
    expect(error.status).toBe(400);
    expect(error.code).toBe('INVALID_FILE');
    expect(error.message).toMatch(message);
  });

  describe('check order: type, empty, too large, magic bytes', () => {
    it('a disallowed type fails before emptiness', () => {
      expect(errorOf(() => checkUpload('image/svg+xml', Buffer.alloc(0))).message).toMatch(/not allowed/);
    });

    it('emptiness fails before the magic bytes', () => {
      expect(errorOf(() => checkUpload('image/png', Buffer.alloc(0))).message).toMatch(/empty/);
    });

    it('size fails before the magic bytes', () => {
      expect(errorOf(() => checkUpload('image/png', Buffer.alloc(MAX_FILE_BYTES + 1))).message).toMatch(/10 MiB/);
    });
  });
});

describe('sanitizeFilename (ASMTP §7.1)', () => {
  it.each([
    ['test.png', 'test.png'],
    ['My Report - v2.pdf', 'My Report - v2.pdf'],
    ['/etc/passwd', 'passwd'],
    ['../../secret.txt', 'secret.txt'],
    ['C:\\Users\\me\\photo.jpg', 'photo.jpg'],
    ['  padded.txt  ', 'padded.txt'],
    ['.hidden', 'hidden'],
    ['trailing.dots...', 'trailing.dots'],
    ['..', 'file'],
    ['', 'file'],
    ['   ', 'file'],
    ['dir/', 'file'],
    ['héllo wörld.txt', 'h_llo w_rld.txt'],
    ['a*?<>|b.txt', 'a_b.txt'],
    ['名前.txt', '_.txt'],
    ['quote"name.txt', 'quote_name.txt'],
    ['tab\there.txt', 'tab_here.txt'],
    ['🚀.md', '_.md'],
  ])('%j → %j', (raw, expected) => {
    expect(sanitizeFilename(raw)).toBe(expected);
  });

  it('truncates to 180 characters', () => {
    const result = sanitizeFilename(`${'a'.repeat(300)}.txt`);
    expect(result).toHaveLength(180);
    expect(result).toBe('a'.repeat(180));
  });

  it('only ever returns characters of [A-Za-z0-9._ -]', () => {
    const noisy = 'a\u0000b\u202e\r\n;:,$%&"\'`~!@#^()[]{}=+.txt';
    expect(sanitizeFilename(noisy)).toMatch(/^[A-Za-z0-9._ -]+$/);
  });
});

describe('multipartBoundary (ASMTP §7.1)', () => {
  it.each([
    ['multipart/form-data; boundary=abc123', 'abc123'],
    ['multipart/form-data;boundary=abc123', 'abc123'],
    ['multipart/form-data; boundary="quoted boundary"', 'quoted boundary'],
    ['Multipart/Form-Data; BOUNDARY=XyZ', 'XyZ'],
    ['MULTIPART/FORM-DATA; charset=utf-8; boundary=----WebKit123', '----WebKit123'],
    ['multipart/form-data; boundary=abc; charset=utf-8', 'abc'],
  ])('%j → %j', (header, boundary) => {
    expect(multipartBoundary(header)).toBe(boundary);
  });

  it.each([
    [undefined, 'no Content-Type'],
    ['', 'empty Content-Type'],
    ['application/json', 'not multipart'],
    ['multipart/mixed; boundary=abc', 'another multipart subtype'],
    ['multipart/form-data', 'no boundary'],
    ['multipart/form-data; boundary=', 'empty boundary'],
    ['multipart/form-data; boundary=""', 'empty quoted boundary'],
    ['multipart/form-data; boundary="abc', 'unterminated quoted boundary'],
  ])('%j → 400 INVALID_REQUEST (%s)', (header, _what) => {
    const error = errorOf(() => multipartBoundary(header));
    expect(error.status).toBe(400);
    expect(error.code).toBe('INVALID_REQUEST');
  });
});

describe('parseFirstFilePart (ASMTP §7.1)', () => {
  const boundary = 'XyZboundary';
  const body = (parts: Array<{ headers: string[]; content: Buffer | string }>, close = true): Buffer => {
    const chunks: Buffer[] = [];
    for (const part of parts) {
      chunks.push(Buffer.from(`--${boundary}\r\n${part.headers.join('\r\n')}\r\n\r\n`, 'latin1'));
      chunks.push(typeof part.content === 'string' ? Buffer.from(part.content, 'utf8') : part.content);
      chunks.push(Buffer.from('\r\n', 'latin1'));
    }
    if (close) chunks.push(Buffer.from(`--${boundary}--\r\n`, 'latin1'));
    return Buffer.concat(chunks);
  };
  const filePart = (content: Buffer | string = PNG) => ({
    headers: ['Content-Disposition: form-data; name="file"; filename="test.png"', 'Content-Type: image/png'],
    content,
  });

  it('returns the filename, the part Content-Type and the exact bytes of the first part', () => {
    const part = parseFirstFilePart(body([filePart()]), boundary);
    expect(part.filename).toBe('test.png');
    expect(part.contentType).toBe('image/png');
    expect(part.bytes.equals(PNG)).toBe(true);
  });

  it('keeps content containing CRLF, blank lines and a different boundary verbatim', () => {
    const content = 'a\r\nb\r\n\r\nc\r\n--otherboundary\r\n';
    const part = parseFirstFilePart(body([filePart(content)]), boundary);
    expect(part.bytes.toString('latin1')).toBe(content);
  });

  it('ignores parts after the first and a preamble before it', () => {
    const raw = Buffer.concat([
      Buffer.from('preamble text\r\n', 'latin1'),
      body([filePart('first'), { headers: ['Content-Disposition: form-data; name="other"'], content: 'second' }]),
    ]);
    expect(parseFirstFilePart(raw, boundary).bytes.toString()).toBe('first');
  });

  it('accepts header names in any case, parameters in any order and an unquoted name', () => {
    const part = parseFirstFilePart(
      body([
        {
          headers: ['content-disposition: form-data; filename="a b.txt"; name=file', 'CONTENT-TYPE: text/plain'],
          content: 'hi',
        },
      ]),
      boundary,
    );
    expect(part).toMatchObject({ filename: 'a b.txt', contentType: 'text/plain' });
  });

  it('unescapes a backslash-escaped quote in the filename', () => {
    const part = parseFirstFilePart(
      body([
        {
          headers: [
            'Content-Disposition: form-data; name="file"; filename="say \\"hi\\".txt"',
            'Content-Type: text/plain',
          ],
          content: 'hi',
        },
      ]),
      boundary,
    );
    expect(part.filename).toBe('say "hi".txt');
  });

  it.each([
    ['boundary not in the body', () => Buffer.from('no multipart here'), /opening boundary/],
    [
      'first part named other than file',
      () =>
        body([
          {
            headers: ['Content-Disposition: form-data; name="upload"; filename="a.png"', 'Content-Type: image/png'],
            content: PNG,
          },
        ]),
      /field "file"/,
    ],
    [
      'file part only second',
      () => body([{ headers: ['Content-Disposition: form-data; name="meta"'], content: 'x' }, filePart()]),
      /field "file"/,
    ],
    [
      'name="filex" is not name="file"',
      () =>
        body([
          {
            headers: ['Content-Disposition: form-data; name="filex"; filename="a.png"', 'Content-Type: image/png'],
            content: PNG,
          },
        ]),
      /field "file"/,
    ],
    [
      'disposition not form-data',
      () =>
        body([
          {
            headers: ['Content-Disposition: attachment; name="file"; filename="a.png"', 'Content-Type: image/png'],
            content: PNG,
          },
        ]),
      /field "file"/,
    ],
    ['no Content-Disposition', () => body([{ headers: ['Content-Type: image/png'], content: PNG }]), /field "file"/],
    [
      'missing filename',
      () =>
        body([{ headers: ['Content-Disposition: form-data; name="file"', 'Content-Type: image/png'], content: PNG }]),
      /filename/,
    ],
    [
      'missing part Content-Type',
      () => body([{ headers: ['Content-Disposition: form-data; name="file"; filename="a.png"'], content: PNG }]),
      /Content-Type/,
    ],
    ['missing closing boundary', () => body([filePart()], false), /closing boundary/],
    [
      'header line without a colon',
      () =>
        body([
          { headers: ['Content-Disposition: form-data; name="file"; filename="a.png"', 'garbage line'], content: PNG },
        ]),
      /malformed part headers/,
    ],
    [
      'header line starting with a colon',
      () => body([{ headers: [': form-data', 'Content-Type: image/png'], content: PNG }]),
      /malformed part headers/,
    ],
    [
      'no blank line after the headers',
      () => Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a"\r\n`, 'latin1'),
      /malformed part headers/,
    ],
    [
      'boundary line not followed by CRLF',
      () =>
        Buffer.from(`--${boundary}Content-Disposition: form-data; name="file"\r\n\r\nx\r\n--${boundary}--`, 'latin1'),
      /malformed/,
    ],
  ])('%s → 400 INVALID_REQUEST', (_what, make, message) => {
    const error = errorOf(() => parseFirstFilePart(make(), boundary));
    expect(error.status).toBe(400);
    expect(error.code).toBe('INVALID_REQUEST');
    expect(error.message).toMatch(message);
  });
});
