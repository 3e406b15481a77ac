import { randomInt } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { DATABASE, type Database } from '#db';
import { detectSecret, GUARD_CODES, GUARD_DETAILS, scanContent } from '#domain';
import type { Reply } from '../../support/client';
import { envelope, startOperator, type TestOperator } from '../../support/operator';
import { testBackend } from '../../support/services';
import { connect, type Listener } from '../../support/ws';

/**
 * The content guard in the accept path (EXTENSIONS.md §4): the sender's policy (agent override,
 * else organization, else warn), warnings in the 202, flags on headers and frames, 422
 * CONTENT_BLOCKED with nothing stored unless allow_warnings covers every finding (the override is
 * recorded), content never modified, a matched secret never echoed.
 */

const LARGE_BYTES = 4096;
const OUTCOMES = ['warned', 'blocked', 'overridden'];

let op: TestOperator;
let database: Database;
const sockets: Listener[] = [];

beforeAll(async () => {
  op = await startOperator({
    redis: testBackend() === 'postgres',
    env: { ROOST_GUARD_LARGE_BYTES: String(LARGE_BYTES) },
  });
  database = op.app.get<Database>(DATABASE);
});
afterEach(() => {
  for (const socket of sockets.splice(0)) socket.close();
});
afterAll(async () => op?.close());

// ---- planted secrets: random at run time, so no token sits in the repository ----

const UPPER_DIGITS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
const ALNUM = `ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789`;
const random = (length: number, alphabet = ALNUM) =>
  Array.from({ length }, () => alphabet[randomInt(alphabet.length)]).join('');
const b64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

/** A fresh value from `make` that the secret detector recognises on its own. */
function detected(make: () => string): string {
  for (let i = 0; i < 100; i++) {
    const value = make();
    if (detectSecret(value) !== null) return value;
  }
  throw new Error('could not plant a detectable secret');
}

interface Planted {
  aws: string;
  github: string;
  jwt: string;
  pem: string;
}

function plantSecrets(): Planted {
  return {
    aws: detected(() => `AKIA${random(16, UPPER_DIGITS)}`),
    github: detected(() => `ghp_${random(36)}`),
    jwt: detected(
      () =>
        `${b64url({ alg: 'HS256', typ: 'JWT' })}.${b64url({ sub: random(12), iat: Date.now() })}.${random(43, `${ALNUM}-_`)}`,
    ),
    pem: detected(
      () =>
        `-----BEGIN RSA PRIVATE KEY-----\n${Array.from({ length: 4 }, () => random(64, `${ALNUM}+/`)).join('\n')}\n-----END RSA PRIVATE KEY-----`,
    ),
  };
}

/** Content parts carrying every planted secret, in a text part and in a nested data part. */
const secretParts = (s: Planted) => [
  {
    type: 'text',
    text: `Creds for the deploy box:\nGITHUB_TOKEN=${s.github}\nAuthorization: Bearer ${s.jwt}\n${s.pem}\n`,
  },
  { type: 'data', data: { deploy: { aws_access_key_id: s.aws, steps: ['build', 'ship'] } } },
];

/** Every 8-character window of every secret that occurs in `text` (case-sensitive). */
function leakedWindows(text: string, secrets: Planted): string[] {
  const found: string[] = [];
  for (const [name, secret] of Object.entries(secrets)) {
    for (let i = 0; i + 8 <= secret.length; i++) {
      const window = secret.slice(i, i + 8);
      if (text.includes(window)) found.push(`${name}[${i}]=${JSON.stringify(window)}`);
    }
  }
  return found;
}

// ---- helpers ----

const expectError = (reply: Reply, status: number, code: string, what = '') => {
  expect({ what, status: reply.status, code: reply.body?.error?.code }).toEqual({ what, status, code });
};

interface Agent {
  handle: string;
  token: string;
}

async function agent(handle: string, fields: Record<string, unknown> = {}): Promise<Agent> {
  return { handle, token: await op.agent(handle, fields) };
}

async function createOrg(name: string, fields: Record<string, unknown> = {}): Promise<void> {
  const reply = await op.client.post('/_admin/orgs', { name, ...fields }, op.adminToken);
  expect(reply.status).toBe(201);
}

async function orgGuard(name: string, policy: 'off' | 'warn' | 'block'): Promise<void> {
  const reply = await op.client.patch(`/_admin/orgs/${name}`, { content_guard: policy }, op.adminToken);
  expect(reply.status).toBe(200);
  expect(reply.body.content_guard).toBe(policy);
}

async function agentGuard(who: Agent, policy: 'off' | 'warn' | 'block' | null): Promise<void> {
  const reply = await op.client.patch(
    `/_admin/agents/${encodeURIComponent(who.handle)}`,
    { content_guard: policy },
    op.adminToken,
  );
  expect(reply.status).toBe(200);
  // The admin view omits an unset override.
  expect(reply.body.content_guard ?? null).toBe(policy);
}

const send = (from: Agent, body: Record<string, unknown>) => op.client.post('/messages', body, from.token);

async function listen(who: Agent): Promise<Listener> {
  const socket = await connect(op.url, { token: who.token });
  sockets.push(socket);
  return socket;
}

async function frameOf(socket: Listener, id: string): Promise<{ frame: any; raw: string }> {
  await socket.until(() => socket.ids.includes(id), 5_000, `frame ${id}`);
  const raw = socket.raw.find((text) => JSON.parse(text).id === id)!;
  return { frame: JSON.parse(raw), raw };
}

async function rowOf(who: Agent, id: string, direction = 'in'): Promise<any> {
  const reply = await op.client.get(`/mailbox?direction=${direction}&limit=1000`, who.token);
  expect(reply.status).toBe(200);
  return reply.body.envelope_headers.find((h: any) => h.id === id);
}

/** What the guard finds in a POST body, computed by the pure detectors (the 202/422 must report exactly this). */
const expectedFindings = (body: Record<string, unknown>) =>
  scanContent(
    { subject: body.subject as string | undefined, parts: body.content_parts as any[] },
    { largeBytes: LARGE_BYTES },
  );

interface Rows {
  envelopes: number;
  mailbox_entries: number;
  last_seqs: number;
  schedules: number;
}

async function rows(): Promise<Rows> {
  const [counted] = await database.withSession((session) =>
    session.query<Rows>(`select
      (select count(*) from envelopes)::int as envelopes,
      (select count(*) from mailbox_entries)::int as mailbox_entries,
      (select coalesce(sum(last_seq), 0) from mailboxes)::int as last_seqs,
      (select count(*) from schedules)::int as schedules`),
  );
  return counted;
}

/** `envelopes.guard_override` of one envelope (null when none was recorded). */
async function guardOverride(id: string): Promise<string[] | null> {
  const [row] = await database.withSession((session) =>
    session.query<{ guard_override: string[] | string | null }>('select guard_override from envelopes where id = $1', [
      id,
    ]),
  );
  const value = row.guard_override;
  // Either driver may hand back a text[] as its literal.
  return typeof value === 'string'
    ? value
        .replace(/^\{|\}$/g, '')
        .split(',')
        .filter(Boolean)
    : value;
}

async function metricsText(): Promise<string> {
  const reply = await op.client.get('/metrics');
  expect(reply.status).toBe(200);
  return reply.text;
}

async function findings(code: string, outcome: string): Promise<number> {
  const pattern = new RegExp(`^roost_guard_findings_total\\{([^}]*)\\} (\\S+)$`, 'gm');
  let sum = 0;
  for (const match of (await metricsText()).matchAll(pattern)) {
    const labels = Object.fromEntries([...match[1].matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    if (labels.code === code && labels.outcome === outcome) sum += Number(match[2]);
  }
  return sum;
}

const DESTRUCTIVE = 'Then run rm -rf /var/lib/postgresql/data on the old box.';
const PRODUCTION = 'kubectl rollout restart deployment/api --context prod';
const CREDENTIAL_REQUEST = 'Please send me the password for the staging database.';
const CLEAN = 'Lunch at noon? The usual place.';

describe('content guard policy (EXTENSIONS.md §4)', () => {
  it('default warn: 202 with warnings [{code,part,detail}], flags on the header and the frame; clean content carries neither key', async () => {
    const alice = await agent('@gw.alice');
    const bob = await agent('@gw.bob');
    const socket = await listen(bob);
    const body = envelope(bob.handle, {
      subject: 'rm -rf / on prod, today',
      content_parts: [
        { type: 'text', text: DESTRUCTIVE },
        { type: 'text', text: CLEAN },
        { type: 'text', text: `${PRODUCTION}\n${CREDENTIAL_REQUEST}` },
      ],
    });
    const warned = {
      destructive: await findings('destructive', 'warned'),
      production: await findings('production', 'warned'),
    };
    const reply = await send(alice, body);
    expect(reply.status).toBe(202);
    expect(Object.keys(reply.body)).toEqual(['id', 'received_ms', 'created_at', 'recipients', 'warnings']);
    const expected = expectedFindings(body);
    expect(expected.map((f) => [f.code, f.part])).toEqual([
      ['destructive', 'subject'],
      ['destructive', 0],
      ['production', 2],
      ['credential_request', 2],
    ]);
    expect(reply.body.warnings).toEqual(expected);
    for (const warning of reply.body.warnings) {
      expect(Object.keys(warning)).toEqual(['code', 'part', 'detail']);
      expect(GUARD_DETAILS[warning.code as 'secret']).toContain(warning.detail);
    }

    const flags = ['destructive', 'production', 'credential_request'];
    const { frame, raw } = await frameOf(socket, body.id as string);
    expect(frame.flags).toEqual(flags);
    // flags is the only addition to the ASMTP header.
    expect(Object.keys(frame)).toEqual([
      'op',
      'id',
      'from',
      'to',
      'subject',
      'type_hint',
      'size_hint',
      'created_at',
      'date_ms',
      'flags',
    ]);
    // The listing carries the same header in the reference operator's listing key order
    // (ASMTP.md §3.5), with flags after the ASMTP keys.
    const row = await rowOf(bob, body.id as string);
    expect(Object.keys(row)).toEqual([
      'op',
      'id',
      'from',
      'to',
      'type_hint',
      'created_at',
      'date_ms',
      'subject',
      'size_hint',
      'flags',
    ]);
    expect(row).toEqual(JSON.parse(raw));
    expect((await rowOf(alice, body.id as string, 'out')).flags).toEqual(flags);
    expect(await findings('destructive', 'warned')).toBe(warned.destructive + 1);
    expect(await findings('production', 'warned')).toBe(warned.production + 1);

    const clean = envelope(bob.handle, {
      subject: 'lunch',
      content_parts: [
        { type: 'text', text: CLEAN },
        { type: 'data', data: { when: 'noon' } },
      ],
    });
    const cleanReply = await send(alice, clean);
    expect(cleanReply.status).toBe(202);
    expect(cleanReply.body).not.toHaveProperty('warnings');
    expect(cleanReply.text).not.toContain('warnings');
    const cleanFrame = await frameOf(socket, clean.id as string);
    expect(cleanFrame.frame).not.toHaveProperty('flags');
    expect(cleanFrame.raw).not.toContain('flags');
    expect(await rowOf(bob, clean.id as string)).not.toHaveProperty('flags');
    expect(await guardOverride(body.id as string)).toBeNull();
  });

  it('org policy block: 422 CONTENT_BLOCKED with the warnings and nothing stored, pushed or counted as sent; clean content still passes', async () => {
    await createOrg('gb');
    const alice = await agent('@gb.alice');
    const bob = await agent('@gb.bob');
    await orgGuard('gb', 'block');
    const socket = await listen(bob);
    const body = envelope(bob.handle, {
      content_parts: [
        { type: 'text', text: DESTRUCTIVE },
        { type: 'text', text: PRODUCTION },
      ],
    });
    const before = await rows();
    const blocked = {
      destructive: await findings('destructive', 'blocked'),
      production: await findings('production', 'blocked'),
    };

    const reply = await send(alice, body);
    expectError(reply, 422, 'CONTENT_BLOCKED');
    expect(Object.keys(reply.body.error)).toEqual(['code', 'message', 'warnings']);
    expect(reply.body.error.warnings).toEqual(expectedFindings(body));
    expect(reply.body.error.warnings.map((w: any) => w.code)).toEqual(['destructive', 'production']);
    expect(await rows()).toEqual(before);
    expect(await findings('destructive', 'blocked')).toBe(blocked.destructive + 1);
    expect(await findings('production', 'blocked')).toBe(blocked.production + 1);

    // A clean envelope goes through; its frame is the only one bob ever gets.
    const clean = envelope(bob.handle, { content_parts: [{ type: 'text', text: CLEAN }] });
    const cleanReply = await send(alice, clean);
    expect(cleanReply.status).toBe(202);
    expect(cleanReply.body).not.toHaveProperty('warnings');
    await frameOf(socket, clean.id as string);
    await sleep(100);
    expect(socket.ids).toEqual([clean.id]);
    expect((await op.client.get('/mailbox', bob.token)).body.envelope_headers.map((h: any) => h.id)).toEqual([
      clean.id,
    ]);
    expect(
      (await op.client.get('/mailbox?direction=out', alice.token)).body.envelope_headers.map((h: any) => h.id),
    ).toEqual([clean.id]);

    // The blocked id was never taken: the same id with clean content is a first send, not a retry.
    const reuse = await send(alice, { ...body, content_parts: [{ type: 'text', text: CLEAN }] });
    expect(reuse.status).toBe(202);
    expect(reuse.body.id).toBe(body.id);
  });

  it('block with allow_warnings covering every code: 202 with warnings and flags, the override recorded; partial coverage is still 422', async () => {
    await createOrg('go');
    const alice = await agent('@go.alice');
    const bob = await agent('@go.bob');
    await orgGuard('go', 'block');
    const socket = await listen(bob);
    const parts = [{ type: 'text', text: `${DESTRUCTIVE} ${PRODUCTION}` }];
    const codes = ['destructive', 'production'];

    for (const allow of [[], ['destructive'], ['production'], ['secret', 'large', 'credential_request']]) {
      const before = await rows();
      const reply = await send(alice, envelope(bob.handle, { content_parts: parts, allow_warnings: allow }));
      expectError(reply, 422, 'CONTENT_BLOCKED', `allow_warnings ${JSON.stringify(allow)}`);
      expect(reply.body.error.warnings.map((w: any) => w.code)).toEqual(codes);
      expect(await rows()).toEqual(before);
    }

    const overridden = {
      destructive: await findings('destructive', 'overridden'),
      production: await findings('production', 'overridden'),
    };
    const body = envelope(bob.handle, { content_parts: parts, allow_warnings: ['production', 'destructive'] });
    const reply = await send(alice, body);
    expect(reply.status).toBe(202);
    expect(reply.body.warnings).toEqual(expectedFindings(body));
    expect((await frameOf(socket, body.id as string)).frame.flags).toEqual(codes);
    expect((await rowOf(bob, body.id as string)).flags).toEqual(codes);
    expect(await guardOverride(body.id as string)).toEqual(codes);
    expect(await findings('destructive', 'overridden')).toBe(overridden.destructive + 1);
    expect(await findings('production', 'overridden')).toBe(overridden.production + 1);
    // allow_warnings is never stored in the body.
    const stored = await op.client.get(`/messages/${body.id}`, bob.token);
    expect(stored.body).not.toHaveProperty('allow_warnings');
    // An idempotent retry of the overridden send answers the same 202.
    const retry = await send(alice, body);
    expect(retry.status).toBe(202);
    expect(retry.body).toEqual(reply.body);

    // A superset of the codes found covers them too.
    const superset = envelope(bob.handle, { content_parts: parts, allow_warnings: [...GUARD_CODES] });
    expect((await send(alice, superset)).status).toBe(202);
    expect(await guardOverride(superset.id as string)).toEqual(codes);

    // In warn mode allow_warnings changes nothing and no override is recorded.
    await orgGuard('go', 'warn');
    const warned = envelope(bob.handle, { content_parts: parts, allow_warnings: codes });
    const warnedReply = await send(alice, warned);
    expect(warnedReply.status).toBe(202);
    expect(warnedReply.body.warnings.map((w: any) => w.code)).toEqual(codes);
    expect(await guardOverride(warned.id as string)).toBeNull();

    expectError(
      await send(alice, envelope(bob.handle, { allow_warnings: ['everything'] })),
      400,
      'INVALID_REQUEST',
      'an unknown code',
    );
    expectError(
      await send(alice, envelope(bob.handle, { allow_warnings: 'secret' })),
      400,
      'INVALID_REQUEST',
      'not an array',
    );
  });

  it('the agent override beats the organization policy, both ways; the sender’s policy applies, not the recipient’s', async () => {
    await createOrg('ga', { content_guard: 'block' });
    await createOrg('gz', { content_guard: 'off' });
    const relaxed = await agent('@ga.relaxed', { content_guard: 'off' });
    const strict = await agent('@gz.strict', { content_guard: 'block' });
    const plain = await agent('@gz.plain');
    const blocker = await agent('@ga.blocker');
    const warner = await agent('@ga.warner');
    await agentGuard(warner, 'warn');
    const socket = await listen(plain);
    const parts = [{ type: 'text', text: DESTRUCTIVE }];

    // off on the agent, block on its org: no warnings, no flags.
    const off = envelope(plain.handle, { content_parts: parts });
    const offReply = await send(relaxed, off);
    expect(offReply.status).toBe(202);
    expect(offReply.body).not.toHaveProperty('warnings');
    expect((await frameOf(socket, off.id as string)).frame).not.toHaveProperty('flags');
    expect(await rowOf(plain, off.id as string)).not.toHaveProperty('flags');

    // block on the agent, off on its org: blocked.
    expectError(
      await send(strict, envelope(plain.handle, { content_parts: parts })),
      422,
      'CONTENT_BLOCKED',
      'agent block, org off',
    );
    // warn on the agent, block on its org: warned.
    const warnReply = await send(warner, envelope(plain.handle, { content_parts: parts }));
    expect(warnReply.status).toBe(202);
    expect(warnReply.body.warnings.map((w: any) => w.code)).toEqual(['destructive']);
    // No override: the org's block applies.
    expectError(
      await send(blocker, envelope(plain.handle, { content_parts: parts })),
      422,
      'CONTENT_BLOCKED',
      'org block',
    );
    // Clearing the override hands the decision back to the org.
    await agentGuard(relaxed, null);
    expectError(
      await send(relaxed, envelope(plain.handle, { content_parts: parts })),
      422,
      'CONTENT_BLOCKED',
      'override cleared',
    );

    // A block-mode recipient does not block a sender whose own policy is off.
    const toBlocker = await send(plain, envelope(blocker.handle, { content_parts: parts }));
    expect(toBlocker.status).toBe(202);
    expect(toBlocker.body).not.toHaveProperty('warnings');
  });

  it('policy off: the detectors are not consulted for the outcome: no warnings, no flags, no findings counted', async () => {
    await createOrg('gf', { content_guard: 'off' });
    const alice = await agent('@gf.alice');
    const bob = await agent('@gf.bob');
    const socket = await listen(bob);
    const before = await metricsText();
    const body = envelope(bob.handle, {
      subject: 'rm -rf /',
      content_parts: [
        { type: 'text', text: `${DESTRUCTIVE}\n${PRODUCTION}\n${CREDENTIAL_REQUEST}` },
        { type: 'text', text: 'x'.repeat(LARGE_BYTES) },
      ],
    });
    expect(expectedFindings(body).length).toBeGreaterThan(0);
    const reply = await send(alice, body);
    expect(reply.status).toBe(202);
    expect(reply.body).not.toHaveProperty('warnings');
    expect((await frameOf(socket, body.id as string)).frame).not.toHaveProperty('flags');
    expect(await rowOf(bob, body.id as string)).not.toHaveProperty('flags');
    expect(await guardOverride(body.id as string)).toBeNull();
    const guardLines = (text: string) =>
      text.split('\n').filter((line) => line.startsWith('roost_guard_findings_total'));
    expect(guardLines(await metricsText())).toEqual(guardLines(before));
  });

  it('large: content above ROOST_GUARD_LARGE_BYTES is one `large` finding on the largest part; at the limit it is clean', async () => {
    const alice = await agent('@gl.alice');
    const bob = await agent('@gl.bob');
    const socket = await listen(bob);
    // JSON of the parts array: [{"type":"text","text":"…"}] is 27 bytes around the text.
    const atLimit = envelope(bob.handle, { content_parts: [{ type: 'text', text: 'a'.repeat(LARGE_BYTES - 27) }] });
    expect(Buffer.byteLength(JSON.stringify(atLimit.content_parts))).toBe(LARGE_BYTES);
    const atLimitReply = await send(alice, atLimit);
    expect(atLimitReply.status).toBe(202);
    expect(atLimitReply.body).not.toHaveProperty('warnings');

    const over = envelope(bob.handle, {
      content_parts: [
        { type: 'text', text: 'small' },
        { type: 'data', data: { blob: 'é'.repeat(LARGE_BYTES / 2) } },
      ],
    });
    const reply = await send(alice, over);
    expect(reply.status).toBe(202);
    expect(reply.body.warnings).toEqual([
      {
        code: 'large',
        part: 1,
        detail: expect.stringMatching(new RegExp(`^content is \\d+ bytes, above the ${LARGE_BYTES}-byte limit$`)),
      },
    ]);
    expect(reply.body.warnings).toEqual(expectedFindings(over));
    expect((await frameOf(socket, over.id as string)).frame.flags).toEqual(['large']);

    await agentGuard(alice, 'block');
    const blocked = envelope(bob.handle, { content_parts: over.content_parts });
    expectError(await send(alice, blocked), 422, 'CONTENT_BLOCKED', 'large in block mode');
    const allowed = await send(alice, { ...blocked, allow_warnings: ['large'] });
    expect(allowed.status).toBe(202);
    expect(await guardOverride(blocked.id as string)).toEqual(['large']);
  });

  it('schedule creation in block mode is refused with 422 CONTENT_BLOCKED and creates nothing; allowed in warn mode', async () => {
    const alice = await agent('@gs.alice', { content_guard: 'block' });
    const bob = await agent('@gs.bob');
    const schedule = (text: string) => ({
      envelope: { to: [bob.handle], content_parts: [{ type: 'text', text }] },
      start_at: Date.now() + 3_600_000,
    });
    const before = await rows();
    const reply = await op.client.post('/schedules', schedule(DESTRUCTIVE), alice.token);
    expectError(reply, 422, 'CONTENT_BLOCKED', 'schedule in block mode');
    expect(reply.body.error.warnings.map((w: any) => w.code)).toEqual(['destructive']);
    expect(await rows()).toEqual(before);
    expect((await op.client.get('/schedules', alice.token)).body.schedules).toEqual([]);

    expect((await op.client.post('/schedules', schedule(CLEAN), alice.token)).status).toBe(201);
    await agentGuard(alice, 'warn');
    expect((await op.client.post('/schedules', schedule(DESTRUCTIVE), alice.token)).status).toBe(201);
    expect((await op.client.get('/schedules', alice.token)).body.schedules).toHaveLength(2);
  });

  it('never modifies content: GET /messages/{id} returns the body byte-exact, in warn mode and after an override', async () => {
    const secrets = plantSecrets();
    const alice = await agent('@gm.alice');
    const bob = await agent('@gm.bob');
    const content_parts = [
      ...secretParts(secrets),
      { type: 'text', text: `  ${DESTRUCTIVE}\r\n\t${PRODUCTION}  \u200b🦜 ‮rtl‬ <b>&amp;</b> \\ "quoted" ` },
      {
        type: 'data',
        schema: 'x/y',
        data: { z: 1, a: [true, null, 2.5, 'rm -rf /'], nested: { password: 'Zx9!qv-R7#tLm2' } },
        extra: 'kept',
      },
    ];
    const expectedBody = (body: Record<string, unknown>) =>
      JSON.stringify({
        id: body.id,
        from: alice.handle,
        to: body.to,
        date_ms: body.date_ms,
        content_parts,
        subject: body.subject,
      });

    const warned = envelope(bob.handle, { subject: '  Drop the prod DB?  ', content_parts });
    const warnedReply = await send(alice, warned);
    expect(warnedReply.status).toBe(202);
    expect(warnedReply.body.warnings.map((w: any) => w.code)).toEqual(
      expect.arrayContaining(['secret', 'destructive']),
    );
    for (const reader of [bob, alice]) {
      const fetched = await op.client.get(`/messages/${warned.id}`, reader.token);
      expect(fetched.status).toBe(200);
      expect(fetched.text).toBe(expectedBody(warned));
    }

    await agentGuard(alice, 'block');
    const overridden = envelope(bob.handle, { subject: '  Drop the prod DB?  ', content_parts });
    const codes = [...new Set(expectedFindings(overridden).map((f) => f.code))];
    const overriddenReply = await send(alice, { ...overridden, allow_warnings: codes });
    expect(overriddenReply.status).toBe(202);
    expect((await op.client.get(`/messages/${overridden.id}`, bob.token)).text).toBe(expectedBody(overridden));
    const batch = await op.client.get(`/messages?ids=${warned.id},${overridden.id}`, bob.token);
    expect(batch.status).toBe(200);
    expect(batch.text).toContain(expectedBody(warned));
    expect(batch.text).toContain(expectedBody(overridden));
  });

  it('never echoes a matched secret: no 202, 422, listing, frame, status or metrics text holds any 8-character window of one', async () => {
    const secrets = plantSecrets();
    await createOrg('gk');
    const alice = await agent('@gk.alice');
    const bob = await agent('@gk.bob');
    const carol = await agent('@gk.carol', { content_guard: 'block' });
    const bobSocket = await listen(bob);
    const aliceSocket = await listen(alice);
    const texts: Array<[string, string]> = [];
    const record = (what: string, reply: Reply) => {
      texts.push([what, reply.text]);
      return reply;
    };

    // Every planted secret is found on its own, and the envelope is flagged `secret` for both parts.
    const warned = envelope(bob.handle, {
      subject: 'creds',
      content_parts: secretParts(secrets),
      monitor: 'mon_guard',
    });
    const warnedReply = record('202 (warn)', await send(alice, warned));
    expect(warnedReply.status).toBe(202);
    expect(warnedReply.body.warnings.filter((w: any) => w.code === 'secret').map((w: any) => w.part)).toEqual([0, 1]);

    // The same secrets in block mode, from an agent override and from the org policy.
    const blocked = record(
      '422 (agent block)',
      await send(carol, envelope(bob.handle, { content_parts: secretParts(secrets) })),
    );
    expectError(blocked, 422, 'CONTENT_BLOCKED');
    expect(blocked.body.error.warnings.map((w: any) => w.code)).toContain('secret');
    await orgGuard('gk', 'block');
    expectError(
      record('422 (org block)', await send(alice, envelope(bob.handle, { content_parts: secretParts(secrets) }))),
      422,
      'CONTENT_BLOCKED',
    );
    // Each secret alone, in a text part, in a data part and in the subject.
    for (const [name, secret] of Object.entries(secrets)) {
      const parts: Array<[string, Record<string, unknown>]> = [
        ['text', { content_parts: [{ type: 'text', text: `here: ${secret}` }] }],
        [
          'data',
          {
            content_parts: [
              { type: 'text', text: 'see data' },
              { type: 'data', data: { value: secret } },
            ],
          },
        ],
        ['subject', { subject: `key: ${secret}`, content_parts: [{ type: 'text', text: 'see subject' }] }],
      ];
      for (const [where, fields] of parts) {
        const alone = record(`422 (${name} in ${where})`, await send(alice, envelope(bob.handle, fields)));
        expectError(alone, 422, 'CONTENT_BLOCKED', `${name} in ${where}`);
        expect(alone.body.error.warnings).toEqual([
          { code: 'secret', part: where === 'text' ? 0 : where === 'data' ? 1 : 'subject', detail: expect.any(String) },
        ]);
      }
    }
    const scheduled = record(
      '422 (schedule)',
      await op.client.post(
        '/schedules',
        { envelope: { to: [bob.handle], content_parts: secretParts(secrets) }, start_at: Date.now() + 3_600_000 },
        alice.token,
      ),
    );
    expectError(scheduled, 422, 'CONTENT_BLOCKED', 'schedule');
    // Overridden, then a 202 retry.
    const overridden = envelope(bob.handle, { content_parts: secretParts(secrets), allow_warnings: ['secret'] });
    expect(record('202 (override)', await send(alice, overridden)).status).toBe(202);
    expect(record('202 (override retry)', await send(alice, overridden)).status).toBe(202);
    // A retry with another body under a used id.
    expectError(record('409', await send(alice, { ...overridden, subject: 'changed' })), 409, 'RETRY_MISMATCH');

    await frameOf(bobSocket, warned.id as string);
    await frameOf(bobSocket, overridden.id as string);
    await aliceSocket.until(() => aliceSocket.frames.some((f) => f.op === 'monitor.fact'), 5_000, 'the monitor fact');
    for (const [who, token] of [
      ['bob', bob.token],
      ['alice', alice.token],
    ] as const) {
      for (const query of ['', '?direction=out', '?direction=both', '?order=desc&limit=1']) {
        record(`GET /mailbox${query} (${who})`, await op.client.get(`/mailbox${query}`, token));
      }
      record(`GET /search/messages (${who})`, await op.client.get('/search/messages?q=creds', token));
    }
    record('GET status', await op.client.get(`/messages/${warned.id}/status`, alice.token));
    record('GET receipts', await op.client.get(`/messages/${warned.id}/receipts`, alice.token));
    record(
      'receipt 201',
      await op.client.post(
        `/messages/${warned.id}/receipts`,
        { status: 'blocked', note: 'you sent secrets' },
        bob.token,
      ),
    );
    texts.push(['metrics', await metricsText()]);
    for (const socket of [bobSocket, aliceSocket]) for (const raw of socket.raw) texts.push(['frame', raw]);

    const leaks = texts.flatMap(([what, text]) => leakedWindows(text, secrets).map((window) => `${what}: ${window}`));
    expect(leaks).toEqual([]);
    // The check itself works: the body the sender wrote (excluded above) does hold them.
    const own = await op.client.get(`/messages/${warned.id}`, bob.token);
    expect(leakedWindows(own.text, secrets).length).toBeGreaterThan(0);
  });

  it('roost_guard_findings_total labels are only a code and an outcome, never text from the content', async () => {
    const secrets = plantSecrets();
    const alice = await agent('@gx.alice');
    const bob = await agent('@gx.bob');
    expect((await send(alice, envelope(bob.handle, { content_parts: secretParts(secrets) }))).status).toBe(202);
    const exposition = await metricsText();
    expect(leakedWindows(exposition, secrets)).toEqual([]);
    const lines = exposition.split('\n').filter((line) => line.startsWith('roost_guard_findings_total{'));
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) {
      const match = /^roost_guard_findings_total\{code="([^"]*)",outcome="([^"]*)"\} \d+$/.exec(line);
      expect(match).not.toBeNull();
      expect(GUARD_CODES).toContain(match![1]);
      expect(OUTCOMES).toContain(match![2]);
    }
    // Every label value anywhere on /metrics is free of token-shaped text.
    const labelValues = [...exposition.matchAll(/="([^"]*)"/g)].map((m) => m[1]);
    for (const value of labelValues) expect(detectSecret(value)).toBeNull();
  });
});
