import {
  expandRecipients,
  headerJsonOf,
  listingHeaderOf,
  nextCreatedAt,
  sizeHintOf,
  storedEnvelopeOf,
  typeHintOf,
  type ContentPart,
  type PostedEnvelope,
} from './envelope';

const ID = '01JV3Z8W7Q4M2N6P8R0T2V4X6Y';
const PARENT = '01JV3Z8W7Q4M2N6P8R0T2V4X6A';
const text = (t: string): ContentPart => ({ type: 'text', text: t });

const minimal: PostedEnvelope = {
  id: ID,
  to: ['@bob.demo'],
  date_ms: 1_747_000_000_000,
  content_parts: [text('hello')],
};

const full: PostedEnvelope = {
  // deliberately not in stored order, to prove the builder imposes it
  monitor: 'mon_x',
  references: [PARENT],
  in_reply_to: PARENT,
  subject: 'hi',
  cc: ['@carol.demo'],
  content_parts: [text('hello')],
  date_ms: 1_747_000_000_000,
  to: ['@bob.demo', '@bob.demo'],
  id: ID,
};

describe('expandRecipients (ASMTP §2.5 step 3)', () => {
  it('is to then new cc handles, first occurrence wins', () => {
    expect(expandRecipients(['@b.x', '@a.x', '@b.x'], ['@c.x', '@a.x', '@d.x', '@c.x'])).toEqual([
      '@b.x',
      '@a.x',
      '@c.x',
      '@d.x',
    ]);
  });

  it('a handle in both to and cc appears once, at its to position', () => {
    expect(expandRecipients(['@a.x', '@b.x'], ['@b.x'])).toEqual(['@a.x', '@b.x']);
  });

  it('cc defaults to none', () => {
    expect(expandRecipients(['@a.x'])).toEqual(['@a.x']);
  });

  it('does not mutate its inputs', () => {
    const to = ['@a.x', '@a.x'];
    expandRecipients(to, ['@a.x']);
    expect(to).toEqual(['@a.x', '@a.x']);
  });
});

describe('typeHintOf (ASMTP §2.3)', () => {
  it.each<[ContentPart[], string]>([
    [[text('a')], 'text'],
    [[text('a'), text('b')], 'text'],
    [[{ type: 'image', url: 'u' }], 'image'],
    [
      [
        { type: 'file', url: 'u' },
        { type: 'file', url: 'v' },
      ],
      'file',
    ],
    [[{ type: 'data', data: {} }], 'data'],
    [[text('a'), { type: 'image', url: 'u' }], 'mixed'],
    [[{ type: 'data', data: {} }, text('a'), text('b')], 'mixed'],
    [
      [
        { type: 'image', url: 'u' },
        { type: 'file', url: 'u' },
      ],
      'mixed',
    ],
  ])('%j → %s', (parts, hint) => {
    expect(typeHintOf(parts)).toBe(hint);
  });
});

describe('sizeHintOf (ASMTP §2.3)', () => {
  it('is ceil(UTF-16 length of JSON.stringify(parts) / 4)', () => {
    const parts = [text('hello')];
    expect(JSON.stringify(parts)).toBe('[{"type":"text","text":"hello"}]'); // 32 chars
    expect(sizeHintOf(parts)).toBe(8);
  });

  it('rounds up, and a length divisible by 4 is not rounded', () => {
    expect(JSON.stringify([text('abcd')])).toHaveLength(31);
    expect(sizeHintOf([text('abcd')])).toBe(8); // 31 / 4 = 7.75
    expect(sizeHintOf([text('abcde')])).toBe(8); // 32 / 4 = 8
    expect(sizeHintOf([text('abcdef')])).toBe(9); // 33 / 4 = 8.25
  });

  it('counts UTF-16 code units, not bytes', () => {
    const parts = [text('😀')]; // 2 code units, 4 UTF-8 bytes
    expect(JSON.stringify(parts)).toHaveLength(29);
    expect(sizeHintOf(parts)).toBe(8);
  });
});

describe('storedEnvelopeOf (ASMTP §2.1 stored body)', () => {
  it('puts keys in the reference order id, from, to, date_ms, content_parts, cc, subject, in_reply_to, references, monitor', () => {
    const stored = storedEnvelopeOf(full, '@alice.demo', full.content_parts);
    expect(Object.keys(stored)).toEqual([
      'id',
      'from',
      'to',
      'date_ms',
      'content_parts',
      'cc',
      'subject',
      'in_reply_to',
      'references',
      'monitor',
    ]);
  });

  it('stamps from and keeps to verbatim, duplicates included', () => {
    const stored = storedEnvelopeOf(full, '@alice.demo', full.content_parts);
    expect(stored.from).toBe('@alice.demo');
    expect(stored.to).toEqual(['@bob.demo', '@bob.demo']);
  });

  it('omits absent optionals entirely (not null)', () => {
    const stored = storedEnvelopeOf(minimal, '@alice.demo', minimal.content_parts);
    expect(Object.keys(stored)).toEqual(['id', 'from', 'to', 'date_ms', 'content_parts']);
    expect(JSON.stringify(stored)).not.toContain('null');
  });

  it('drops references: []', () => {
    const stored = storedEnvelopeOf({ ...minimal, references: [] }, '@alice.demo', minimal.content_parts);
    expect(stored).not.toHaveProperty('references');
  });

  it('keeps an empty subject', () => {
    expect(storedEnvelopeOf({ ...minimal, subject: '' }, '@a.b', minimal.content_parts).subject).toBe('');
  });

  it('stores the resolved parts given, not the posted ones', () => {
    const resolved = [{ type: 'image', url: 'https://x/files/file_1' } as ContentPart];
    const posted = { ...minimal, content_parts: [{ type: 'image', file_id: 'file_1' } as ContentPart] };
    expect(storedEnvelopeOf(posted, '@a.b', resolved).content_parts).toBe(resolved);
  });

  it('never carries operator-derived fields', () => {
    const stored = storedEnvelopeOf(full, '@alice.demo', full.content_parts) as unknown as Record<string, unknown>;
    for (const key of ['received_ms', 'created_at', 'type_hint', 'size_hint']) expect(stored).not.toHaveProperty(key);
  });
});

describe('headerJsonOf (ASMTP §6.3 envelope.notify)', () => {
  const derived = { type_hint: 'text' as const, size_hint: 8, created_at: 1_747_000_000_123 };
  const storedFull = storedEnvelopeOf(full, '@alice.demo', [text('top secret body')]);
  const storedMinimal = storedEnvelopeOf(minimal, '@alice.demo', minimal.content_parts);

  it('orders keys op, id, from, to, cc, subject, in_reply_to, type_hint, size_hint, created_at, date_ms', () => {
    expect(Object.keys(JSON.parse(headerJsonOf(storedFull, derived)))).toEqual([
      'op',
      'id',
      'from',
      'to',
      'cc',
      'subject',
      'in_reply_to',
      'type_hint',
      'size_hint',
      'created_at',
      'date_ms',
    ]);
  });

  it('carries the values of the stored body and the derived fields', () => {
    expect(JSON.parse(headerJsonOf(storedFull, derived))).toEqual({
      op: 'envelope.notify',
      id: ID,
      from: '@alice.demo',
      to: ['@bob.demo', '@bob.demo'],
      cc: ['@carol.demo'],
      subject: 'hi',
      in_reply_to: PARENT,
      type_hint: 'text',
      size_hint: 8,
      created_at: 1_747_000_000_123,
      date_ms: 1_747_000_000_000,
    });
  });

  it('omits absent cc, subject and in_reply_to', () => {
    expect(Object.keys(JSON.parse(headerJsonOf(storedMinimal, derived)))).toEqual([
      'op',
      'id',
      'from',
      'to',
      'type_hint',
      'size_hint',
      'created_at',
      'date_ms',
    ]);
  });

  it('never carries body content, references, monitor, direction or unread', () => {
    const json = headerJsonOf(storedFull, derived);
    expect(json).not.toContain('top secret body');
    const header = JSON.parse(json);
    for (const key of ['content_parts', 'references', 'monitor', 'received_ms', 'direction', 'unread']) {
      expect(header).not.toHaveProperty(key);
    }
  });

  it('appends extension fields flags, receipt, schedule_id after date_ms, only when present', () => {
    const receipt = { envelope_id: PARENT, status: 'accepted' };
    const header = JSON.parse(
      headerJsonOf(storedMinimal, derived, { schedule_id: 'sch_1', receipt, flags: ['secret'] }),
    );
    expect(Object.keys(header).slice(-4)).toEqual(['date_ms', 'flags', 'receipt', 'schedule_id']);
    expect(header.flags).toEqual(['secret']);
    expect(header.receipt).toEqual(receipt);
    expect(header.schedule_id).toBe('sch_1');
  });

  it('an empty flags list is omitted (clean content carries no flags key)', () => {
    expect(JSON.parse(headerJsonOf(storedMinimal, derived, { flags: [] }))).not.toHaveProperty('flags');
  });

  it('no extensions argument adds no extension keys', () => {
    const header = JSON.parse(headerJsonOf(storedMinimal, derived));
    for (const key of ['flags', 'receipt', 'schedule_id']) expect(header).not.toHaveProperty(key);
  });
});

describe('listingHeaderOf (ASMTP §3.5 listing key order)', () => {
  const full = headerJsonOf(
    storedEnvelopeOf(
      { ...minimal, cc: ['@carol.demo'], subject: 's', in_reply_to: minimal.id },
      '@alice.demo',
      minimal.content_parts,
    ),
    { type_hint: 'text', size_hint: 8, created_at: 5 },
    { flags: ['secret'], receipt: { envelope_id: minimal.id, status: 'accepted' }, schedule_id: 'sch_1' },
  );
  const base = headerJsonOf(storedEnvelopeOf(minimal, '@alice.demo', minimal.content_parts), {
    type_hint: 'text',
    size_hint: 8,
    created_at: 5,
  });

  it('orders every key as the reference lists them, then direction/unread, then Roost extensions', () => {
    expect(Object.keys(JSON.parse(listingHeaderOf(full, 'self', false)))).toEqual([
      'op',
      'id',
      'from',
      'to',
      'type_hint',
      'created_at',
      'date_ms',
      'cc',
      'subject',
      'in_reply_to',
      'size_hint',
      'direction',
      'unread',
      'flags',
      'receipt',
      'schedule_id',
    ]);
  });

  it('the in feed carries neither direction nor unread, and optional keys stay omitted', () => {
    expect(listingHeaderOf(base)).toBe(
      `{"op":"envelope.notify","id":"${minimal.id}","from":"@alice.demo","to":${JSON.stringify(minimal.to)},"type_hint":"text","created_at":5,"date_ms":${minimal.date_ms},"size_hint":8}`,
    );
  });

  it('out rows carry direction, no unread', () => {
    const header = JSON.parse(listingHeaderOf(base, 'out'));
    expect(header.direction).toBe('out');
    expect(header).not.toHaveProperty('unread');
  });

  it('keeps every original field unchanged (only the order differs from the push frame)', () => {
    const { direction: _d, unread: _u, ...rest } = JSON.parse(listingHeaderOf(full, 'in', true));
    expect(rest).toEqual(JSON.parse(full));
    expect(JSON.parse(listingHeaderOf(full, 'in', true)).unread).toBe(true);
  });
});

describe('nextCreatedAt (EXTENSIONS: strictly increasing per mailbox)', () => {
  it('is the clock when every mailbox is behind it', () => {
    expect(nextCreatedAt(1000, [10, 999])).toBe(1000);
  });

  it('is the clock with no previous entries', () => {
    expect(nextCreatedAt(1000, [])).toBe(1000);
  });

  it('is strictly greater than a last created_at equal to the clock', () => {
    expect(nextCreatedAt(1000, [1000])).toBe(1001);
  });

  it('is strictly greater than every last created_at ahead of the clock, whatever their order', () => {
    expect(nextCreatedAt(1000, [1005, 1002, 1010, 1003])).toBe(1011);
    expect(nextCreatedAt(1000, [1010, 1005])).toBe(1011);
  });

  it('property: > every last and >= now', () => {
    for (let trial = 0; trial < 500; trial++) {
      const now = Math.floor(Math.random() * 1000);
      const lasts = Array.from({ length: Math.floor(Math.random() * 6) }, () => Math.floor(Math.random() * 2000));
      const createdAt = nextCreatedAt(now, lasts);
      expect(createdAt).toBeGreaterThanOrEqual(now);
      for (const last of lasts) expect(createdAt).toBeGreaterThan(last);
    }
  });
});
