import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { detectSecret, ulid } from '#domain';
import { TestClient, type Reply } from '../support/client';
import { createTestDatabase } from '../support/database';
import { freePort, ROOST_MAIN } from '../support/processes';
import { testRedisUrl } from '../support/services';

/**
 * EXTENSIONS.md §4 "a matched secret is never echoed", for logs: a real operator process at
 * ROOST_LOG_LEVEL=debug, every byte of its stdout and stderr kept, while planted secrets are sent
 * (warn, block, override), fetched, listed and searched for. No 8-character window of any secret
 * may appear in what it wrote.
 */

const UPPER_DIGITS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const random = (length: number, alphabet = ALNUM) =>
  Array.from({ length }, () => alphabet[randomInt(alphabet.length)]).join('');
const b64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

function detected(make: () => string): string {
  for (let i = 0; i < 100; i++) {
    const value = make();
    if (detectSecret(value) !== null) return value;
  }
  throw new Error('could not plant a detectable secret');
}

const secrets = {
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

const parts = () => [
  {
    type: 'text',
    text: `Creds:\nGITHUB_TOKEN=${secrets.github}\nAuthorization: Bearer ${secrets.jwt}\n${secrets.pem}\n`,
  },
  { type: 'data', data: { deploy: { aws_access_key_id: secrets.aws } } },
];

/** Every 8-character window of every secret found in `text`. */
function leakedWindows(text: string): string[] {
  const found: string[] = [];
  for (const [name, secret] of Object.entries(secrets)) {
    for (let i = 0; i + 8 <= secret.length; i++) {
      const window = secret.slice(i, i + 8);
      if (text.includes(window)) found.push(`${name}[${i}]=${JSON.stringify(window)}`);
    }
  }
  return found;
}

let child: ChildProcess;
let output = '';
let client: TestClient;
let adminToken: string;
let drop: (() => Promise<void>) | undefined;

beforeAll(async () => {
  const database = await createTestDatabase('roost_guardlogs');
  drop = database.drop;
  adminToken = `admin-${randomBytes(8).toString('hex')}`;
  const port = await freePort();
  child = spawn(process.execPath, [ROOST_MAIN], {
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      DATABASE_URL: database.url,
      REDIS_URL: testRedisUrl(),
      ROOST_REDIS_PREFIX: `roost-guardlogs:${ulid()}:`,
      ROOST_ADMIN_TOKEN: adminToken,
      ROOST_LOG_LEVEL: 'debug',
      ROOST_RATE_LIMIT_PER_S: '0',
      PORT: String(port),
      ROOST_HOST: '127.0.0.1',
      ROOST_METRICS_PORT: '0',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // Raw bytes of both streams, unsplit, so no window can fall between two chunks.
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`operator exited during start-up:\n${output}`);
    try {
      if ((await fetch(`${url}/healthz`)).status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`operator not healthy after 30 s:\n${output}`);
    await sleep(100);
  }
  client = new TestClient(url);
});

afterAll(async () => {
  if (child && child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((done) => child.once('exit', done));
    child.kill('SIGKILL');
    await exited;
  }
  await drop?.();
});

async function agent(handle: string, fields: Record<string, unknown> = {}): Promise<string> {
  const reply = await client.post('/_admin/agents', { handle, policy: 'open', ...fields }, adminToken);
  if (reply.status !== 201) throw new Error(`create ${handle}: ${reply.status} ${reply.text}`);
  return reply.body.token;
}

const envelope = (to: string, fields: Record<string, unknown> = {}) => ({
  id: ulid(),
  to: [to],
  date_ms: Date.now(),
  content_parts: parts(),
  ...fields,
});

const expectStatus = (reply: Reply, status: number, what: string) =>
  expect({ what, status: reply.status }).toEqual({ what, status });

it('at ROOST_LOG_LEVEL=debug no log line of the operator holds any window of a planted secret (warn, block, override, fetch, list, search)', async () => {
  const alice = await agent('@gl.alice');
  const bob = await agent('@gl.bob');
  const carol = await agent('@gl.carol', { content_guard: 'block' });

  const warned = envelope('@gl.bob', { subject: 'deploy creds', monitor: 'mon_logs' });
  const warnedReply = await client.post('/messages', warned, alice);
  expectStatus(warnedReply, 202, 'warn');
  expect(warnedReply.body.warnings.map((w: { code: string }) => w.code)).toContain('secret');

  const blocked = await client.post('/messages', envelope('@gl.bob'), carol);
  expectStatus(blocked, 422, 'block');
  expect(blocked.body.error.code).toBe('CONTENT_BLOCKED');
  for (const [name, secret] of Object.entries(secrets)) {
    const alone = await client.post(
      '/messages',
      envelope('@gl.bob', { content_parts: [{ type: 'text', text: `${name}: ${secret}` }] }),
      carol,
    );
    expectStatus(alone, 422, `block ${name}`);
  }
  const overridden = envelope('@gl.bob', { allow_warnings: ['secret'] });
  expectStatus(await client.post('/messages', overridden, carol), 202, 'override');
  expectStatus(await client.post('/messages', overridden, carol), 202, 'override retry');
  expectStatus(await client.post('/messages', { ...overridden, subject: 'other' }, carol), 409, 'retry mismatch');
  // A scheduled send is checked by the guard too.
  expectStatus(
    await client.post(
      '/schedules',
      { envelope: { to: ['@gl.bob'], content_parts: parts() }, start_at: Date.now() + 3_600_000 },
      carol,
    ),
    422,
    'schedule',
  );
  // A receipt answering it.
  expectStatus(
    await client.post(`/messages/${warned.id}/receipts`, { status: 'blocked', note: 'secrets in the body' }, bob),
    201,
    'receipt',
  );

  // Fetch and list, as recipient and sender.
  const fetched = await client.get(`/messages/${warned.id}`, bob);
  expectStatus(fetched, 200, 'fetch');
  expect(leakedWindows(fetched.text).length).toBeGreaterThan(0); // the body itself holds them
  expectStatus(await client.get(`/messages/${overridden.id}`, carol), 200, 'sender fetch');
  expectStatus(await client.get(`/messages?ids=${warned.id},${overridden.id}`, bob), 200, 'batch fetch');
  for (const token of [alice, bob, carol]) {
    for (const query of ['', '?direction=out', '?direction=both', '?unread=true']) {
      expectStatus(await client.get(`/mailbox${query}`, token), 200, `list ${query}`);
    }
    expectStatus(await client.get('/search/messages?q=deploy', token), 200, 'search');
  }
  expectStatus(await client.get(`/messages/${warned.id}/status`, alice), 200, 'status');
  expectStatus(await client.get(`/messages/${warned.id}/receipts`, alice), 200, 'receipts');

  // Let the process flush, then stop it so the shutdown lines are in too.
  await sleep(500);
  const exited = new Promise((done) => child.once('exit', done));
  child.kill('SIGTERM');
  await exited;

  expect(output.length).toBeGreaterThan(0);
  // Debug level was on: more than the access log reached the output.
  expect(output).toMatch(/"level":"debug"/);
  expect(output).toMatch(/"route":"\/messages"/);
  expect(output).toMatch(/content guard overridden by @gl\.carol for secret/);
  // JSON logs escape newlines; look at the text both ways.
  const unescaped = output.replace(/\\n/g, '\n').replace(/\\\//g, '/');
  expect([...new Set([...leakedWindows(output), ...leakedWindows(unescaped)])]).toEqual([]);
});
