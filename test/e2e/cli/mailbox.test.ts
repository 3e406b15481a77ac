import { appendFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { splitBlocks } from '../../../apps/cli/src/mailbox/markdown';
import { startOperator, type TestOperator } from '../../support/operator';
import { cliHome, type CliHome } from './support';

/** The worktree mailbox end to end: INBOX.md, OUTBOX.md, RECEIPTS.md, two mirrors at once, hooks. */

let op: TestOperator;
let home: CliHome;
let aliceDir: string;
let bobDir: string;

beforeAll(async () => {
  op = await startOperator();
  home = cliHome({ ROOST_URL: op.url, ROOST_ADMIN_TOKEN: op.adminToken });
  await home.ok(['admin', 'agent', 'create', '@wt.alice', '--policy', 'open']);
  await home.ok(['admin', 'agent', 'create', '@wt.bob', '--policy', 'open']);
  aliceDir = join(home.dir, 'alice');
  bobDir = join(home.dir, 'bob');
  await home.ok(['--as', '@wt.alice', 'install', '--dir', aliceDir]);
  await home.ok(['--as', '@wt.bob', 'install', '--dir', bobDir]);
});
afterAll(() => op.close());

const read = (dir: string, file: string) => readFileSync(join(dir, '.roost', 'mailbox', file), 'utf8');
const append = (dir: string, file: string, text: string) => appendFileSync(join(dir, '.roost', 'mailbox', file), text);
const count = (text: string, needle: string) => text.split(needle).length - 1;

describe('worktree mailbox', () => {
  it('round trip: send → INBOX.md → OUTBOX.md reply → the sender’s mailbox; RECEIPTS.md → status', async () => {
    const sent = await home.json<{ id: string }>([
      '--as',
      '@wt.alice',
      'send',
      '@wt.bob',
      '-s',
      'Review',
      '-t',
      'Please review.\n\n## not a block\n\n```js\ncode()\n```',
    ]);
    const pass = await home.json<{ appended: Array<{ id: string }> }>(['mirror', '--once'], { cwd: bobDir });
    expect(pass.appended.map((h) => h.id)).toEqual([sent.id]);
    const inbox = read(bobDir, 'INBOX.md');
    expect(inbox).toContain(`## ${sent.id}\n\nfrom: @wt.alice\nto: @wt.bob\nsubject: Review\n`);
    expect(inbox).toContain('````text\nPlease review.\n\n## not a block\n\n```js\ncode()\n```\n````');
    // The body's "## not a block" is inside the fence: a Markdown parser sees one block, not two.
    expect(splitBlocks(inbox, []).map((b) => b.heading)).toEqual([sent.id]);

    append(bobDir, 'OUTBOX.md', `\n## reply ${sent.id.slice(-6)}\n\nLooks good.\n\n- merged\n`);
    append(bobDir, 'RECEIPTS.md', `\n## ${sent.id}\nstatus: applied\nnote: merged in main\n`);
    const out = await home.json<{
      sent: Array<{ id: string; in_reply_to: string }>;
      receipts: Array<{ status: string }>;
    }>(['mirror', '--once'], { cwd: bobDir });
    expect(out.sent).toEqual([expect.objectContaining({ in_reply_to: sent.id, to: ['@wt.alice'] })]);
    expect(out.receipts.map((r) => r.status)).toEqual(['applied']);

    const reply = await home.json<{ in_reply_to: string; subject: string; content_parts: Array<{ text: string }> }>([
      '--as',
      '@wt.alice',
      'show',
      out.sent[0].id,
    ]);
    expect(reply).toMatchObject({ in_reply_to: sent.id, subject: 'Re: Review' });
    expect(reply.content_parts[0].text).toBe('Looks good.\n\n- merged');
    const status = await home.json<{ recipients: Array<{ status: string }> }>(['--as', '@wt.alice', 'status', sent.id]);
    expect(status.recipients[0].status).toBe('applied');

    await home.ok(['mirror', '--once'], { cwd: aliceDir });
    expect(read(aliceDir, 'INBOX.md')).toContain(`in_reply_to: ${sent.id}`);
    // Nothing is sent twice.
    const again = await home.json<{ sent: unknown[]; receipts: unknown[]; appended: unknown[] }>(['mirror', '--once'], {
      cwd: bobDir,
    });
    expect(again).toMatchObject({ sent: [], receipts: [], appended: [] });
  });

  it('skips and reports malformed hand-edited blocks once, never rewrites them, and still sends the good ones', async () => {
    const sent = await home.json<{ id: string }>(['--as', '@wt.alice', 'send', '@wt.bob', '-t', 'decide please']);
    await home.ok(['mirror', '--once'], { cwd: bobDir });
    const bad = [
      '\n## reply\n\nno target\n',
      '\n## reply ZZZZZZ\n\nunknown target\n',
      `\n## reply ${sent.id}\n`,
      `\n## to @wt.alice\ncc: not-a-handle\n\nbad cc\n`,
      '\n## hello\n\nwhat?\n',
    ];
    append(bobDir, 'OUTBOX.md', bad.join('') + `\n## to @wt.alice\nsubject: after the bad ones\n\nstill sent\n`);
    append(bobDir, 'RECEIPTS.md', `\n## ${sent.id}\nstatus: maybe\n\n## 01ZZZZZZZZZZZZZZZZZZZZZZZZ ok extra\n`);
    // Hand-edited INBOX.md (the agent should not, but may): appended to, never rewritten.
    append(bobDir, 'INBOX.md', '\nnotes the agent typed here\n');
    const outbox = read(bobDir, 'OUTBOX.md');
    const receipts = read(bobDir, 'RECEIPTS.md');
    const inbox = read(bobDir, 'INBOX.md');
    const first = await home.run(['mirror', '--once', '--json'], { cwd: bobDir });
    expect(first.code).toBe(0);
    const result = JSON.parse(first.stdout) as { sent: unknown[]; problems: Array<{ file: string; reason: string }> };
    expect(result.sent).toHaveLength(1);
    expect(result.problems.map((p) => p.file)).toEqual([
      'OUTBOX.md',
      'OUTBOX.md',
      'OUTBOX.md',
      'OUTBOX.md',
      'OUTBOX.md',
      'RECEIPTS.md',
      'RECEIPTS.md',
    ]);
    expect(first.stderr).toMatch(
      /skipped OUTBOX\.md:\d+ "## reply ZZZZZZ": reply target ZZZZZZ is not an envelope id in INBOX\.md/,
    );
    expect(first.stderr).toMatch(/skipped RECEIPTS\.md:\d+ .*status must be one of/);
    expect([read(bobDir, 'OUTBOX.md'), read(bobDir, 'RECEIPTS.md')]).toEqual([outbox, receipts]);
    const second = await home.run(['mirror', '--once', '--json'], { cwd: bobDir });
    expect(JSON.parse(second.stdout).problems).toEqual([]);
    expect(second.stderr).toBe('');
    // New mail still lands after the hand-typed notes, which stay.
    const later = await home.json<{ id: string }>(['--as', '@wt.alice', 'send', '@wt.bob', '-t', 'later']);
    await home.ok(['mirror', '--once'], { cwd: bobDir });
    const grown = read(bobDir, 'INBOX.md');
    expect(grown.startsWith(inbox)).toBe(true);
    expect(grown.slice(inbox.length)).toContain(`## ${later.id}`);
  });

  it('two `roost mirror` processes at once append each envelope once and send each reply once', async () => {
    await home.ok(['admin', 'agent', 'create', '@wt.carol', '--policy', 'open']);
    const carolDir = join(home.dir, 'carol');
    await home.ok(['--as', '@wt.carol', 'install', '--dir', carolDir]);
    const ids: string[] = [];
    for (let i = 0; i < 20; i++)
      ids.push((await home.json<{ id: string }>(['--as', '@wt.alice', 'send', '@wt.carol', '-t', `n${i}`])).id);
    const watcher = home.spawn(['mirror', '--interval', '50'], { cwd: carolDir });
    try {
      for (let round = 0; round < 3; round++) {
        if (round === 1)
          append(
            carolDir,
            'OUTBOX.md',
            ids
              .slice(0, 5)
              .map((id, i) => `\n## reply ${id}\n\nreply ${i}\n`)
              .join(''),
          );
        const runs = await Promise.all([
          home.run(['mirror', '--once'], { cwd: carolDir }),
          home.run(['mirror', '--once'], { cwd: carolDir }),
        ]);
        for (const run of runs) expect(run.stderr).toBe('');
        for (let i = 0; i < 3; i++)
          ids.push(
            (await home.json<{ id: string }>(['--as', '@wt.alice', 'send', '@wt.carol', '-t', `r${round}.${i}`])).id,
          );
      }
      await Promise.all([
        home.ok(['mirror', '--once'], { cwd: carolDir }),
        home.ok(['mirror', '--once'], { cwd: carolDir }),
      ]);
    } finally {
      watcher.kill('SIGINT');
      await new Promise((done) => watcher.on('close', done));
    }
    const inbox = read(carolDir, 'INBOX.md');
    for (const id of ids) expect([id, count(inbox, `## ${id}\n`)]).toEqual([id, 1]);
    const replies = (
      await home.json<{ headers: Array<{ from: string; in_reply_to?: string }> }>([
        '--as',
        '@wt.alice',
        'inbox',
        '--all',
        '--limit',
        '1000',
      ])
    ).headers.filter((h) => h.from === '@wt.carol');
    expect(replies.map((h) => h.in_reply_to).sort()).toEqual(ids.slice(0, 5).sort());
  });
});

describe('roost hook', () => {
  it('speaks only about what is new, once, in the harness format; silent when nothing changed', async () => {
    await home.ok(['admin', 'agent', 'create', '@wt.dan', '--policy', 'open']);
    const danDir = join(home.dir, 'dan');
    await home.ok(['--as', '@wt.dan', 'install', '--dir', danDir]);
    const quiet = await home.run(['hook', '--event', 'SessionStart'], { cwd: danDir });
    expect(quiet).toEqual({ code: 0, stdout: '', stderr: '' });
    const sent = await home.json<{ id: string }>([
      '--as',
      '@wt.alice',
      'send',
      '@wt.dan',
      '-s',
      'Need a decision',
      '-t',
      'A or B?',
    ]);
    const spoke = await home.run(['hook', '--event', 'PostToolUse'], { cwd: danDir });
    const output = JSON.parse(spoke.stdout);
    expect(output.hookSpecificOutput.hookEventName).toBe('PostToolUse');
    expect(output.hookSpecificOutput.additionalContext).toContain(`${sent.id.slice(-6)} `);
    expect(output.hookSpecificOutput.additionalContext).toContain('"Need a decision"');
    expect((await home.run(['hook', '--event', 'PostToolUse'], { cwd: danDir })).stdout).toBe('');
    // A reply appended by the agent is sent by the next hook; at Stop that is no reason to force
    // another turn, so it says nothing (the reply went out all the same).
    append(danDir, 'OUTBOX.md', `\n## reply ${sent.id}\n\nB.\n`);
    expect(await home.run(['hook', '--event', 'Stop'], { cwd: danDir })).toEqual({ code: 0, stdout: '', stderr: '' });
    const aliceInbox = await home.json<{ headers: Array<{ in_reply_to?: string; from: string }> }>([
      '--as',
      '@wt.alice',
      'inbox',
    ]);
    expect(aliceInbox.headers).toEqual(
      expect.arrayContaining([expect.objectContaining({ from: '@wt.dan', in_reply_to: sent.id })]),
    );
    // Its own receipt likewise.
    append(danDir, 'RECEIPTS.md', `\n## ${sent.id}\nstatus: applied\n`);
    expect((await home.run(['hook', '--event', 'Stop'], { cwd: danDir })).stdout).toBe('');
    expect(
      (await home.json<{ recipients: Array<{ status: string }> }>(['--as', '@wt.alice', 'status', sent.id]))
        .recipients[0].status,
    ).toBe('applied');
    // New mail from someone else does block Stop.
    const next = await home.json<{ id: string }>([
      '--as',
      '@wt.alice',
      'send',
      '@wt.dan',
      '-s',
      'One more',
      '-t',
      'C?',
    ]);
    const stop = JSON.parse((await home.run(['hook', '--event', 'Stop'], { cwd: danDir })).stdout);
    expect(stop.decision).toBe('block');
    expect(stop.reason).toContain(next.id.slice(-6));
    expect((await home.run(['hook', '--event', 'Stop'], { cwd: danDir })).stdout).toBe('');
    // A new session hears about the mail an earlier session was told about (the mirror fetched the
    // bodies, so the operator counts them read: the hook goes by what it announced since the last start).
    const start = JSON.parse((await home.run(['hook', '--event', 'SessionStart'], { cwd: danDir })).stdout);
    expect(start.hookSpecificOutput.additionalContext).toMatch(
      /2 in \.roost\/mailbox\/INBOX\.md for @wt\.dan announced in an earlier session/,
    );
    expect(start.hookSpecificOutput.additionalContext).toContain(`${sent.id.slice(-6)} `);
    expect(start.hookSpecificOutput.additionalContext).toContain(`${next.id.slice(-6)} `);
    // PostToolUse still repeats nothing, and the session after that was told already.
    expect((await home.run(['hook', '--event', 'PostToolUse'], { cwd: danDir })).stdout).toBe('');
    expect((await home.run(['hook', '--event', 'SessionStart'], { cwd: danDir })).stdout).toBe('');
  });

  it('without a worktree mailbox: unread triage lines, never repeated, nothing about read mail', async () => {
    await home.ok(['admin', 'agent', 'create', '@wt.erin', '--policy', 'open']);
    const a = await home.json<{ id: string }>(['--as', '@wt.alice', 'send', '@wt.erin', '-t', 'one']);
    const first = await home.run(['--as', '@wt.erin', 'hook']);
    expect(first.stdout).toMatch(new RegExp(`^${a.id.slice(-6)} .*@wt\\.alice`, 'm'));
    expect((await home.run(['--as', '@wt.erin', 'hook'])).stdout).toBe('');
    const b = await home.json<{ id: string }>(['--as', '@wt.alice', 'send', '@wt.erin', '-t', 'two']);
    const c = await home.json<{ id: string }>(['--as', '@wt.alice', 'send', '@wt.erin', '-t', 'three']);
    await home.ok(['--as', '@wt.erin', 'read', c.id]);
    const second = (await home.run(['--as', '@wt.erin', 'hook'])).stdout;
    expect(second).toContain(b.id.slice(-6));
    expect(second).not.toContain(a.id.slice(-6));
    expect(second).not.toContain(c.id.slice(-6));
    // A new session: the unread mail announced before (a, b), not the read one (c).
    const start = (await home.run(['--as', '@wt.erin', 'hook', '--event', 'SessionStart'])).stdout;
    const context = JSON.parse(start).hookSpecificOutput.additionalContext as string;
    expect(context).toMatch(/2 unread for @wt\.erin announced in an earlier session/);
    expect(context).toContain(a.id.slice(-6));
    expect(context).toContain(b.id.slice(-6));
    expect(context).not.toContain(c.id.slice(-6));
  });

  it('never fails the harness: unreachable operator or no configuration exit 0', async () => {
    const bare = cliHome({ ROOST_URL: 'http://127.0.0.1:1', ROOST_AGENT: '@wt.x', ROOST_TOKEN: 't' });
    const down = await bare.run(['hook', '--event', 'Stop']);
    expect(down.code).toBe(0);
    expect(down.stdout).toBe('');
    expect((await cliHome().run(['hook'])).code).toBe(0);
    writeFileSync(join(bare.dir, 'x'), '');
  });
});
