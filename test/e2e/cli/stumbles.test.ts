import { join } from 'node:path';
import { startOperator, type TestOperator } from '../../support/operator';
import { cliHome, until, type CliHome } from './support';

/** The stumbles a new user hit (issue 17): each is fixed here, and each assertion fails without its fix. */

let op: TestOperator;
let home: CliHome;

beforeAll(async () => {
  op = await startOperator();
  home = cliHome({ ROOST_URL: op.url, ROOST_ADMIN_TOKEN: op.adminToken });
  for (const name of ['alice', 'bob']) await home.ok(['admin', 'agent', 'create', `@st.${name}`, '--policy', 'open']);
});
afterAll(() => op.close());

describe('handles are checked locally, with the operator grammar', () => {
  it('a recipient that is not a handle is a usage error (exit 2) saying what a handle looks like', async () => {
    for (const bad of ['bob', '@Acme.Bob']) {
      const result = await home.run(['--as', '@st.alice', 'send', bad, '-t', 'x']);
      expect(result.code).toBe(2);
      expect(result.stderr).toContain(`recipient "${bad}" is not a handle; a handle is @<owner>.<name>`);
      expect(result.stderr).not.toMatch(/\^@\[a-z0-9/);
    }
    expect((await home.run(['--as', '@st.alice', 'send', '@Acme.Bob', '-t', 'x'])).stderr).toMatch(
      /did you mean @acme\.bob\?/,
    );
    const json = await home.run(['--as', '@st.alice', 'send', '@st.bob', '--cc', 'carol', '-t', 'x', '--json']);
    expect(json.code).toBe(2);
    expect(JSON.parse(json.stderr).error).toMatchObject({ code: 'INVALID_HANDLE', exit: 2 });
    expect((await home.run(['admin', 'agent', 'create', 'bob'])).code).toBe(2);
  });

  it('--as alice suggests a valid admin agent create @<org>.alice', async () => {
    const result = await home.run(['--as', 'alice', 'inbox']);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/"alice" is not a handle/);
    expect(result.stderr).toContain('roost admin agent create @<org>.alice');
    expect(result.stderr).not.toMatch(/admin agent create alice/);
  });

  it('send to an unknown handle names it (exit 5)', async () => {
    const result = await home.run(['--as', '@st.alice', 'send', '@st.ghost', '-t', 'x']);
    expect(result.code).toBe(5);
    expect(result.stderr).toContain('recipient not found: @st.ghost');
  });
});

describe('--url', () => {
  it('host:port without a scheme means http; a bad URL is a clear usage error', async () => {
    const hostPort = op.url.replace(/^http:\/\//, '');
    expect(await home.ok(['--url', hostPort, '--as', '@st.bob', 'inbox'])).toMatch(/unread|no unread mail/);
    const bad = await home.run(['--url', 'ftp://example', '--as', '@st.bob', 'inbox']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/not an operator URL: ftp:\/\/example \(from --url\)/);
    expect(bad.stderr).not.toMatch(/Protocol .* not supported/);
  });
});

describe('schedules', () => {
  it('--every below the minimum and a repeat without an end are refused locally, in CLI words', async () => {
    const short = await home.run([
      '--as',
      '@st.alice',
      'schedule',
      'create',
      '@st.bob',
      '-t',
      'x',
      '--every',
      '5s',
      '--count',
      '2',
    ]);
    expect(short.code).toBe(2);
    expect(short.stderr).toMatch(/--every 5s is shorter than the minimum interval, 1m/);
    expect(short.stderr).toContain('ROOST_SCHEDULE_MIN_INTERVAL_MS');
    expect(short.stderr).not.toContain('interval_ms must be');
    const endless = await home.run(['--as', '@st.alice', 'schedule', 'create', '@st.bob', '-t', 'x', '--every', '1h']);
    expect(endless.code).toBe(2);
    expect(endless.stderr).toMatch(/a repeating schedule needs --count or --until/);
    const help = await home.run(['schedule', 'create', '--help']);
    expect(help.stdout).toContain('ROOST_SCHEDULE_MIN_INTERVAL_MS');
    expect(help.stdout).toMatch(/--count or --until/);
  });

  it('short ids, a human show, and no next= once cancelled', async () => {
    const created = await home.json<{ id: string }>([
      '--as',
      '@st.alice',
      'schedule',
      'create',
      '@st.bob',
      '-t',
      'standup',
      '--every',
      '1h',
      '--count',
      '3',
    ]);
    const short = created.id.slice(-6);
    const shown = await home.ok(['--as', '@st.alice', 'schedule', 'show', short]);
    expect(shown).toMatch(new RegExp(`^schedule: +${created.id} \\(${short}\\)$`, 'm'));
    expect(shown).toMatch(/^repeats: +every 1h$/m);
    expect(shown).toMatch(/^next run: +\d{4}-/m);
    expect(() => JSON.parse(shown)).toThrow();
    expect((await home.json(['--as', '@st.alice', 'schedule', 'pause', short])).status).toBe('paused');
    const cancelled = await home.ok(['--as', '@st.alice', 'schedule', 'cancel', short]);
    expect(cancelled).toMatch(new RegExp(`^${short} cancelled `));
    expect(cancelled).not.toContain('next=');
    expect(await home.ok(['--as', '@st.alice', 'schedule', 'show', created.id])).not.toMatch(/next run/);
    expect((await home.run(['--as', '@st.alice', 'schedule', 'show', 'ZZZZZZ'])).code).toBe(5);
  });
});

describe('receipts and listen', () => {
  it("a receipt's triage line names the envelope it answers", async () => {
    const sent = await home.json<{ id: string }>(['--as', '@st.alice', 'send', '@st.bob', '-t', 'deploy?']);
    await home.ok(['--as', '@st.bob', 'receipt', sent.id, 'accepted']);
    expect(await home.ok(['--as', '@st.alice', 'inbox'])).toMatch(
      new RegExp(`@st\\.bob rcpt:accepted for ${sent.id.slice(-6)} `),
    );
  });

  it('the first listen without a cursor prints unread mail only, not mail already read', async () => {
    await home.ok(['admin', 'agent', 'create', '@st.carol', '--policy', 'open']);
    const read1 = await home.json<{ id: string }>(['--as', '@st.alice', 'send', '@st.carol', '-t', 'old 1']);
    const unread1 = await home.json<{ id: string }>(['--as', '@st.alice', 'send', '@st.carol', '-t', 'new 1']);
    const read2 = await home.json<{ id: string }>(['--as', '@st.alice', 'send', '@st.carol', '-t', 'old 2']);
    const unread2 = await home.json<{ id: string }>(['--as', '@st.alice', 'send', '@st.carol', '-t', 'new 2']);
    await home.ok(['--as', '@st.carol', 'read', read1.id, read2.id]);
    for (const mode of [[], ['--no-resume']]) {
      const cursor = join(home.dir, `first-${mode.length}.json`);
      const child = home.spawn(['--as', '@st.carol', 'listen', '--cursor', cursor, ...mode]);
      const lines: string[] = [];
      let stderr = '';
      child.stdout!.on('data', (chunk: Buffer) => lines.push(...chunk.toString().split('\n').filter(Boolean)));
      child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      await until(() => /resumed from the cursor|caught up/.test(stderr), 15_000, `listen to settle (${stderr})`);
      const live = await home.json<{ id: string }>(['--as', '@st.alice', 'send', '@st.carol', '-t', 'live']);
      await until(() => lines.some((l) => l.includes(live.id)), 10_000, 'the live frame');
      child.kill('SIGINT');
      await new Promise((done) => child.on('close', done));
      expect(stderr).toContain(`first run: starting at the unread mail (${mode.length + 1} already read skipped)`);
      const ids = lines.map((l) => JSON.parse(l).id);
      expect(ids.slice(0, 2)).toEqual([unread1.id, unread2.id]);
      expect(ids).not.toContain(read1.id);
      expect(ids).not.toContain(read2.id);
      await home.ok(['--as', '@st.carol', 'read', live.id]);
    }
  });
});
