import pg from 'pg';
import { ulid } from '#domain';
import type { Reply } from '../support/client';
import { envelope, startOperator, type TestOperator } from '../support/operator';
import { counts as countRows, type Counts } from '../support/state';

/**
 * DESIGN.md invariant 6: bad input gets a precise 4xx with the ASMTP error body and changes
 * nothing. Every refusal below is checked against the rows in Postgres before and after; the
 * unicode and SQL-metacharacter cases that are valid must succeed and round-trip byte-exact.
 */

// A project-level testTimeout in jest.config.js is not applied (it is a global option in Jest 30).
jest.setTimeout(60_000);

const ALICE = '@bad.alice';
const BOB = '@bad.bob';
const CAROL = '@bad.carol';
const SQL_STRINGS = [
  "'; DROP TABLE agents; --",
  '%',
  '_',
  '\\',
  "%_\\'",
  "' OR '1'='1",
  '"; DELETE FROM envelopes; --',
];
/** Strings that are valid JSON text and that every string field must carry unchanged. */
const UNICODE_STRINGS = [
  '🦜 parrot',
  '\ud800',
  '\udfff',
  '\udc00\ud800',
  'a\u0000b',
  '\u0000',
  '\u2028\u2029',
  '\ufeff',
  '\uffff',
  '\u{10ffff}',
  'e\u0301',
  '\u202e reversed',
  '</script><script>',
  ...SQL_STRINGS,
];
const WRONG_TYPES: Record<string, unknown> = {
  number: 1,
  string: 'x',
  boolean: true,
  object: {},
  array: [],
  null: null,
};
const MiB = 1024 * 1024;

let op: TestOperator;
let db: pg.Pool;
let alice: string;
let bob: string;
let carol: string;
let admin: string;
/** An envelope in bob's mailbox, still unread: a malformed POST /mailbox/read must not mark it. */
let unreadId: string;
/** A pending file of alice's: a refused send must not claim it. */
let pendingFileId: string;

type Snapshot = Counts;

const counts = (): Promise<Snapshot> => countRows(db);

/** Run `call`, then assert it answered `status`/`code` with the ASMTP error body and changed nothing. */
async function refused(call: () => Promise<Reply>, status: number, code: string): Promise<Reply> {
  const before = await counts();
  const reply = await call();
  expect({ status: reply.status, code: reply.body?.error?.code }).toEqual({ status, code });
  // TestClient already checked the body against the error schema; this pins the exact shape.
  expect(Object.keys(reply.body)).toEqual(['error']);
  expect(typeof reply.body.error.message).toBe('string');
  expect(reply.headers.get('content-type')).toBe('application/json; charset=utf-8');
  expect(await counts()).toEqual(before);
  return reply;
}

/** Run `call`, assert `status`, and that counts moved by exactly `delta` (other columns untouched). */
async function succeeds(call: () => Promise<Reply>, status: number, delta: Partial<Snapshot> = {}): Promise<Reply> {
  const before = await counts();
  const reply = await call();
  expect({ status: reply.status, body: reply.status === status ? 'ok' : reply.text }).toEqual({ status, body: 'ok' });
  const after = await counts();
  const expected: Record<string, unknown> = { ...before };
  for (const [key, value] of Object.entries(delta))
    expected[key] = (before[key as keyof Snapshot] as number) + (value as number);
  const { agents_digest: _a, mailboxes_digest: _m, ...afterCounts } = after;
  const { agents_digest: _b, mailboxes_digest: _n, ...expectedCounts } = expected;
  expect(afterCounts).toEqual(expectedCounts);
  return reply;
}

const post = (path: string, body: unknown, token?: string, headers?: Record<string, string>) =>
  op.client.request('POST', path, { token, body, headers });
const send = (body: unknown, token = alice) => post('/messages', body, token);
const enc = encodeURIComponent;

/** `envelope(BOB)` with `fields` overriding (a field set to `undefined` is removed). */
const message = (fields: Record<string, unknown> = {}) => envelope(BOB, fields);

/** The canonical stored body (ASMTP.md §2.1 key order) that GET /messages/{id} must return byte for byte. */
function storedText(posted: Record<string, unknown>): string {
  const stored: Record<string, unknown> = {
    id: posted.id,
    from: ALICE,
    to: posted.to,
    date_ms: posted.date_ms,
    content_parts: posted.content_parts,
  };
  for (const key of ['cc', 'subject', 'in_reply_to', 'references', 'monitor']) {
    const value = posted[key];
    if (value === undefined || value === null) continue;
    if (key === 'references' && Array.isArray(value) && value.length === 0) continue;
    stored[key] = value;
  }
  return JSON.stringify(stored);
}

/** Send `posted`, expect 202 and one envelope + one entry, and the byte-exact stored body back. */
async function acceptedAndRoundTrips(posted: Record<string, unknown>): Promise<void> {
  const reply = await succeeds(() => send(posted), 202, { envelopes: 1, mailbox_entries: 1 });
  expect(reply.body.id).toBe(posted.id);
  const fetched = await op.client.get(`/messages/${posted.id as string}`, bob);
  expect(fetched.status).toBe(200);
  expect(fetched.text).toBe(storedText(posted));
  expect(JSON.parse(fetched.text)).toEqual(JSON.parse(storedText(posted)));
}

async function uploadText(token: string, text: string): Promise<string> {
  const form = new FormData();
  form.append('file', new Blob([text], { type: 'text/plain' }), 'note.txt');
  const response = await fetch(`${op.url}/files`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}` },
    body: form,
  });
  const body = (await response.json()) as { id: string };
  if (response.status !== 201) throw new Error(`upload: ${response.status} ${JSON.stringify(body)}`);
  return body.id;
}

/** `depth` nested arrays around `inner`, as JSON text. */
const nestedArrays = (depth: number, inner = '') => '['.repeat(depth) + inner + ']'.repeat(depth);

beforeAll(async () => {
  op = await startOperator();
  db = new pg.Pool({ connectionString: op.config.databaseUrl!, max: 2 });
  alice = await op.agent(ALICE);
  bob = await op.agent(BOB);
  carol = await op.agent(CAROL);
  admin = op.adminToken;
  // Two public agents whose display names hold LIKE metacharacters (discovery search).
  await op.agent('@bad.likea', { visibility: 'public', display_name: 'Sale 100%_off\\now' });
  await op.agent('@bad.likeb', { visibility: 'public', display_name: 'Sale 100xyoffznow' });
  const first = message({ subject: 'still unread' });
  expect((await send(first)).status).toBe(202);
  unreadId = first.id as string;
  pendingFileId = await uploadText(alice, 'attachment');
});

afterAll(async () => {
  await db?.end();
  await op?.close();
});

describe('unparsable and non-object bodies → 400 INVALID_JSON', () => {
  const bodies: Array<[string, string | Buffer]> = [
    ['truncated object', '{"id":'],
    ['trailing comma', '{"a":1,}'],
    ['unquoted key', '{a:1}'],
    ['single quotes', "{'a':1}"],
    ['NaN', '{"a":NaN}'],
    ['two values', '{}{}'],
    ['raw newline inside a string', '{"subject":"a\nb"}'],
    ['bad escape', '{"subject":"\\x41"}'],
    ['truncated unicode escape', '{"subject":"\\u12"}'],
    ['whitespace only', '  \n\t '],
    ['array', '[]'],
    ['array of object', '[{}]'],
    ['string', '"hello"'],
    ['null', 'null'],
    ['number', '42'],
    ['boolean', 'true'],
    ['invalid UTF-8 byte 0xff', Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d])],
    ['overlong UTF-8 encoding of /', Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xc0, 0xaf, 0x22, 0x7d])],
    ['UTF-8-encoded surrogate', Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xed, 0xa0, 0x80, 0x22, 0x7d])],
    ['truncated multi-byte sequence', Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xf0, 0x9f, 0xa6, 0x22, 0x7d])],
    ['UTF-16LE body', Buffer.from('{"a":1}', 'utf16le')],
    ['100k nested arrays as the body', nestedArrays(100_000)],
    ['100k nested objects as the body', '{"a":'.repeat(100_000) + '1' + '}'.repeat(100_000)],
  ];
  const routes: Array<[string, string, () => string]> = [
    ['POST', '/messages', () => alice],
    ['POST', '/mailbox/read', () => bob],
    ['PATCH', '/agents/me', () => alice],
    ['POST', '/agents/me/allowlist', () => alice],
    ['POST', '/agents/me/blocks', () => alice],
    ['POST', '/_admin/agents', () => admin],
    ['PATCH', `/_admin/agents/${enc(CAROL)}`, () => admin],
    ['POST', '/_admin/orgs', () => admin],
  ];
  it.each(routes)('%s %s refuses every malformed body', async (method, path, token) => {
    for (const [label, body] of bodies) {
      try {
        await refused(
          () =>
            op.client.request(method, path, { token: token(), body, headers: { 'content-type': 'application/json' } }),
          400,
          'INVALID_JSON',
        );
      } catch (error) {
        throw new Error(`${method} ${path} with ${label}: ${(error as Error).message}`, { cause: error });
      }
    }
  });

  it('ignores the Content-Type: a malformed body is INVALID_JSON under any declared type', async () => {
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x']) {
      await refused(() => post('/messages', '{"id":', alice, { 'content-type': type }), 400, 'INVALID_JSON');
    }
    await refused(() => post('/messages', Buffer.from('[1]'), alice), 400, 'INVALID_JSON');
  });

  it('authenticates before reading the body: no bearer → 401, whatever the body', async () => {
    await refused(() => post('/messages', '{"id":'), 401, 'UNAUTHORIZED');
    await refused(() => post('/messages', Buffer.from([0xff]), 'not-a-token'), 401, 'UNAUTHORIZED');
    await refused(() => post('/_admin/agents', '[]', alice), 401, 'UNAUTHORIZED');
  });
});

describe('body size (EXTENSIONS.md §7)', () => {
  const padded = (bytes: number) => {
    const body = JSON.stringify(message());
    return body.slice(0, -1) + ' '.repeat(bytes - body.length) + '}';
  };

  it('a 2 MiB body → 413 PAYLOAD_TOO_LARGE with the ASMTP error body, on every JSON route', async () => {
    const big = padded(2 * MiB);
    await refused(() => post('/messages', big, alice), 413, 'PAYLOAD_TOO_LARGE');
    await refused(() => post('/mailbox/read', big, bob), 413, 'PAYLOAD_TOO_LARGE');
    await refused(
      () => op.client.request('PATCH', '/agents/me', { token: alice, body: big }),
      413,
      'PAYLOAD_TOO_LARGE',
    );
    await refused(() => post('/_admin/agents', big, admin), 413, 'PAYLOAD_TOO_LARGE');
    // Size is refused before syntax: a 2 MiB body of garbage is still a 413.
    await refused(() => post('/messages', Buffer.alloc(2 * MiB, 0xff), alice), 413, 'PAYLOAD_TOO_LARGE');
  });

  it('without a bearer the same 2 MiB body gets 401 first', async () => {
    const big = padded(2 * MiB);
    await refused(() => post('/messages', big), 401, 'UNAUTHORIZED');
    await refused(() => post('/messages', big, 'unknown-token'), 401, 'UNAUTHORIZED');
    await refused(() => post('/_admin/agents', big, alice), 401, 'UNAUTHORIZED');
  });

  it('exactly 1 MiB is accepted; one byte more is 413', async () => {
    const exact = padded(MiB);
    expect(Buffer.byteLength(exact)).toBe(MiB);
    await succeeds(() => post('/messages', exact, alice), 202, { envelopes: 1, mailbox_entries: 1 });
    const over = padded(MiB + 1);
    await refused(() => post('/messages', over, alice), 413, 'PAYLOAD_TOO_LARGE');
  });
});

describe('POST /messages: wrong types at every field', () => {
  const cases: Array<[string, Record<string, unknown>, string]> = [];
  const add = (label: string, fields: Record<string, unknown>, code: string) => cases.push([label, fields, code]);
  const types = (field: string, code: string | ((type: string) => string | null), skip: string[] = []) => {
    for (const [type, value] of Object.entries(WRONG_TYPES)) {
      if (skip.includes(type)) continue;
      const expected = typeof code === 'string' ? code : code(type);
      if (expected !== null) add(`${field}: ${type}`, { [field]: value }, expected);
    }
  };

  types('from', 'INVALID_REQUEST');
  add('from: own handle', { from: ALICE }, 'INVALID_REQUEST');
  types('id', 'INVALID_ENVELOPE_ID');
  add('id: missing', { id: undefined }, 'INVALID_ENVELOPE_ID');
  add('id: lower case', { id: ulid().toLowerCase() }, 'INVALID_ENVELOPE_ID');
  add('id: 25 characters', { id: ulid().slice(0, 25) }, 'INVALID_ENVELOPE_ID');
  add('id: not starting 01', { id: `7${ulid().slice(1)}` }, 'INVALID_ENVELOPE_ID');
  add('id: SQL', { id: "01'; DROP TABLE agents; --" }, 'INVALID_ENVELOPE_ID');
  add('id: NUL', { id: `${ulid().slice(0, 25)}\u0000` }, 'INVALID_ENVELOPE_ID');
  types('to', 'INVALID_REQUEST');
  add('to: missing', { to: undefined }, 'INVALID_REQUEST');
  for (const element of [
    1,
    true,
    null,
    {},
    [],
    '',
    'bad.bob',
    '@Bad.bob',
    '@bad.*',
    '@bad.bob.x',
    '@bad.bob\u0000',
    "@bad.'; DROP TABLE agents; --",
    '@%.%',
    '@_._',
  ]) {
    add(
      `to: [${JSON.stringify(element)}]`,
      { to: [BOB, element] },
      element === '@_._' ? 'NOT_FOUND' : 'INVALID_HANDLE',
    );
  }
  types('cc', 'INVALID_REQUEST');
  for (const element of [1, null, 'x', '@bad.*'])
    add(`cc: [${JSON.stringify(element)}]`, { cc: [element] }, 'INVALID_HANDLE');
  types('subject', 'INVALID_REQUEST', ['string', 'null']);
  types('in_reply_to', 'INVALID_ENVELOPE_ID');
  types('references', 'INVALID_REQUEST', ['array']);
  for (const element of [1, null, 'x', ulid().toLowerCase()]) {
    add(`references: [${JSON.stringify(element)}]`, { references: [element] }, 'INVALID_ENVELOPE_ID');
  }
  types('date_ms', 'INVALID_REQUEST', ['number']);
  add('date_ms: missing', { date_ms: undefined }, 'INVALID_REQUEST');
  for (const value of [1.5, -1, 2 ** 53, 1e300, '1700000000000'])
    add(`date_ms: ${JSON.stringify(value)}`, { date_ms: value }, 'INVALID_REQUEST');
  types('content_parts', 'INVALID_CONTENT');
  add('content_parts: missing', { content_parts: undefined }, 'INVALID_CONTENT');
  const parts: Array<[string, unknown]> = [
    ['number part', 1],
    ['string part', 'text'],
    ['null part', null],
    ['array part', []],
    ['no type', {}],
    ['type number', { type: 1, text: 'x' }],
    ['type null', { type: null, text: 'x' }],
    ['unknown type', { type: 'video', url: 'https://x' }],
    ['upper-case type', { type: 'TEXT', text: 'x' }],
    ['text missing', { type: 'text' }],
    ['text null', { type: 'text', text: null }],
    ['text number', { type: 'text', text: 1 }],
    ['text empty', { type: 'text', text: '' }],
    ['text object', { type: 'text', text: {} }],
    ['text array', { type: 'text', text: ['x'] }],
    ['image with neither url nor file_id', { type: 'image' }],
    ['image with both', { type: 'image', url: 'https://x/a.png', file_id: 'file_x' }],
    ['image url null', { type: 'image', url: null }],
    ['image url number', { type: 'image', url: 1 }],
    ['image url empty', { type: 'image', url: '' }],
    ['image data: url', { type: 'image', url: 'data:image/png;base64,AAAA' }],
    ['image file_id null', { type: 'image', file_id: null }],
    ['image file_id number', { type: 'image', file_id: 7 }],
    ['file with neither', { type: 'file', name: 'x' }],
    ['file url object', { type: 'file', url: {} }],
    ['data missing', { type: 'data' }],
    ['data null', { type: 'data', data: null }],
    ['data array', { type: 'data', data: [] }],
    ['data string', { type: 'data', data: '{}' }],
    ['data number', { type: 'data', data: 1 }],
  ];
  for (const [label, part] of parts)
    add(`content_parts: ${label}`, { content_parts: [{ type: 'text', text: 'ok' }, part] }, 'INVALID_CONTENT');
  types('monitor', 'INVALID_REQUEST', ['string', 'null']);
  for (const value of [
    'x',
    '',
    'mon_',
    `mon_${'a'.repeat(65)}`,
    'mon_a b',
    "mon_'; DROP TABLE agents; --",
    'mon_\u0000',
  ]) {
    add(`monitor: ${JSON.stringify(value)}`, { monitor: value }, 'INVALID_MONITOR');
  }
  // A `roost.receipt/v1` data part (EXTENSIONS.md §2) is checked field by field too.
  const receipt = (data: unknown) => ({ content_parts: [{ type: 'data', schema: 'roost.receipt/v1', data }] });
  const answered = ulid();
  for (const [label, data] of [
    ['envelope_id number', { envelope_id: 1, status: 'accepted' }],
    ['envelope_id null', { envelope_id: null, status: 'accepted' }],
    ['envelope_id SQL', { envelope_id: "01'; DROP TABLE envelopes; --", status: 'accepted' }],
    ['status missing', { envelope_id: answered }],
    ['status null', { envelope_id: answered, status: null }],
    ['status unknown', { envelope_id: answered, status: 'maybe' }],
    ['status array', { envelope_id: answered, status: ['accepted'] }],
    ['note number', { envelope_id: answered, status: 'accepted', note: 1 }],
    ['note null', { envelope_id: answered, status: 'accepted', note: null }],
    ['note too long', { envelope_id: answered, status: 'accepted', note: 'x'.repeat(2001) }],
    ['extra key', { envelope_id: answered, status: 'accepted', extra: true }],
    ['__proto__ key', JSON.parse(`{"envelope_id":"${answered}","status":"accepted","__proto__":{"x":1}}`)],
    ['an envelope the sender never received', { envelope_id: answered, status: 'accepted' }],
  ] as const) {
    add(`receipt part: ${label}`, receipt(data), 'INVALID_RECEIPT');
  }
  add('references[-1] ≠ in_reply_to', { in_reply_to: ulid(), references: [ulid()] }, 'INVALID_REFERENCES');
  // The first failing field in ASMTP.md §2.5 order wins.
  add('from and id both bad → from', { from: null, id: 'x' }, 'INVALID_REQUEST');
  add('id and to both bad → id', { id: 'x', to: [1] }, 'INVALID_ENVELOPE_ID');
  add('date_ms and content_parts both bad → date_ms', { date_ms: 'x', content_parts: [] }, 'INVALID_REQUEST');
  add('content_parts and monitor both bad → content', { content_parts: [{}], monitor: 'x' }, 'INVALID_CONTENT');
  add(
    'monitor and references both bad → monitor',
    { monitor: 'x', in_reply_to: ulid(), references: [ulid()] },
    'INVALID_MONITOR',
  );

  it.each(cases)('%s → %s', async (_label, fields, code) => {
    await refused(() => send(message(fields)), code === 'NOT_FOUND' ? 404 : 400, code);
  });

  it('an empty body counts as {} and fails on the missing id', async () => {
    await refused(() => post('/messages', '', alice), 400, 'INVALID_ENVELOPE_ID');
  });
});

describe('POST /messages: file_id claims are all-or-nothing', () => {
  const filePart = (fileId: string) => ({ type: 'file', file_id: fileId, name: 'note.txt' });

  it.each([
    ['unknown', `file_${ulid()}`],
    ['SQL', "file_'; DROP TABLE files; --"],
    ['LIKE wildcard', 'file_%'],
    ['NUL', 'file_\u0000'],
    ['lone surrogate', 'file_\ud800'],
    ['emoji', 'file_🦜'],
  ])('an %s file_id → 400 INVALID_FILE', async (_label, fileId) => {
    await refused(() => send(message({ content_parts: [filePart(fileId)] })), 400, 'INVALID_FILE');
  });

  it("a valid file_id next to a bad one is not claimed, nor is another agent's", async () => {
    await refused(
      () => send(message({ content_parts: [filePart(pendingFileId), filePart(`file_${ulid()}`)] })),
      400,
      'INVALID_FILE',
    );
    await refused(() => send(message({ content_parts: [filePart(pendingFileId)] }), carol), 400, 'INVALID_FILE');
    await refused(
      () => send(message({ content_parts: [filePart(pendingFileId)], monitor: 'bad' })),
      400,
      'INVALID_MONITOR',
    );
    await refused(
      () => send(message({ to: ['@bad.nobody'], content_parts: [filePart(pendingFileId)] })),
      404,
      'NOT_FOUND',
    );
  });
});

describe('deep nesting', () => {
  it('100k nested arrays inside a data part → a precise 400, nothing stored', async () => {
    const posted = message();
    const text = JSON.stringify({ ...posted, content_parts: [{ type: 'data', data: { deep: '@@' } }] }).replace(
      '"@@"',
      nestedArrays(100_000),
    );
    await refused(() => post('/messages', text, alice), 400, 'INVALID_JSON');
    const objects = JSON.stringify({ ...posted, content_parts: [{ type: 'data', data: { deep: '@@' } }] }).replace(
      '"@@"',
      '{"a":'.repeat(100_000) + '1' + '}'.repeat(100_000),
    );
    await refused(() => post('/messages', objects, alice), 400, 'INVALID_JSON');
  });

  it('deep nesting in an ignored field, or in a subject of the wrong type, is refused too', async () => {
    const text = JSON.stringify({ ...message(), junk: '@@' }).replace('"@@"', nestedArrays(100_000));
    await refused(() => post('/messages', text, alice), 400, 'INVALID_JSON');
    const admin100k = JSON.stringify({ handle: '@bad.deep', display_name: '@@' }).replace(
      '"@@"',
      nestedArrays(100_000),
    );
    await refused(() => post('/_admin/agents', admin100k, admin), 400, 'INVALID_JSON');
  });

  it('the limit is 1000 levels for the whole body: 1000 is stored and returned unchanged, 1001 is refused', async () => {
    // body object, content_parts, part, data: four levels before the nested arrays.
    const at = (depth: number): { posted: Record<string, unknown>; text: string } => {
      const deep: unknown = JSON.parse(nestedArrays(depth - 4, '"🦜"'));
      const posted = message({ content_parts: [{ type: 'data', data: { deep: '@@' } }] });
      const text = JSON.stringify(posted).replace('"@@"', nestedArrays(depth - 4, '"🦜"'));
      return { posted: { ...posted, content_parts: [{ type: 'data', data: { deep } }] }, text };
    };
    const ok = at(1000);
    await succeeds(() => post('/messages', ok.text, alice), 202, { envelopes: 1, mailbox_entries: 1 });
    const fetched = await op.client.get(`/messages/${ok.posted.id as string}`, bob);
    expect(fetched.text).toBe(storedText(ok.posted));
    await refused(() => post('/messages', at(1001).text, alice), 400, 'INVALID_JSON');
  });

  it('moderate nesting (100 levels) in a data part is stored and returned unchanged', async () => {
    let data: Record<string, unknown> = { leaf: '🦜' };
    for (let i = 0; i < 100; i++) data = { [`k${i}`]: [data] };
    await acceptedAndRoundTrips(message({ content_parts: [{ type: 'data', data }] }));
  });
});

describe('unicode and SQL metacharacters in envelope strings are accepted and round-trip byte-exact', () => {
  it.each(UNICODE_STRINGS.map((s) => [JSON.stringify(s), s]))(
    '%s in subject, text, data key and value, part extras',
    async (_label, value) => {
      const posted = message({
        subject: value,
        content_parts: [
          { type: 'text', text: value },
          { type: 'data', data: { [value]: value, nested: [value, { v: value }] }, schema: value },
          { type: 'file', url: `https://files.example/${value}`, name: value, mime_type: value },
        ],
      });
      await acceptedAndRoundTrips(posted);
      const page = await op.client.get(`/mailbox?order=desc&limit=1`, bob);
      expect(page.body.envelope_headers[0].id).toBe(posted.id);
      expect(page.body.envelope_headers[0].subject).toBe(value);
    },
  );

  it('null optionals count as absent; unknown top-level fields are dropped; [] references dropped', async () => {
    await acceptedAndRoundTrips(message({ subject: null, monitor: null }));
    await acceptedAndRoundTrips(
      message({ references: [], created_at: 1, received_ms: null, from_: ALICE, "'; DROP TABLE envelopes; --": 1 }),
    );
    await acceptedAndRoundTrips(
      message({ content_parts: [{ type: 'text', text: 'x', mime_type: null, extra: { a: null } }] }),
    );
  });

  it('raw (unescaped) UTF-8 emoji bytes in the body round-trip', async () => {
    const posted = message({ subject: '🦜🦜 ünïcödé', content_parts: [{ type: 'text', text: '日本語テキスト' }] });
    const bytes = Buffer.from(JSON.stringify(posted), 'utf8');
    expect(bytes.includes(Buffer.from('🦜', 'utf8'))).toBe(true);
    await succeeds(() => post('/messages', bytes, alice), 202, { envelopes: 1, mailbox_entries: 1 });
    const fetched = await op.client.get(`/messages/${posted.id as string}`, bob);
    expect(fetched.text).toBe(storedText(posted));
  });
});

describe('search and paths with SQL metacharacters', () => {
  it('discovery search treats %, _ and \\ literally', async () => {
    const search = async (q: string) => {
      const reply = await op.client.get(`/search/agents?q=${enc(q)}`, alice);
      expect(reply.status).toBe(200);
      return (reply.body.agents as Array<{ id: string }>).map((a) => a.id);
    };
    expect(await search('100%_off')).toEqual(['@bad.likea']);
    expect(await search('%_')).toEqual(['@bad.likea']);
    expect(await search('f\\n')).toEqual(['@bad.likea']);
    expect(await search('0%')).toEqual(['@bad.likea']);
    expect(await search('sale 100')).toEqual(['@bad.likea', '@bad.likeb']);
    expect(await search("'; DROP TABLE agents; --")).toEqual([]);
    expect(await search('__')).toEqual([]);
    expect(await search('%%')).toEqual([]);
  });

  it('every search route answers 200 (never 500) to metacharacters, NUL and lone surrogates, changing nothing', async () => {
    const queries = [
      ...SQL_STRINGS.filter((q) => q.length >= 2),
      '%%',
      '__',
      '\\\\',
      'a\u0000b',
      '\u0000\u0000',
      '🦜🦜',
      '\ud800x',
      ':*',
      '!(a|b)&c',
      "o'neil",
      'x'.repeat(100),
    ];
    for (const route of ['/search', '/search/agents', '/search/messages']) {
      for (const q of queries) {
        const before = await counts();
        const reply = await op.client.get(`${route}?q=${enc(q.replace(/[\ud800-\udfff]/g, '\ufffd'))}`, alice);
        expect({ route, q, status: reply.status }).toEqual({ route, q, status: 200 });
        expect(await counts()).toEqual(before);
      }
    }
  });

  it('a lone surrogate or NUL percent-encoded in a query, and odd cursors, never 500', async () => {
    for (const query of [
      'q=%ED%A0%80x',
      'q=ab%00',
      'q=%E0%A4%A',
      'q=ab&cursor=AA',
      `q=ab&cursor=${Buffer.from("'\u0000'").toString('base64url')}`,
      'q=ab&cursor=%00%00',
    ]) {
      const reply = await op.client.get(`/search/agents?${query}`, alice);
      expect({ query, status: reply.status }).toEqual({ query, status: 200 });
    }
  });

  it('message search finds envelopes by words next to metacharacters', async () => {
    const posted = message({ subject: "quux'; DROP TABLE agents; -- 100%_off\\now" });
    await succeeds(() => send(posted), 202, { envelopes: 1, mailbox_entries: 1 });
    for (const q of ["quux'; DROP", 'quux', "'; DROP TABLE agents; --"]) {
      const reply = await op.client.get(`/search/messages?q=${enc(q)}`, bob);
      expect({ q, status: reply.status }).toEqual({ q, status: 200 });
      expect((reply.body.envelopes as Array<{ envelope_id: string }>).map((e) => e.envelope_id)).toContain(posted.id);
    }
  });

  const weird = ["'; DROP TABLE agents; --", '%', '_', '\\', "@bad.'", '@bad.%', '🦜', '\u0000', '\ufffd'];
  const paths: Array<[string, string, number, string, () => string]> = [];
  for (const raw of weird) {
    const s = enc(raw);
    paths.push(['GET', `/_admin/agents/${s}`, 400, 'INVALID_HANDLE', () => admin]);
    paths.push(['PATCH', `/_admin/agents/${s}`, 400, 'INVALID_HANDLE', () => admin]);
    paths.push(['DELETE', `/_admin/agents/${s}`, 400, 'INVALID_HANDLE', () => admin]);
    paths.push(['POST', `/_admin/agents/${s}/rotate-token`, 400, 'INVALID_HANDLE', () => admin]);
    paths.push(['DELETE', `/agents/me/allowlist/${s}`, 400, 'INVALID_ALLOWLIST_ENTRY', () => alice]);
    paths.push(['DELETE', `/agents/me/blocks/${s}`, 400, 'INVALID_HANDLE', () => alice]);
    paths.push(['GET', `/agents/${s}/bob`, 404, 'NOT_FOUND', () => alice]);
    paths.push(['GET', `/agents/bad/${s}`, 404, 'NOT_FOUND', () => alice]);
    paths.push(['GET', `/agents/${s}/${s}/card`, 404, 'NOT_FOUND', () => alice]);
    paths.push(['GET', `/messages/${s}`, 400, 'INVALID_ENVELOPE_ID', () => bob]);
    paths.push(['GET', `/files/${s}`, 404, 'NOT_FOUND', () => alice]);
    paths.push(['GET', `/_admin/orgs/${s}`, 404, 'NOT_FOUND', () => admin]);
    paths.push(['GET', `/schedules/${s}`, 404, 'NOT_FOUND', () => alice]);
    paths.push(['DELETE', `/schedules/${s}`, 404, 'NOT_FOUND', () => alice]);
    paths.push(['GET', `/messages/${s}/receipts`, 400, 'INVALID_ENVELOPE_ID', () => alice]);
    paths.push(['GET', `/messages/${s}/status`, 400, 'INVALID_ENVELOPE_ID', () => alice]);
    paths.push(['GET', `/messages?ids=${s}`, 400, 'INVALID_ENVELOPE_ID', () => bob]);
    paths.push(['GET', `/mailbox?after_created_at=1&after_envelope_id=${s}`, 400, 'INVALID_ENVELOPE_ID', () => bob]);
    paths.push(['GET', `/mailbox?limit=${s}`, 400, 'INVALID_QUERY', () => bob]);
    paths.push(['GET', `/mailbox?direction=${s}`, 400, 'INVALID_QUERY', () => bob]);
    paths.push(['GET', `/agents/me/blocks?limit=${s}`, 400, 'INVALID_LIMIT', () => alice]);
    paths.push(['GET', `/agents/me/blocks?cursor=${s}`, 400, 'INVALID_CURSOR', () => alice]);
  }
  // Query values are decoded leniently (a malformed escape stays literal), then validated.
  for (const s of ['%ED%A0%80', '%E0%A4%A', '%ZZ']) {
    paths.push(['GET', `/messages?ids=${s}`, 400, 'INVALID_ENVELOPE_ID', () => bob]);
    paths.push(['GET', `/mailbox?limit=${s}`, 400, 'INVALID_QUERY', () => bob]);
    paths.push([
      'GET',
      `/mailbox?after_created_at=${s}&after_envelope_id=01ARZ3NDEKTSV4RRFFQ69G5FAV`,
      400,
      'INVALID_QUERY',
      () => bob,
    ]);
    paths.push(['GET', `/agents/me/blocks?cursor=${s}`, 400, 'INVALID_CURSOR', () => alice]);
  }
  it.each(paths)('%s %s → %i %s', async (method, path, status, code, token) => {
    await refused(() => op.client.request(method, path, { token: token() }), status, code);
  });

  it('a path that is not percent-encoded UTF-8 → 400 BAD_REQUEST with the ASMTP body', async () => {
    for (const [method, path, token] of [
      ['GET', '/_admin/agents/%E0%A4%A', admin],
      ['DELETE', '/agents/me/blocks/%E0%A4%A', alice],
      ['GET', '/messages/%ZZ', bob],
      ['GET', '/agents/%/x', alice],
      ['GET', '/files/%ED%A0%80', alice],
      ['PATCH', '/_admin/agents/%C0%AF', admin],
    ] as const) {
      await refused(() => op.client.request(method, path, { token }), 400, 'BAD_REQUEST');
    }
  });

  it('an over-long path parameter → 414 with the ASMTP body', async () => {
    await refused(() => op.client.get(`/_admin/agents/${enc(`@bad.${'x'.repeat(3000)}`)}`, admin), 414, 'BAD_REQUEST');
    await refused(() => op.client.get(`/messages/${'0'.repeat(3000)}`, bob), 414, 'BAD_REQUEST');
  });
});

describe('admin bodies: wrong types at every field', () => {
  const fieldCases: Array<[string, unknown, string]> = [];
  const add = (field: string, values: unknown[], code: string) => {
    for (const value of values) fieldCases.push([field, value, code]);
  };
  add('policy', [1, true, {}, [], 'maybe', '', 'OPEN', "'; DROP TABLE agents; --"], 'INVALID_POLICY');
  add('display_name', [null, 1, true, {}, [], '', 'a\u0000b', '\ud800'], 'INVALID_DISPLAY_NAME');
  add('description', [1, true, {}, [], 'a\u0000b', 'x\udfff'], 'INVALID_DESCRIPTION');
  add('card_body', [1, true, {}, [], '\u0000', '\udc00\ud800'], 'INVALID_CARD_BODY');
  add('visibility', [null, 1, true, {}, [], 'x', 'PUBLIC'], 'INVALID_VISIBILITY');
  add('content_guard', [1, true, {}, [], 'x'], 'INVALID_CONTENT_GUARD');
  add('retention_days', ['1', true, {}, [], 0, -1, 1.5, 36501, 1e300], 'INVALID_RETENTION');

  it.each(fieldCases.map(([f, v, c]) => [f, JSON.stringify(v), v, c]))(
    'create with %s: %s → %s',
    async (field, _label, value, code) => {
      await refused(() => post('/_admin/agents', { handle: '@bad.newcomer', [field]: value }, admin), 400, code);
    },
  );

  it.each(fieldCases.map(([f, v, c]) => [f, JSON.stringify(v), v, c]))(
    'patch with %s: %s → %s',
    async (field, _label, value, code) => {
      await refused(() => op.client.patch(`/_admin/agents/${enc(CAROL)}`, { [field]: value }, admin), 400, code);
    },
  );

  it.each(
    [
      undefined,
      null,
      1,
      true,
      {},
      [],
      '',
      'bad',
      '@bad',
      '@Bad.x',
      '@a.b.c',
      '@bad.*',
      '@bad.x ',
      ' @bad.x',
      '@bad.\u0000',
      "@bad.'; DROP TABLE agents; --",
      '@%.%',
      '@bad.🦜',
    ].map((v) => [JSON.stringify(v) ?? 'missing', v]),
  )('create with handle %s → INVALID_HANDLE', async (_label, handle) => {
    await refused(() => post('/_admin/agents', handle === undefined ? {} : { handle }, admin), 400, 'INVALID_HANDLE');
  });

  it('field order: handle before policy before display_name; a valid field before a bad one still changes nothing', async () => {
    await refused(
      () => post('/_admin/agents', { handle: 'x', policy: 'x', display_name: '' }, admin),
      400,
      'INVALID_HANDLE',
    );
    await refused(
      () => post('/_admin/agents', { handle: '@bad.n2', policy: 'x', display_name: '' }, admin),
      400,
      'INVALID_POLICY',
    );
    await refused(
      () => op.client.patch(`/_admin/agents/${enc(CAROL)}`, { display_name: 'Renamed', visibility: 'x' }, admin),
      400,
      'INVALID_VISIBILITY',
    );
  });

  it('path checks come before body checks: bad handle → 400, unknown agent → 404, then the body', async () => {
    await refused(
      () => op.client.request('PATCH', '/_admin/agents/bad', { token: admin, body: '{' }),
      400,
      'INVALID_HANDLE',
    );
    await refused(
      () => op.client.request('PATCH', `/_admin/agents/${enc('@bad.nobody')}`, { token: admin, body: '{' }),
      404,
      'NOT_FOUND',
    );
    await refused(
      () => op.client.request('PATCH', `/_admin/agents/${enc(CAROL)}`, { token: admin, body: '[]' }),
      400,
      'INVALID_JSON',
    );
  });

  it('an existing handle → 409 AGENT_EXISTS; no bearer or an agent bearer → 401', async () => {
    await refused(() => post('/_admin/agents', { handle: CAROL }, admin), 409, 'AGENT_EXISTS');
    await refused(() => post('/_admin/agents', { handle: '@bad.n3' }), 401, 'UNAUTHORIZED');
    await refused(() => post('/_admin/agents', { handle: '@bad.n3' }, alice), 401, 'UNAUTHORIZED');
  });

  it('nulls where allowed, unicode and SQL text are stored and read back exactly', async () => {
    const fields = { policy: null, description: null, card_body: null, content_guard: null, retention_days: null };
    const created = await succeeds(() => post('/_admin/agents', { handle: '@bad.nulls', ...fields }, admin), 201, {
      agents: 1,
    });
    expect(created.body).toMatchObject({
      policy: 'allowlist',
      description: null,
      card_body: null,
      visibility: 'private',
    });
    for (const [i, value] of [
      '🦜 Parrot',
      "'; DROP TABLE agents; --",
      '%_\\',
      '\u2028\ufeff\uffff',
      '\u{10ffff}',
    ].entries()) {
      const handle = `@bad.text${i}`;
      const body = { handle, display_name: value, description: value, card_body: value };
      await succeeds(() => post('/_admin/agents', body, admin), 201, { agents: 1 });
      const shown = await op.client.get(`/_admin/agents/${enc(handle)}`, admin);
      expect(shown.body).toMatchObject({ display_name: value, description: value, card_body: value });
      const patched = await op.client.patch(
        `/_admin/agents/${enc(handle)}`,
        { display_name: `${value}!`, description: null },
        admin,
      );
      expect(patched.body).toMatchObject({ display_name: `${value}!`, description: null, card_body: value });
    }
  });

  describe('organizations', () => {
    it.each([
      [{}, 'INVALID_ORG'],
      [{ name: null }, 'INVALID_ORG'],
      [{ name: 1 }, 'INVALID_ORG'],
      [{ name: '' }, 'INVALID_ORG'],
      [{ name: 'Bad' }, 'INVALID_ORG'],
      [{ name: "'; DROP TABLE orgs; --" }, 'INVALID_ORG'],
      [{ name: 'x\u0000' }, 'INVALID_ORG'],
      [{ name: 'a'.repeat(65) }, 'INVALID_ORG'],
      [{ name: 'okorg', retention_days: '1' }, 'INVALID_RETENTION'],
      [{ name: 'okorg', content_guard: null }, 'INVALID_CONTENT_GUARD'],
      [{ name: 'okorg', max_agents: -1 }, 'INVALID_QUOTA'],
      [{ name: 'okorg', max_agents: 'many' }, 'INVALID_QUOTA'],
    ])('create %j → %s', async (body, code) => {
      await refused(() => post('/_admin/orgs', body, admin), 400, code);
    });

    it('patch with wrong types changes nothing', async () => {
      await succeeds(() => post('/_admin/orgs', { name: 'badorg' }, admin), 201, { orgs: 1 });
      const before = await db.query('select * from orgs');
      for (const [body, code] of [
        [{ retention_days: 0 }, 'INVALID_RETENTION'],
        [{ content_guard: 'loud' }, 'INVALID_CONTENT_GUARD'],
        [{ max_agents: 1.5 }, 'INVALID_QUOTA'],
        [{ max_agents: 5, retention_days: 'x' }, 'INVALID_RETENTION'],
      ] as const) {
        await refused(() => op.client.patch('/_admin/orgs/badorg', body, admin), 400, code);
      }
      expect((await db.query('select * from orgs')).rows).toEqual(before.rows);
    });
  });
});

describe('self, allowlist, blocks and mailbox-read bodies: wrong types at every field', () => {
  it.each([
    ['display_name', [null, 1, true, {}, [], '', '\u0000', 'x\ud800'], 'INVALID_DISPLAY_NAME'],
    ['description', [1, true, {}, [], 'a\u0000', '\udfff'], 'INVALID_DESCRIPTION'],
    ['card_body', [1, true, {}, [], '\u0000\u0000', '\ud800\ud800'], 'INVALID_CARD_BODY'],
  ] as const)('PATCH /agents/me %s', async (field, values, code) => {
    for (const value of values)
      await refused(() => op.client.patch('/agents/me', { [field]: value }, alice), 400, code);
  });

  it('PATCH /agents/me with no recognised field → INVALID_UPDATE; ignored keys are not applied', async () => {
    for (const body of [
      {},
      { visibility: 'public' },
      { skills: null, policy: 'allowlist', handle: CAROL },
      { "'; DROP TABLE agents; --": 1 },
    ]) {
      await refused(() => op.client.patch('/agents/me', body, alice), 400, 'INVALID_UPDATE');
    }
    await refused(
      () => op.client.patch('/agents/me', { display_name: 'ok', description: 5 }, alice),
      400,
      'INVALID_DESCRIPTION',
    );
  });

  it('PATCH /agents/me stores unicode and SQL text exactly', async () => {
    for (const value of ['🦜', "'; DROP TABLE agents; --", '%_\\', '\u{10ffff}e\u0301']) {
      const reply = await op.client.patch(
        '/agents/me',
        { display_name: value, description: value, card_body: null },
        carol,
      );
      expect(reply.status).toBe(200);
      expect(reply.body).toMatchObject({ display_name: value, description: value, card_body: null });
      expect((await op.client.get('/agents/me', carol)).body.display_name).toBe(value);
    }
  });

  it.each([
    [{}, 'INVALID_ENTRIES'],
    [{ entries: null }, 'INVALID_ENTRIES'],
    [{ entries: 1 }, 'INVALID_ENTRIES'],
    [{ entries: '@bad.bob' }, 'INVALID_ENTRIES'],
    [{ entries: {} }, 'INVALID_ENTRIES'],
    [{ entries: true }, 'INVALID_ENTRIES'],
    [{ entries: [] }, 'INVALID_ENTRIES'],
    [{ entries: [1] }, 'INVALID_ALLOWLIST_ENTRY'],
    [{ entries: [null] }, 'INVALID_ALLOWLIST_ENTRY'],
    [{ entries: [[]] }, 'INVALID_ALLOWLIST_ENTRY'],
    [{ entries: ['x'] }, 'INVALID_ALLOWLIST_ENTRY'],
    [{ entries: ['@bad.bob', 'bad'] }, 'INVALID_ALLOWLIST_ENTRY'],
    [{ entries: ['@BAD.*'] }, 'INVALID_ALLOWLIST_ENTRY'],
    [{ entries: ['@bad.**'] }, 'INVALID_ALLOWLIST_ENTRY'],
    [{ entries: ['@*.*'] }, 'INVALID_ALLOWLIST_ENTRY'],
    [{ entries: ['%'] }, 'INVALID_ALLOWLIST_ENTRY'],
    [{ entries: ["@bad.'; DROP TABLE agents; --"] }, 'INVALID_ALLOWLIST_ENTRY'],
    [{ entries: ['@bad.\u0000'] }, 'INVALID_ALLOWLIST_ENTRY'],
  ])('POST /agents/me/allowlist %j → %s', async (body, code) => {
    await refused(() => post('/agents/me/allowlist', body, alice), 400, code);
  });

  it.each([
    [{}, 'INVALID_HANDLE'],
    [{ handle: null }, 'INVALID_HANDLE'],
    [{ handle: 1 }, 'INVALID_HANDLE'],
    [{ handle: true }, 'INVALID_HANDLE'],
    [{ handle: {} }, 'INVALID_HANDLE'],
    [{ handle: [BOB] }, 'INVALID_HANDLE'],
    [{ handle: '' }, 'INVALID_HANDLE'],
    [{ handle: '@bad.*' }, 'INVALID_HANDLE'],
    [{ handle: '%' }, 'INVALID_HANDLE'],
    [{ handle: "@bad.'; DROP TABLE blocks; --" }, 'INVALID_HANDLE'],
    [{ handle: '@bad.b\u0000' }, 'INVALID_HANDLE'],
    [{ handle: ALICE }, 'INVALID_BLOCK_TARGET'],
  ])('POST /agents/me/blocks %j → %s', async (body, code) => {
    await refused(() => post('/agents/me/blocks', body, alice), 400, code);
  });

  it.each([
    [{}, 'INVALID_REQUEST'],
    [{ ids: null }, 'INVALID_REQUEST'],
    [{ ids: 1 }, 'INVALID_REQUEST'],
    [{ ids: 'x' }, 'INVALID_REQUEST'],
    [{ ids: {} }, 'INVALID_REQUEST'],
    [{ ids: true }, 'INVALID_REQUEST'],
    [{ ids: [] }, 'INVALID_REQUEST'],
    [{ ids: [1] }, 'INVALID_ENVELOPE_ID'],
    [{ ids: [null] }, 'INVALID_ENVELOPE_ID'],
    [{ ids: ["' OR 1=1 --"] }, 'INVALID_ENVELOPE_ID'],
    [{ ids: ['%'] }, 'INVALID_ENVELOPE_ID'],
  ])('POST /mailbox/read %j → %s', async (body, code) => {
    await refused(() => post('/mailbox/read', body, bob), 400, code);
  });

  it('POST /mailbox/read with one malformed id among valid ones marks nothing', async () => {
    await refused(() => post('/mailbox/read', { ids: [unreadId, 'x'] }, bob), 400, 'INVALID_ENVELOPE_ID');
    await refused(
      () => post('/mailbox/read', { ids: [unreadId, unreadId.toLowerCase()] }, bob),
      400,
      'INVALID_ENVELOPE_ID',
    );
    const unread = await op.client.get('/mailbox?unread=true&limit=1000', bob);
    expect((unread.body.envelope_headers as Array<{ id: string }>).map((h) => h.id)).toContain(unreadId);
  });
});
