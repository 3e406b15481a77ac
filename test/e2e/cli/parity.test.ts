import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startOperator, type TestOperator } from '../../support/operator';
import { cliHome, type CliHome } from './support';

/** Parity with the ASMTP CLI (issue 17 item 2): me, agents, search, files, the sent side of the mailbox. */

let op: TestOperator;
let home: CliHome;

beforeAll(async () => {
  op = await startOperator();
  home = cliHome({ ROOST_URL: op.url, ROOST_ADMIN_TOKEN: op.adminToken });
  await home.ok([
    'admin',
    'agent',
    'create',
    '@par.alice',
    '--policy',
    'open',
    '--visibility',
    'public',
    '--display-name',
    'Alice Ops',
  ]);
  await home.ok(['admin', 'agent', 'create', '@par.bob', '--policy', 'allowlist']);
});
afterAll(() => op.close());

const alice = (args: string[]) => ['--as', '@par.alice', ...args];
const bob = (args: string[]) => ['--as', '@par.bob', ...args];

describe('me', () => {
  it('shows and updates the profile and card', async () => {
    expect(await home.ok(alice(['me', 'show']))).toMatch(/^handle: +@par\.alice$/m);
    const card = join(home.dir, 'card.md');
    writeFileSync(card, '# Alice\n\nRuns deploys.');
    const updated = await home.json<{ display_name: string; description: string; card_body: string }>(
      alice(['me', 'update', '--description', 'deploys', '--card-file', card]),
    );
    expect(updated).toMatchObject({
      display_name: 'Alice Ops',
      description: 'deploys',
      card_body: '# Alice\n\nRuns deploys.',
    });
    expect(await home.ok(bob(['agents', 'card', '@par.alice']))).toBe('# Alice\n\nRuns deploys.\n');
    expect((await home.run(alice(['me', 'update']))).code).toBe(2);
  });

  it('edits the allowlist, which decides who may write', async () => {
    expect((await home.run(alice(['send', '@par.bob', '-t', 'hi']))).code).toBe(5);
    expect(await home.json(bob(['me', 'allowlist', 'add', '@par.*']))).toEqual({ entries: ['@par.*'] });
    expect(await home.ok(bob(['me', 'allowlist', 'list']))).toBe('@par.*\n');
    await home.ok(alice(['send', '@par.bob', '-t', 'hi']));
    expect((await home.run(bob(['me', 'allowlist', 'add', 'par']))).code).toBe(2);
    expect(await home.json(bob(['me', 'allowlist', 'remove', '@par.*']))).toEqual({ entries: [] });
    expect((await home.run(bob(['me', 'allowlist', 'remove', '@par.*']))).code).toBe(5);
  });

  it('blocks and unblocks', async () => {
    expect((await home.json<{ blocked_handle: string }>(alice(['me', 'block', '@par.bob']))).blocked_handle).toBe(
      '@par.bob',
    );
    expect(await home.ok(alice(['me', 'blocks']))).toMatch(/^@par\.bob \d{4}-/m);
    expect(await home.json(alice(['me', 'unblock', '@par.bob']))).toEqual({ handle: '@par.bob', unblocked: true });
    expect(await home.ok(alice(['me', 'blocks']))).toBe('no blocks\n');
    expect((await home.run(alice(['me', 'block', 'Bob']))).code).toBe(2);
  });
});

describe('agents and search', () => {
  it('shows and finds public agents; a private one is not found (exit 5)', async () => {
    expect(await home.ok(bob(['agents', 'show', '@par.alice']))).toMatch(/^display name: +Alice Ops$/m);
    expect(
      (await home.json<{ agents: Array<{ canonical_handle: string }> }>(bob(['agents', 'search', 'alice']))).agents.map(
        (a) => a.canonical_handle,
      ),
    ).toEqual(['@par.alice']);
    expect(await home.ok(bob(['agents', 'search', 'Ops']))).toContain('@par.alice "Alice Ops"');
    expect((await home.run(alice(['agents', 'show', '@par.bob']))).code).toBe(5);
  });

  it('searches messages sent or received, with short ids', async () => {
    await home.ok(bob(['me', 'allowlist', 'add', '@par.alice']));
    const sent = await home.json<{ id: string }>(
      alice(['send', '@par.bob', '-s', 'Quarterly zebra report', '-t', 'numbers inside']),
    );
    const found = await home.ok(bob(['search', 'zebra']));
    expect(found).toMatch(
      new RegExp(`^${sent.id.slice(-6)} \\d+s @par\\.alice "Quarterly zebra report" to=@par\\.bob$`, 'm'),
    );
    expect(
      (await home.json<{ envelopes: Array<{ envelope_id: string }> }>(alice(['search', 'zebra']))).envelopes.map(
        (e) => e.envelope_id,
      ),
    ).toEqual([sent.id]);
    expect((await home.run(bob(['search', 'z']))).code).toBe(7);
  });
});

describe('the sent side of the mailbox', () => {
  it('lists sent mail (out) and both directions as triage lines', async () => {
    const sent = await home.json<{ id: string }>(alice(['send', '@par.bob', '-s', 'Outbound check', '-t', 'x']));
    const out = await home.ok(alice(['mailbox']));
    expect(out).toMatch(new RegExp(`^${sent.id.slice(-6)} \\d+s →@par\\.bob "Outbound check" text`, 'm'));
    const both = await home.json<{ headers: Array<{ id: string; direction: string }> }>(
      bob(['mailbox', '--direction', 'both']),
    );
    expect(both.headers.find((h) => h.id === sent.id)?.direction).toBe('in');
    expect((await home.run(alice(['mailbox', '--direction', 'out', '--unread']))).code).toBe(2);
  });
});

describe('files', () => {
  it('upload, attach by id on send, download by id and by url', async () => {
    const path = join(home.dir, 'report.csv');
    writeFileSync(path, 'a,b\n1,2\n');
    const uploaded = await home.json<{ id: string; content_type: string }>(alice(['files', 'upload', path]));
    expect(uploaded.content_type).toBe('text/csv');
    const sent = await home.json<{ id: string }>(
      alice(['send', '@par.bob', '-t', 'see attached', '--file', uploaded.id]),
    );
    const body = await home.json<{ content_parts: Array<{ type: string; url?: string }> }>(
      bob(['show', sent.id.slice(-6)]),
    );
    const url = body.content_parts.find((p) => p.type === 'file')!.url!;
    const out = join(home.dir, 'got.csv');
    expect(await home.ok(bob(['files', 'download', url, '--out', out]))).toMatch(/saved 8 bytes/);
    expect(readFileSync(out, 'utf8')).toBe('a,b\n1,2\n');
    expect(await home.ok(alice(['files', 'download', uploaded.id, '--out', '-']))).toBe('a,b\n1,2\n');
    // Single use: the same id cannot be attached twice.
    expect((await home.run(alice(['send', '@par.bob', '-t', 'again', '--file', uploaded.id]))).code).toBe(7);
    expect((await home.run(bob(['files', 'download', 'nope']))).code).toBe(2);
  });
});
