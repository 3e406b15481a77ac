import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  adminAgentView,
  agentResponseOf,
  AsmtpError,
  headerJsonOf,
  listingHeaderOf,
  storedEnvelopeOf,
  type Agent,
  type PostedEnvelope,
} from '#domain';
import {
  type compileRequestValidators,
  REQUEST_SCHEMAS,
  type requestValidatorCompiled,
  responseViolations,
  schemasDir,
  validateRequest,
  wireSchema,
  wireSchemaNames,
  type RequestSchemaName,
} from './schemas';

const ID = '01JV3Z8W7Q4M2N6P8R0T2V4X6Y';
const PARENT = '01JV3Z8W7Q4M2N6P8R0T2V4X6A';

/** The ASMTP code `validateRequest` maps `body` onto, or 'OK' when it passes. */
function outcome(name: RequestSchemaName, body: unknown): string {
  try {
    validateRequest(name, body);
    return 'OK';
  } catch (error) {
    if (!(error instanceof AsmtpError)) throw error;
    expect(error.status).toBe(400);
    return error.code;
  }
}

const valid = (): Record<string, unknown> => ({
  id: ID,
  to: ['@bob.demo'],
  date_ms: 1_747_000_000_000,
  content_parts: [{ type: 'text', text: 'hello' }],
});

/** `valid()` with `patch` applied; an `undefined` value removes the key. */
function envelope(patch: Record<string, unknown>): Record<string, unknown> {
  const body = { ...valid(), ...patch };
  for (const [key, value] of Object.entries(patch)) if (value === undefined) delete body[key];
  return body;
}

/** Table rows read `[what, body, code]`; the title shows what and code, not the body. */
const titled = (rows: Array<[string, Record<string, unknown>, string]>) =>
  rows.map(([what, body, code]): [string, string, Record<string, unknown>] => [what, code, body]);

const part = (p: Record<string, unknown>) => envelope({ content_parts: [p] });

describe("validateRequest('post-message') maps failures onto ASMTP codes (§2.1, §2.2, §2.5 step 2)", () => {
  it.each(
    titled([
      // valid shapes
      ['minimal valid envelope', valid(), 'OK'],
      [
        'every optional field',
        envelope({
          cc: ['@carol.demo'],
          subject: 'hi',
          in_reply_to: PARENT,
          references: [PARENT],
          monitor: 'mon_abc',
        }),
        'OK',
      ],
      ['subject null (= absent)', envelope({ subject: null }), 'OK'],
      ['subject ""', envelope({ subject: '' }), 'OK'],
      ['monitor null (= absent)', envelope({ monitor: null }), 'OK'],
      ['references []', envelope({ references: [] }), 'OK'],
      ['date_ms 0', envelope({ date_ms: 0 }), 'OK'],
      ['to with duplicates', envelope({ to: ['@bob.demo', '@bob.demo'] }), 'OK'],
      ['unknown top-level field', envelope({ priority: 'high', received_ms: 'x' }), 'OK'],
      ['image with url', part({ type: 'image', url: 'https://x/y.png', mime_type: 'image/png' }), 'OK'],
      ['file with file_id', part({ type: 'file', file_id: 'file_01ABC', name: 'a.pdf', size: 3 }), 'OK'],
      ['data object with schema', part({ type: 'data', data: { k: 1 }, schema: 'x/v1' }), 'OK'],
      ['extra keys on a part', part({ type: 'text', text: 'x', lang: 'en' }), 'OK'],
      [
        'url with a DATA: prefix (case-sensitive check)',
        part({ type: 'image', url: 'DATA:image/png;base64,AA' }),
        'OK',
      ],

      // from
      ['from present as null', envelope({ from: null }), 'INVALID_REQUEST'],
      ['from present as own handle', envelope({ from: '@alice.demo' }), 'INVALID_REQUEST'],
      ['from present even when id is also bad', envelope({ from: '@alice.demo', id: 'bad' }), 'INVALID_REQUEST'],
      ['from present even when everything else is missing', { from: null }, 'INVALID_REQUEST'],

      // id
      ['id missing', envelope({ id: undefined }), 'INVALID_ENVELOPE_ID'],
      ['id lower-case', envelope({ id: ID.toLowerCase() }), 'INVALID_ENVELOPE_ID'],
      ['id 25 chars', envelope({ id: ID.slice(0, 25) }), 'INVALID_ENVELOPE_ID'],
      ['id not starting 01', envelope({ id: `02${ID.slice(2)}` }), 'INVALID_ENVELOPE_ID'],
      ['id a number', envelope({ id: 5 }), 'INVALID_ENVELOPE_ID'],
      ['id null', envelope({ id: null }), 'INVALID_ENVELOPE_ID'],
      ['id bad beats a bad to', envelope({ id: 'bad', to: [] }), 'INVALID_ENVELOPE_ID'],

      // to
      ['to missing', envelope({ to: undefined }), 'INVALID_REQUEST'],
      ['to empty', envelope({ to: [] }), 'INVALID_REQUEST'],
      ['to a string', envelope({ to: '@bob.demo' }), 'INVALID_REQUEST'],
      ['to null', envelope({ to: null }), 'INVALID_REQUEST'],
      ['to holds an owner glob', envelope({ to: ['@a.*'] }), 'INVALID_HANDLE'],
      ['to holds a number', envelope({ to: [5] }), 'INVALID_HANDLE'],
      ['to holds an upper-case handle', envelope({ to: ['@bob.demo', '@Bad.x'] }), 'INVALID_HANDLE'],
      ['to holds null', envelope({ to: [null] }), 'INVALID_HANDLE'],

      // cc
      ['cc []', envelope({ cc: [] }), 'INVALID_REQUEST'],
      ['cc null', envelope({ cc: null }), 'INVALID_REQUEST'],
      ['cc a string', envelope({ cc: '@carol.demo' }), 'INVALID_REQUEST'],
      ['cc holds a bad handle', envelope({ cc: ['@carol'] }), 'INVALID_HANDLE'],

      // subject
      ['subject a number', envelope({ subject: 5 }), 'INVALID_REQUEST'],
      ['subject an array', envelope({ subject: ['hi'] }), 'INVALID_REQUEST'],

      // in_reply_to
      ['in_reply_to null', envelope({ in_reply_to: null }), 'INVALID_ENVELOPE_ID'],
      ['in_reply_to malformed', envelope({ in_reply_to: 'x' }), 'INVALID_ENVELOPE_ID'],
      ['in_reply_to a number', envelope({ in_reply_to: 1 }), 'INVALID_ENVELOPE_ID'],

      // references
      ['references null', envelope({ references: null }), 'INVALID_REQUEST'],
      ['references a string', envelope({ references: PARENT }), 'INVALID_REQUEST'],
      ['references ["x"]', envelope({ references: ['x'] }), 'INVALID_ENVELOPE_ID'],
      ['references holds a lower-case id', envelope({ references: [PARENT, ID.toLowerCase()] }), 'INVALID_ENVELOPE_ID'],

      // date_ms
      ['date_ms missing', envelope({ date_ms: undefined }), 'INVALID_REQUEST'],
      ['date_ms 1.5', envelope({ date_ms: 1.5 }), 'INVALID_REQUEST'],
      ['date_ms -1', envelope({ date_ms: -1 }), 'INVALID_REQUEST'],
      ['date_ms "1"', envelope({ date_ms: '1' }), 'INVALID_REQUEST'],
      ['date_ms null', envelope({ date_ms: null }), 'INVALID_REQUEST'],
      ['date_ms beyond the safe integer range', envelope({ date_ms: 2 ** 60 }), 'INVALID_REQUEST'],

      // content_parts
      ['content_parts missing', envelope({ content_parts: undefined }), 'INVALID_CONTENT'],
      ['content_parts []', envelope({ content_parts: [] }), 'INVALID_CONTENT'],
      ['content_parts an object', envelope({ content_parts: { type: 'text', text: 'x' } }), 'INVALID_CONTENT'],
      ['a part that is a string', envelope({ content_parts: ['hello'] }), 'INVALID_CONTENT'],
      ['a part that is null', envelope({ content_parts: [null] }), 'INVALID_CONTENT'],
      ['a part without type', part({ text: 'x' }), 'INVALID_CONTENT'],
      ['unknown part type', part({ type: 'audio', url: 'https://x' }), 'INVALID_CONTENT'],
      ['text missing', part({ type: 'text' }), 'INVALID_CONTENT'],
      ['empty text', part({ type: 'text', text: '' }), 'INVALID_CONTENT'],
      ['text a number', part({ type: 'text', text: 5 }), 'INVALID_CONTENT'],
      ['data an array', part({ type: 'data', data: [1, 2] }), 'INVALID_CONTENT'],
      ['data null', part({ type: 'data', data: null }), 'INVALID_CONTENT'],
      ['data missing', part({ type: 'data' }), 'INVALID_CONTENT'],
      ['data a string', part({ type: 'data', data: '{}' }), 'INVALID_CONTENT'],
      [
        'image with both url and file_id',
        part({ type: 'image', url: 'https://x', file_id: 'file_1' }),
        'INVALID_CONTENT',
      ],
      ['image with neither url nor file_id', part({ type: 'image', mime_type: 'image/png' }), 'INVALID_CONTENT'],
      ['image with a data: url', part({ type: 'image', url: 'data:image/png;base64,AAAA' }), 'INVALID_CONTENT'],
      [
        'file with both url and file_id',
        part({ type: 'file', url: 'https://x', file_id: 'file_1' }),
        'INVALID_CONTENT',
      ],
      ['file with neither', part({ type: 'file', name: 'a.pdf' }), 'INVALID_CONTENT'],
      ['file with a data: url', part({ type: 'file', url: 'data:text/plain,hi' }), 'INVALID_CONTENT'],
      ['image with an empty url', part({ type: 'image', url: '' }), 'INVALID_CONTENT'],
      ['file with an empty file_id', part({ type: 'file', file_id: '' }), 'INVALID_CONTENT'],
      [
        'the second part bad',
        envelope({
          content_parts: [
            { type: 'text', text: 'ok' },
            { type: 'text', text: '' },
          ],
        }),
        'INVALID_CONTENT',
      ],

      // monitor
      ['monitor a number', envelope({ monitor: 5 }), 'INVALID_REQUEST'],
      ['monitor an object', envelope({ monitor: {} }), 'INVALID_REQUEST'],
      ['monitor "x"', envelope({ monitor: 'x' }), 'INVALID_MONITOR'],
      ['monitor "mon_"', envelope({ monitor: 'mon_' }), 'INVALID_MONITOR'],
      ['monitor 65 chars after mon_', envelope({ monitor: `mon_${'a'.repeat(65)}` }), 'INVALID_MONITOR'],

      // several bad fields: the earliest in §2.5 step-2 order wins
      ['to bad and cc bad → to', envelope({ to: [], cc: [] }), 'INVALID_REQUEST'],
      ['cc bad handle and subject bad → cc', envelope({ cc: ['@x'], subject: 5 }), 'INVALID_HANDLE'],
      ['subject bad and in_reply_to bad → subject', envelope({ subject: 5, in_reply_to: 'x' }), 'INVALID_REQUEST'],
      [
        'in_reply_to bad and references bad → in_reply_to',
        envelope({ in_reply_to: 'x', references: null }),
        'INVALID_ENVELOPE_ID',
      ],
      [
        'references element bad and date_ms bad → references',
        envelope({ references: ['x'], date_ms: -1 }),
        'INVALID_ENVELOPE_ID',
      ],
      ['date_ms bad and content bad → date_ms', envelope({ date_ms: 1.5, content_parts: [] }), 'INVALID_REQUEST'],
      ['content bad and monitor bad → content', envelope({ content_parts: [], monitor: 'x' }), 'INVALID_CONTENT'],
      ['monitor type before monitor pattern', envelope({ monitor: 5 }), 'INVALID_REQUEST'],
      ['bad id beats a glob in to', envelope({ to: ['@a.*'], id: 'x' }), 'INVALID_ENVELOPE_ID'],
      [
        'monitor bad and content missing → content',
        envelope({ monitor: 'x', content_parts: undefined }),
        'INVALID_CONTENT',
      ],
      ['everything missing → id', {}, 'INVALID_ENVELOPE_ID'],
    ]),
  )('%s → %s', (_what, code, body) => {
    expect(outcome('post-message', body)).toBe(code);
  });

  it('returns the body itself when valid', () => {
    const body = valid();
    expect(validateRequest('post-message', body)).toBe(body);
  });

  it('names the failing field in the message', () => {
    try {
      validateRequest('post-message', envelope({ subject: 5 }));
      throw new Error('expected a failure');
    } catch (error) {
      expect((error as Error).message).toMatch(/subject/);
    }
  });
});

describe("validateRequest('admin-agent-create') (ASMTP §1.4)", () => {
  it.each(
    titled([
      ['handle only', { handle: '@alice.cli' }, 'OK'],
      [
        'every field',
        {
          handle: '@alice.cli',
          policy: 'open',
          display_name: 'A',
          description: 'd',
          card_body: '# c',
          visibility: 'public',
        },
        'OK',
      ],
      ['policy null (= omitted)', { handle: '@alice.cli', policy: null }, 'OK'],
      ['description and card_body null', { handle: '@alice.cli', description: null, card_body: null }, 'OK'],
      ['unknown fields ignored', { handle: '@alice.cli', token: 'x', allowlist: 5 }, 'OK'],
      ['handle missing', {}, 'INVALID_HANDLE'],
      ['handle @Bad.x', { handle: '@Bad.x' }, 'INVALID_HANDLE'],
      ['handle @a', { handle: '@a' }, 'INVALID_HANDLE'],
      ['handle a.b', { handle: 'a.b' }, 'INVALID_HANDLE'],
      ['handle @a.b.c', { handle: '@a.b.c' }, 'INVALID_HANDLE'],
      ['handle an owner glob', { handle: '@a.*' }, 'INVALID_HANDLE'],
      ['policy maybe', { handle: '@a.b', policy: 'maybe' }, 'INVALID_POLICY'],
      ['display_name ""', { handle: '@a.b', display_name: '' }, 'INVALID_DISPLAY_NAME'],
      ['display_name null', { handle: '@a.b', display_name: null }, 'INVALID_DISPLAY_NAME'],
      ['description 5', { handle: '@a.b', description: 5 }, 'INVALID_DESCRIPTION'],
      ['card_body false', { handle: '@a.b', card_body: false }, 'INVALID_CARD_BODY'],
      ['visibility secret', { handle: '@a.b', visibility: 'secret' }, 'INVALID_VISIBILITY'],
      ['visibility null', { handle: '@a.b', visibility: null }, 'INVALID_VISIBILITY'],
      // evaluation order handle → policy → display_name → description → card_body → visibility
      ['bad handle beats bad policy', { handle: '@A.b', policy: 'maybe' }, 'INVALID_HANDLE'],
      [
        'bad policy beats bad display_name',
        { handle: '@a.b', visibility: 'x', display_name: '', policy: 'x' },
        'INVALID_POLICY',
      ],
      [
        'bad display_name beats bad description',
        { handle: '@a.b', description: 1, display_name: '' },
        'INVALID_DISPLAY_NAME',
      ],
      ['bad description beats bad card_body', { handle: '@a.b', card_body: 1, description: 1 }, 'INVALID_DESCRIPTION'],
      ['bad card_body beats bad visibility', { handle: '@a.b', visibility: 'x', card_body: 1 }, 'INVALID_CARD_BODY'],
    ]),
  )('%s → %s', (_what, code, body) => {
    expect(outcome('admin-agent-create', body)).toBe(code);
  });
});

describe("validateRequest('agent-self-patch') (ASMTP §3.7)", () => {
  it.each(
    titled([
      ['empty object (INVALID_UPDATE is decided by the service)', {}, 'OK'],
      ['display_name', { display_name: 'New' }, 'OK'],
      ['description and card_body cleared', { description: null, card_body: null }, 'OK'],
      ['visibility and skills ignored', { visibility: 'nonsense', skills: 5 }, 'OK'],
      ['display_name ""', { display_name: '' }, 'INVALID_DISPLAY_NAME'],
      ['display_name null', { display_name: null }, 'INVALID_DISPLAY_NAME'],
      ['description 5', { description: 5 }, 'INVALID_DESCRIPTION'],
      ['card_body []', { card_body: [] }, 'INVALID_CARD_BODY'],
      ['display_name first', { card_body: 1, description: 1, display_name: '' }, 'INVALID_DISPLAY_NAME'],
      ['description before card_body', { card_body: 1, description: 1 }, 'INVALID_DESCRIPTION'],
    ]),
  )('%s → %s', (_what, code, body) => {
    expect(outcome('agent-self-patch', body)).toBe(code);
  });
});

describe("validateRequest('allowlist-add') (ASMTP §3.7)", () => {
  it.each(
    titled([
      ['an owner glob', { entries: ['@acme.*'] }, 'OK'],
      ['a handle and a glob', { entries: ['@acme.bot', '@other.*'] }, 'OK'],
      ['entries missing', {}, 'INVALID_ENTRIES'],
      ['entries []', { entries: [] }, 'INVALID_ENTRIES'],
      ['entries a string', { entries: '@acme.*' }, 'INVALID_ENTRIES'],
      ['entries null', { entries: null }, 'INVALID_ENTRIES'],
      ['a bad entry', { entries: ['@acme.*', 'acme'] }, 'INVALID_ALLOWLIST_ENTRY'],
      ['an upper-case entry', { entries: ['@Acme.*'] }, 'INVALID_ALLOWLIST_ENTRY'],
      ['a partial glob', { entries: ['@acme.b*'] }, 'INVALID_ALLOWLIST_ENTRY'],
      ['a number entry', { entries: [1] }, 'INVALID_ALLOWLIST_ENTRY'],
    ]),
  )('%s → %s', (_what, code, body) => {
    expect(outcome('allowlist-add', body)).toBe(code);
  });
});

describe("validateRequest('mailbox-read') (ASMTP §3.6)", () => {
  it.each(
    titled([
      ['one id', { ids: [ID] }, 'OK'],
      ['repeated ids', { ids: [ID, ID, PARENT] }, 'OK'],
      ['ids missing', {}, 'INVALID_REQUEST'],
      ['ids []', { ids: [] }, 'INVALID_REQUEST'],
      ['ids a string', { ids: ID }, 'INVALID_REQUEST'],
      ['ids null', { ids: null }, 'INVALID_REQUEST'],
      ['a malformed id', { ids: [ID, 'nope'] }, 'INVALID_ENVELOPE_ID'],
      ['a lower-case id', { ids: [ID.toLowerCase()] }, 'INVALID_ENVELOPE_ID'],
    ]),
  )('%s → %s', (_what, code, body) => {
    expect(outcome('mailbox-read', body)).toBe(code);
  });
});

describe("validateRequest('block-create') (ASMTP §3.7)", () => {
  it.each(
    titled([
      ['a handle', { handle: '@x.y' }, 'OK'],
      ['handle missing', {}, 'INVALID_HANDLE'],
      ['an owner glob', { handle: '@x.*' }, 'INVALID_HANDLE'],
      ['upper case', { handle: '@X.y' }, 'INVALID_HANDLE'],
      ['a number', { handle: 5 }, 'INVALID_HANDLE'],
    ]),
  )('%s → %s', (_what, code, body) => {
    expect(outcome('block-create', body)).toBe(code);
  });
});

describe('wire schemas', () => {
  it('wireSchemaNames lists every file in libs/schemas/wire', () => {
    const files = readdirSync(schemasDir())
      .filter((name) => name.endsWith('.schema.json'))
      .map((name) => name.replace(/\.schema\.json$/, ''))
      .sort();
    expect(wireSchemaNames().sort()).toEqual(files);
    expect(files).toEqual(expect.arrayContaining(['post-message', 'header', 'stored-envelope', 'common']));
  });

  it.each(wireSchemaNames())('%s compiles and carries its own $id', (name) => {
    expect(wireSchema(name).$id).toBe(`https://roost.dev/schemas/${name}.schema.json`);
    expect(() => responseViolations(name, {})).not.toThrow();
  });

  it('an unknown schema name throws', () => {
    // @ts-expect-error: tsc already refuses a name that is not a request schema
    expect(() => validateRequest('no-such-schema', {})).toThrow(/unknown wire schema/);
  });

  it('every x-field-order names only declared properties', () => {
    for (const name of wireSchemaNames()) {
      const schema = wireSchema(name);
      const order = schema['x-field-order'] as string[] | undefined;
      if (order === undefined) continue;
      const properties = Object.keys((schema.properties as Record<string, unknown>) ?? {});
      expect({ name, unknown: order.filter((field) => !properties.includes(field)) }).toEqual({ name, unknown: [] });
    }
  });
});

describe('responseViolations', () => {
  const header = {
    op: 'envelope.notify',
    id: ID,
    from: '@alice.demo',
    to: ['@bob.demo'],
    type_hint: 'text',
    size_hint: 3,
    created_at: 1_747_000_000_123,
    date_ms: 1_747_000_000_000,
  };

  it('is empty for a valid header', () => {
    expect(responseViolations('header', header)).toEqual([]);
  });

  it('detects a header carrying content_parts (§6.3: never body content)', () => {
    const violations = responseViolations('header', { ...header, content_parts: [{ type: 'text', text: 'x' }] });
    expect(violations.length).toBeGreaterThan(0);
    expect(violations.join('\n')).toMatch(/additional properties/);
  });

  it('detects a header with a null optional field instead of an omitted one', () => {
    expect(responseViolations('header', { ...header, subject: null })).not.toEqual([]);
  });

  it('detects a header missing created_at', () => {
    const { created_at: _omitted, ...rest } = header;
    expect(responseViolations('header', rest).join('\n')).toMatch(/created_at/);
  });

  it('detects a stored envelope that still carries file_id', () => {
    const stored = {
      id: ID,
      from: '@alice.demo',
      to: ['@bob.demo'],
      date_ms: 1,
      content_parts: [{ type: 'image', url: 'https://x/files/file_1', file_id: 'file_1' }],
    };
    expect(responseViolations('stored-envelope', stored)).not.toEqual([]);
    const { content_parts: _parts, ...withoutParts } = stored;
    expect(
      responseViolations('stored-envelope', {
        ...withoutParts,
        content_parts: [{ type: 'image', url: 'https://x/files/file_1' }],
      }),
    ).toEqual([]);
  });

  it('accepts the ASMTP error shape and rejects a bare string error', () => {
    expect(responseViolations('error', { error: { code: 'NOT_FOUND', message: 'not found' } })).toEqual([]);
    expect(responseViolations('error', { error: 'NOT_FOUND' })).not.toEqual([]);
  });
});

describe('domain builders produce bodies the wire schemas accept', () => {
  const agent: Agent = {
    id: 1,
    handle: '@acme.bot',
    policy: 'allowlist',
    allowlist: ['@zeta.*', '@acme.a'],
    display_name: 'Acme Bot',
    description: null,
    card_body: null,
    visibility: 'private',
    content_guard: 'warn',
    retention_days: 30,
    created_at: 1,
    updated_at: 2,
  };
  const posted: PostedEnvelope = {
    id: ID,
    to: ['@bob.demo'],
    cc: ['@carol.demo'],
    subject: 'hi',
    in_reply_to: PARENT,
    references: [PARENT],
    monitor: 'mon_x',
    date_ms: 5,
    content_parts: [{ type: 'text', text: 'hello' }],
  };
  const stored = storedEnvelopeOf(posted, '@alice.demo', posted.content_parts);
  const header = headerJsonOf(stored, { type_hint: 'text', size_hint: 8, created_at: 6 }, { flags: ['secret'] });

  it('adminAgentView with and without token → admin-agent', () => {
    expect(responseViolations('admin-agent', adminAgentView(agent))).toEqual([]);
    expect(responseViolations('admin-agent', adminAgentView(agent, 'tok'))).toEqual([]);
  });

  it('agentResponseOf → agent-response', () => {
    expect(responseViolations('agent-response', agentResponseOf(agent))).toEqual([]);
  });

  it('storedEnvelopeOf → stored-envelope', () => {
    expect(responseViolations('stored-envelope', stored)).toEqual([]);
  });

  it('headerJsonOf and listingHeaderOf → header', () => {
    expect(responseViolations('header', JSON.parse(header))).toEqual([]);
    expect(responseViolations('header', JSON.parse(listingHeaderOf(header, 'self', true)))).toEqual([]);
  });
});

describe('compileRequestValidators (start-up, so the first request does not compile)', () => {
  it('lists every schema the source validates requests with', () => {
    const root = join(__dirname, '../../..');
    const used = new Set<string>();
    const walk = (dir: string) => {
      for (const entry of readdirSync(dir, { withFileTypes: true })) {
        const path = join(dir, entry.name);
        if (entry.isDirectory()) walk(path);
        else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.spec.ts')) {
          for (const match of readFileSync(path, 'utf8').matchAll(/validateRequest(?:<[^(]*>)?\('([a-z-]+)'/g))
            used.add(match[1]);
        }
      }
    };
    walk(join(root, 'apps'));
    walk(join(root, 'libs'));
    expect(used.size).toBeGreaterThan(5);
    expect([...used].sort()).toEqual([...REQUEST_SCHEMAS].sort());
  });

  it('compiles each of them', () => {
    // A fresh copy of the module: the tests above compiled some validators on first use.
    jest.isolateModules(() => {
      // eslint-disable-next-line @typescript-eslint/no-require-imports -- jest.isolateModules needs a synchronous load
      const fresh = require('./schemas') as {
        compileRequestValidators: typeof compileRequestValidators;
        requestValidatorCompiled: typeof requestValidatorCompiled;
      };
      expect(REQUEST_SCHEMAS.filter((name) => fresh.requestValidatorCompiled(name))).toEqual([]);
      fresh.compileRequestValidators();
      expect(REQUEST_SCHEMAS.filter((name) => !fresh.requestValidatorCompiled(name))).toEqual([]);
    });
  });
});
