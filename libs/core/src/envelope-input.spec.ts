import { AsmtpError, type ContentPart } from '#domain';
import { parsePostedEnvelope, resolveFileParts, searchTextOf } from './envelope-input';

const ID = '01JV3Z8W7Q4M2N6P8R0T2V4X6Y';
const P1 = '01JV3Z8W7Q4M2N6P8R0T2V4X6A';
const P2 = '01JV3Z8W7Q4M2N6P8R0T2V4X6B';

const body = (patch: Record<string, unknown> = {}): Record<string, unknown> => ({
  id: ID,
  to: ['@bob.demo'],
  date_ms: 1_747_000_000_000,
  content_parts: [{ type: 'text', text: 'hello' }],
  ...patch,
});

function codeOf(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    if (error instanceof AsmtpError) return error.code;
    throw error;
  }
  return 'OK';
}

describe('parsePostedEnvelope (ASMTP §2.1, §2.5 step 2)', () => {
  it('keeps the known fields of a valid body', () => {
    const posted = parsePostedEnvelope(
      body({ cc: ['@carol.demo'], subject: 'hi', in_reply_to: P2, references: [P1, P2], monitor: 'mon_x' }),
    );
    expect(posted).toEqual({
      id: ID,
      to: ['@bob.demo'],
      date_ms: 1_747_000_000_000,
      content_parts: [{ type: 'text', text: 'hello' }],
      cc: ['@carol.demo'],
      subject: 'hi',
      in_reply_to: P2,
      references: [P1, P2],
      monitor: 'mon_x',
    });
  });

  it('drops unknown top-level fields', () => {
    const posted = parsePostedEnvelope(body({ priority: 'high', received_ms: 5 }));
    expect(Object.keys(posted).sort()).toEqual(['content_parts', 'date_ms', 'id', 'to']);
  });

  it('carries allow_warnings (a Roost request field) for the content guard', () => {
    const posted = parsePostedEnvelope(body({ allow_warnings: ['secret'] }));
    expect(posted.allow_warnings).toEqual(['secret']);
  });

  it('treats subject: null and monitor: null as absent', () => {
    const posted = parsePostedEnvelope(body({ subject: null, monitor: null }));
    expect(posted).not.toHaveProperty('subject');
    expect(posted).not.toHaveProperty('monitor');
  });

  it('keeps an empty subject', () => {
    expect(parsePostedEnvelope(body({ subject: '' })).subject).toBe('');
  });

  it('INVALID_REFERENCES when the last reference differs from in_reply_to', () => {
    expect(codeOf(() => parsePostedEnvelope(body({ in_reply_to: P1, references: [P1, P2] })))).toBe(
      'INVALID_REFERENCES',
    );
  });

  it('accepts references whose last element equals in_reply_to, even if it also appears earlier', () => {
    expect(codeOf(() => parsePostedEnvelope(body({ in_reply_to: P2, references: [P2, P1, P2] })))).toBe('OK');
  });

  it('does not apply the rule to references: [] or to references without in_reply_to', () => {
    expect(codeOf(() => parsePostedEnvelope(body({ in_reply_to: P1, references: [] })))).toBe('OK');
    expect(codeOf(() => parsePostedEnvelope(body({ references: [P1, P2] })))).toBe('OK');
  });

  it('checks INVALID_REFERENCES last: a bad monitor wins over it', () => {
    expect(codeOf(() => parsePostedEnvelope(body({ in_reply_to: P1, references: [P2], monitor: 'x' })))).toBe(
      'INVALID_MONITOR',
    );
  });

  it('maps field failures through the post-message schema', () => {
    expect(codeOf(() => parsePostedEnvelope(body({ from: '@alice.demo' })))).toBe('INVALID_REQUEST');
    expect(codeOf(() => parsePostedEnvelope(body({ to: ['@a.*'] })))).toBe('INVALID_HANDLE');
    expect(codeOf(() => parsePostedEnvelope(body({ content_parts: [] })))).toBe('INVALID_CONTENT');
  });
});

describe('resolveFileParts (ASMTP §7.2)', () => {
  const base = 'https://roost.example/v1';
  const F1 = 'file_01JV3Z8W7Q4M2N6P8R0T2V4X61';
  const F2 = 'file_01JV3Z8W7Q4M2N6P8R0T2V4X62';

  it('replaces file_id with url as the last key, keeping the other keys in order', () => {
    const parts: ContentPart[] = [{ type: 'file', file_id: F1, name: 'a.pdf', mime_type: 'application/pdf' }];
    const { parts: resolved, fileIds } = resolveFileParts(parts, base);
    expect(resolved[0]).toEqual({
      type: 'file',
      name: 'a.pdf',
      mime_type: 'application/pdf',
      url: `${base}/files/${F1}`,
    });
    expect(Object.keys(resolved[0])).toEqual(['type', 'name', 'mime_type', 'url']);
    expect(resolved[0]).not.toHaveProperty('file_id');
    expect(fileIds).toEqual([F1]);
  });

  it('builds the url as {public base}/files/{url-encoded file id}', () => {
    const { parts } = resolveFileParts([{ type: 'image', file_id: F2, mime_type: 'image/png' }], base);
    expect(parts[0].url).toBe(`${base}/files/${encodeURIComponent(F2)}`);
    expect(Object.keys(parts[0])).toEqual(['type', 'mime_type', 'url']);
  });

  it('leaves url, text and data parts untouched and lists file ids in part order', () => {
    const url = { type: 'image', url: 'https://elsewhere/x.png' } as ContentPart;
    const text = { type: 'text', text: 'hi' } as ContentPart;
    const data = { type: 'data', data: { file_id: 'not a part key' } } as ContentPart;
    const { parts, fileIds } = resolveFileParts(
      [url, { type: 'image', file_id: F2 }, text, { type: 'file', file_id: F1 }, data],
      base,
    );
    expect(parts[0]).toBe(url);
    expect(parts[2]).toBe(text);
    expect(parts[4]).toBe(data);
    expect(fileIds).toEqual([F2, F1]);
  });

  it('does not mutate the posted parts (size_hint is computed on them)', () => {
    const posted: ContentPart[] = [{ type: 'image', file_id: F1 }];
    resolveFileParts(posted, base);
    expect(posted).toEqual([{ type: 'image', file_id: F1 }]);
  });
});

describe('searchTextOf', () => {
  const posted = (parts: ContentPart[], subject?: string) => ({
    id: ID,
    to: ['@bob.demo'],
    date_ms: 1,
    content_parts: parts,
    ...(subject === undefined ? {} : { subject }),
  });

  it('joins subject, text parts, data parts as JSON and file names', () => {
    const text = searchTextOf(
      posted(
        [
          { type: 'text', text: 'hello world' },
          { type: 'data', data: { k: 'v' } },
          { type: 'file', url: 'u', name: 'report.pdf' },
          { type: 'image', url: 'u' },
        ],
        'Subject line',
      ),
    );
    expect(text).toBe('Subject line\nhello world\n{"k":"v"}\nreport.pdf');
  });

  it('replaces NUL characters, which Postgres text cannot hold', () => {
    const text = searchTextOf(
      posted(
        [
          { type: 'text', text: 'a\u0000b' },
          { type: 'data', data: { k: 'x\u0000' } },
        ],
        's\u0000',
      ),
    );
    expect(text).not.toContain('\u0000');
    expect(text.startsWith('s \na b\n')).toBe(true);
  });

  it('caps the indexed text at 64 KiB', () => {
    expect(searchTextOf(posted([{ type: 'text', text: 'x'.repeat(100_000) }]))).toHaveLength(64 * 1024);
  });
});
