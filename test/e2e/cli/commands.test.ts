import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startOperator, type TestOperator } from '../../support/operator';
import { freePort } from '../../support/processes';
import { cliHome, until, type CliHome } from './support';

/** Every `roost` command as a real process against an operator, in temp XDG folders. */

let op: TestOperator;
let home: CliHome;
let adminToken: string;

beforeAll(async () => {
  op = await startOperator();
  adminToken = op.adminToken;
  home = cliHome();
  await home.ok(['config', 'profile', 'test', '--url', op.url, '--default']);
  await home.ok(['config', 'admin-token'], { input: `${adminToken}\n` });
  await home.ok(['admin', 'agent', 'create', '@acme.alice', '--policy', 'open']);
  await home.ok(['admin', 'agent', 'create', '@acme.bob', '--policy', 'open']);
});
afterAll(() => op.close());

const credentials = () => JSON.parse(readFileSync(join(home.dir, 'config', 'roost', 'credentials.json'), 'utf8'));

describe('configuration and tokens', () => {
  it('stores tokens mode 0600 and never prints them after creation', async () => {
    const file = join(home.dir, 'config', 'roost', 'credentials.json');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const token = credentials().profiles.test.agents['@acme.alice'] as string;
    expect(token.length).toBeGreaterThan(20);
    const shown = await home.ok(['--as', '@acme.alice', 'config', 'show']);
    expect(shown).toContain('token: set (credentials)');
    expect(shown).not.toContain(token);
    expect(shown).not.toContain(adminToken);
    const created = await home.json(['admin', 'agent', 'create', '@acme.quiet']);
    expect(created.token).toBeUndefined();
    const loud = await home.json(['admin', 'agent', 'create', '@acme.loud', '--policy', 'open', '--show-token']);
    expect(loud.token).toBe(credentials().profiles.test.agents['@acme.loud']);
  });

  it('resolves the agent from .roost/config.json found by walking up, and flags beat it', async () => {
    const project = join(home.dir, 'project');
    mkdirSync(join(project, 'deep', 'er'), { recursive: true });
    await home.ok(['config', 'use', '@acme.bob', '--dir', project]);
    const view = await home.json<{ agent: string; folder: string }>(['config', 'show'], {
      cwd: join(project, 'deep', 'er'),
    });
    expect(view).toMatchObject({ agent: '@acme.bob', folder: project });
    expect(
      (await home.json<{ agent: string }>(['--as', '@acme.alice', 'config', 'show'], { cwd: project })).agent,
    ).toBe('@acme.alice');
  });

  it('stores an existing token read from stdin', async () => {
    const token = credentials().profiles.test.agents['@acme.bob'];
    await home.ok(['--profile', 'other', 'config', 'profile', 'other', '--url', op.url]);
    await home.ok(['--profile', 'other', 'config', 'token', '@acme.bob'], { input: token });
    expect(credentials().profiles.other.agents['@acme.bob']).toBe(token);
    expect(
      (
        await home.json<{ checks: Array<{ name: string; ok: boolean }> }>([
          '--profile',
          'other',
          '--as',
          '@acme.bob',
          'doctor',
        ])
      ).checks.every((c) => c.ok),
    ).toBe(true);
  });
});

describe('admin', () => {
  it('manages agents: list, show, set, rotate-token (stored), remove', async () => {
    await home.ok(['admin', 'agent', 'create', '@acme.temp']);
    expect(await home.ok(['admin', 'agent', 'list'])).toContain('@acme.temp');
    expect((await home.json(['admin', 'agent', 'show', '@acme.temp'])).policy).toBe('allowlist');
    expect(
      (await home.json(['admin', 'agent', 'set', '@acme.temp', '--policy', 'open', '--display-name', 'Temp']))
        .display_name,
    ).toBe('Temp');
    const before = credentials().profiles.test.agents['@acme.temp'];
    const rotated = await home.ok(['admin', 'agent', 'rotate-token', '@acme.temp']);
    expect(rotated).not.toContain(credentials().profiles.test.agents['@acme.temp']);
    expect(credentials().profiles.test.agents['@acme.temp']).not.toBe(before);
    await home.ok(['--as', '@acme.temp', 'inbox']);
    await home.ok(['admin', 'agent', 'remove', '@acme.temp']);
    expect(credentials().profiles.test.agents['@acme.temp']).toBeUndefined();
    const gone = await home.run(['admin', 'agent', 'show', '@acme.temp']);
    expect(gone.code).toBe(5);
  });

  it('manages organizations', async () => {
    const created = await home.json(['admin', 'org', 'create', 'cliorg', '--retention-days', '7']);
    expect(created).toMatchObject({ name: 'cliorg', retention_days: 7 });
    expect(created.admin_token).toBeUndefined();
    expect(await home.ok(['admin', 'org', 'list'])).toContain('cliorg retention=7');
    expect((await home.json(['admin', 'org', 'set', 'cliorg', '--content-guard', 'block'])).content_guard).toBe(
      'block',
    );
    expect((await home.json(['admin', 'org', 'show', 'cliorg'])).content_guard).toBe('block');
    expect((await home.json(['admin', 'org', 'rotate-token', 'cliorg', '--show-token'])).admin_token).toEqual(
      expect.any(String),
    );
    await home.ok(['admin', 'org', 'remove', 'cliorg']);
    expect((await home.run(['admin', 'org', 'show', 'cliorg'])).code).toBe(5);
  });

  it('says what to do without an admin token, and with a wrong one', async () => {
    const bare = cliHome({ ROOST_URL: op.url });
    const missing = await bare.run(['admin', 'agent', 'list']);
    expect(missing.code).toBe(3);
    expect(missing.stderr).toMatch(/no admin token[\s\S]*hint: .*--admin-token/);
    const wrong = await bare.run(['--admin-token', 'wrong-token-123456', 'admin', 'agent', 'list']);
    expect(wrong.code).toBe(4);
    expect(wrong.stderr).toMatch(/admin token was refused/);
  });
});

describe('messages', () => {
  it('send → inbox triage → show → reply → receipt → status', async () => {
    const sent = await home.json<{ id: string }>([
      '--as',
      '@acme.alice',
      'send',
      '@acme.bob',
      '-t',
      'please review',
      '-s',
      'Review PR 12',
      '--cc',
      '@acme.loud',
    ]);
    const short = sent.id.slice(-6);
    const inbox = await home.ok(['--as', '@acme.bob', 'inbox']);
    expect(inbox).toMatch(new RegExp(`^${short} \\d+s @acme\\.alice "Review PR 12" text ~\\d+t cc\\+1$`, 'm'));
    const listed = await home.json<{ headers: Array<{ id: string }> }>(['--as', '@acme.bob', 'inbox']);
    expect(listed.headers.map((h) => h.id)).toContain(sent.id);
    const shown = await home.ok(['--as', '@acme.bob', 'show', short]);
    expect(shown).toContain('please review');
    expect(shown).toContain('subject: Review PR 12');
    expect(await home.ok(['--as', '@acme.bob', 'inbox'])).not.toContain(short);
    const reply = await home.json<{ id: string }>(['--as', '@acme.bob', 'reply', short, '-t', 'done']);
    const replied = await home.json<{ in_reply_to: string; subject: string; references: string[] }>([
      '--as',
      '@acme.alice',
      'show',
      reply.id,
    ]);
    expect(replied).toMatchObject({ in_reply_to: sent.id, subject: 'Re: Review PR 12', references: [sent.id] });
    await home.ok(['--as', '@acme.bob', 'receipt', short, 'applied', '--note', 'merged']);
    const status = await home.json<{
      recipients: Array<{ handle: string; read: boolean; status: string }>;
      receipts: unknown[];
    }>(['--as', '@acme.alice', 'status', short]);
    expect(status.recipients).toEqual(
      expect.arrayContaining([expect.objectContaining({ handle: '@acme.bob', read: true, status: 'applied' })]),
    );
    expect(status.receipts).toHaveLength(1);
    expect(await home.ok(['--as', '@acme.alice', 'inbox'])).toMatch(/rcpt:applied/);
  });

  it('read marks without printing; data and file parts; stdin text', async () => {
    const file = join(home.dir, 'notes.txt');
    writeFileSync(file, 'attached');
    const sent = await home.json<{ id: string }>(
      ['--as', '@acme.alice', 'send', '@acme.bob', '--data', '{"k":1}', '--file', file, '--stdin'],
      { input: 'from stdin' },
    );
    const body = await home.json<{ content_parts: Array<{ type: string }> }>(['--as', '@acme.bob', 'show', sent.id]);
    expect(body.content_parts.map((p) => p.type)).toEqual(['text', 'file', 'data']);
    const other = await home.json<{ id: string }>(['--as', '@acme.alice', 'send', '@acme.bob', '-t', 'mark me']);
    expect(await home.json(['--as', '@acme.bob', 'read', other.id])).toEqual({ read: [other.id] });
  });

  it('schedules: create, list, show, pause, resume, cancel', async () => {
    const created = await home.json<{ id: string; status: string }>([
      '--as',
      '@acme.alice',
      'schedule',
      'create',
      '@acme.bob',
      '-t',
      'standup',
      '--every',
      '1h',
      '--count',
      '3',
    ]);
    expect(created.status).toBe('active');
    expect(await home.ok(['--as', '@acme.alice', 'schedule', 'list'])).toContain(created.id.slice(-6));
    expect((await home.json(['--as', '@acme.alice', 'schedule', 'show', created.id])).interval_ms).toBe(3_600_000);
    expect((await home.json(['--as', '@acme.alice', 'schedule', 'pause', created.id])).status).toBe('paused');
    expect((await home.json(['--as', '@acme.alice', 'schedule', 'resume', created.id])).status).toBe('active');
    expect((await home.json(['--as', '@acme.alice', 'schedule', 'cancel', created.id])).status).toBe('cancelled');
    const bad = await home.run(['--as', '@acme.alice', 'schedule', 'create', '@acme.bob', '-t', 'x']);
    expect(bad.code).toBe(2);
  });
});

describe('listen', () => {
  for (const mode of ['resume', 'plain'] as const) {
    it(`prints one JSON line per frame on stdout, diagnostics on stderr, and keeps its cursor (${mode})`, async () => {
      await home.ok(['admin', 'agent', 'create', `@acme.listen-${mode}`, '--policy', 'open']);
      const early = await home.json<{ id: string }>([
        '--as',
        '@acme.alice',
        'send',
        `@acme.listen-${mode}`,
        '-t',
        'before',
      ]);
      const cursor = join(home.dir, `cursor-${mode}.json`);
      const child = home.spawn([
        '--as',
        `@acme.listen-${mode}`,
        'listen',
        '--cursor',
        cursor,
        ...(mode === 'plain' ? ['--no-resume'] : []),
      ]);
      const lines: string[] = [];
      let stderr = '';
      child.stdout!.on('data', (chunk: Buffer) => lines.push(...chunk.toString().split('\n').filter(Boolean)));
      child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      await until(() => lines.length >= 1, 10_000, 'the waiting envelope');
      // Settled: resumed, or caught up over REST (two passes); live frames move the cursor from here.
      await until(() => /resumed from the cursor|caught up/.test(stderr), 10_000, 'the listener to settle');
      const live = await home.json<{ id: string }>([
        '--as',
        '@acme.alice',
        'send',
        `@acme.listen-${mode}`,
        '-t',
        'live',
      ]);
      await until(() => lines.length >= 2, 10_000, 'the live envelope');
      child.kill('SIGINT');
      const code = await new Promise((done) => child.on('close', done));
      expect(code).toBe(0);
      const frames = lines.map((l) => JSON.parse(l));
      expect(frames.map((f) => f.id)).toEqual([early.id, live.id]);
      expect(frames.every((f) => f.op === 'envelope.notify' && f.content_parts === undefined)).toBe(true);
      expect(stderr).toMatch(mode === 'resume' ? /resumed from the cursor/ : /connected/);
      expect(statSync(cursor).mode & 0o777).toBe(0o600);
      expect(JSON.parse(readFileSync(cursor, 'utf8')).last_seen_envelope_id).toBe(live.id);
    });
  }
});

describe('doctor', () => {
  it('passes on a working setup and names the failing check otherwise', async () => {
    const good = await home.ok(['--as', '@acme.alice', 'doctor']);
    expect(good).toMatch(/ok +operator/);
    expect(good).toMatch(/ok +push +push connected; server-side resume offered/);
    const down = await home.run(['--url', 'http://127.0.0.1:1', '--as', '@acme.alice', 'doctor']);
    expect(down.code).toBe(6);
    expect(down.stdout).toMatch(/FAIL operator/);
  });
});

describe('errors: exit codes and hints', () => {
  it('unreachable operator → 6', async () => {
    const result = await home.run([
      '--url',
      'http://127.0.0.1:1',
      '--as',
      '@acme.alice',
      'send',
      '@acme.bob',
      '-t',
      'x',
    ]);
    expect(result.code).toBe(6);
    expect(result.stderr).toMatch(
      /cannot reach the operator[\s\S]*hint: is the operator running\? Start one with `roost serve`/,
    );
  });

  it('bad token → 4, with a JSON error on stderr under --json', async () => {
    const result = await home.run(['--as', '@acme.alice', '--token', 'bad', 'send', '@acme.bob', '-t', 'x', '--json']);
    expect(result.code).toBe(4);
    expect(JSON.parse(result.stderr).error).toMatchObject({
      code: 'UNAUTHORIZED',
      exit: 4,
      hint: expect.stringMatching(/rotate-token/),
    });
  });

  it('unknown recipient → 5; unknown acting agent → 3; unknown id → 5', async () => {
    expect((await home.run(['--as', '@acme.alice', 'send', '@acme.nobody', '-t', 'x'])).code).toBe(5);
    const noToken = await home.run(['--as', '@acme.nobody', 'inbox']);
    expect(noToken.code).toBe(3);
    expect(noToken.stderr).toMatch(/no token for @acme\.nobody[\s\S]*roost admin agent create @acme\.nobody/);
    expect((await home.run(['--as', '@acme.bob', 'show', '01ZZZZZZZZZZZZZZZZZZZZZZZZ'])).code).toBe(5);
  });

  it('usage errors → 2; no agent → 3', async () => {
    expect((await home.run(['send'])).code).toBe(2);
    expect((await home.run(['receipt', 'x', 'maybe', '--as', '@acme.bob'])).code).toBe(2);
    const bare = cliHome({ ROOST_URL: op.url });
    const result = await bare.run(['inbox']);
    expect(result.code).toBe(3);
    expect(result.stderr).toMatch(/no agent selected[\s\S]*--as/);
  });
});

describe('samp bridge', () => {
  it('imports log-<alias>.jsonl idempotently and exports the mailbox as SAMP JSONL', async () => {
    await home.ok(['admin', 'agent', 'create', '@samp.ann', '--policy', 'open']);
    await home.ok(['admin', 'agent', 'create', '@samp.ben', '--policy', 'open']);
    const dir = join(home.dir, 'samp');
    mkdirSync(dir);
    const records = [
      { ts: 1_754_000_000, from: 'ann', to: 'ben', thread: 'plan', body: 'first' },
      { ts: 1_754_000_060, from: 'ann', to: 'ben', thread: 'plan', body: 'second' },
    ];
    writeFileSync(join(dir, 'log-ann.jsonl'), `${records.map((r) => JSON.stringify(r)).join('\n')}\nnot json\n`);
    writeFileSync(
      join(dir, 'log-ben.jsonl'),
      `${JSON.stringify({ ts: 1_754_000_120, from: 'ben', to: 'ann', thread: 'plan', body: 'ack' })}\n`,
    );
    const first = await home.json<{ posted: number; replayed: number; malformed: number }>([
      '--as',
      '@samp.ann',
      'samp',
      'import',
      dir,
    ]);
    expect(first).toMatchObject({ posted: 3, replayed: 0, malformed: 1 });
    const again = await home.json<{ posted: number; replayed: number }>(['--as', '@samp.ann', 'samp', 'import', dir]);
    expect(again).toMatchObject({ posted: 0, replayed: 3 });
    const headers = (
      await home.json<{ headers: Array<{ subject: string; date_ms: number }> }>(['--as', '@samp.ben', 'inbox', '--all'])
    ).headers;
    expect(headers.map((h) => [h.subject, h.date_ms])).toEqual([
      ['plan', 1_754_000_000_000],
      ['plan', 1_754_000_060_000],
    ]);
    const out = join(home.dir, 'samp-out');
    await home.ok(['--as', '@samp.ben', 'samp', 'export', out]);
    const exported = readFileSync(join(out, 'log-ann.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    const original = readFileSync(join(dir, 'log-ann.jsonl'), 'utf8');
    // Content-derived ids: the exported records carry the ids SAMP computes for the originals.
    const { readLog } = jest.requireActual('../../../apps/cli/src/samp');
    expect(exported.map((r: { id: string }) => r.id)).toEqual(
      readLog(original).records.map((r: { id: string }) => r.id),
    );
    expect(exported[0]).toMatchObject({ from: 'ann', to: 'ben', thread: 'plan', body: 'first', ts: 1_754_000_000 });
    expect(existsSync(join(out, 'log-ben.jsonl'))).toBe(true);
    await home.ok(['--as', '@samp.ben', 'samp', 'export', out]);
    expect(readFileSync(join(out, 'log-ann.jsonl'), 'utf8').trim().split('\n')).toHaveLength(2);
  });
});

describe('serve', () => {
  it('runs the embedded operator, points the profile at it and keeps its admin token for the CLI', async () => {
    const fresh = cliHome();
    const port = await freePort();
    const child = fresh.spawn(['serve', '--port', String(port), '--data-dir', join(fresh.dir, 'data')]);
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    try {
      await until(() => stderr.includes('listening on'), 60_000, `roost serve to listen (${stderr})`);
      expect(stdout).toContain('admin token (shown once');
      expect(statSync(join(fresh.dir, 'data', 'admin-token')).mode & 0o777).toBe(0o600);
      await fresh.ok(['admin', 'agent', 'create', '@serve.one', '--policy', 'open']);
      await fresh.ok(['admin', 'agent', 'create', '@serve.two', '--policy', 'open']);
      await fresh.ok(['--as', '@serve.one', 'send', '@serve.two', '-t', 'hi']);
      expect(await fresh.ok(['--as', '@serve.two', 'inbox'])).toMatch(/@serve\.one/);
    } finally {
      child.kill('SIGTERM');
    }
    expect(await new Promise((done) => child.on('close', done))).toBe(0);
  });
});
