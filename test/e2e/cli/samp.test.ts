import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startOperator, type TestOperator } from '../../support/operator';
import { cliHome, type CliHome } from './support';

/** The SAMP bridge round trip (issue 17 item 5): export, import back, import for another owner. */

let op: TestOperator;
let home: CliHome;

beforeAll(async () => {
  op = await startOperator();
  home = cliHome({ ROOST_URL: op.url, ROOST_ADMIN_TOKEN: op.adminToken });
  for (const handle of ['@rt.alice', '@rt.bob', '@rtb.alice', '@rtb.bob', '@rtc.alice'])
    await home.ok(['admin', 'agent', 'create', handle, '--policy', 'open']);
});
afterAll(() => op.close());

type Summary = { posted: number; replayed: number; skipped_no_token: number; refused: unknown[] };

describe('samp round trip', () => {
  it('a Roost envelope exported and imported back is recognised; another owner gets its own deterministic ids; refusals are summarised', async () => {
    const sent = [
      await home.json<{ id: string }>(['--as', '@rt.alice', 'send', '@rt.bob', '-s', 'plan', '-t', 'first']),
      await home.json<{ id: string }>([
        '--as',
        '@rt.alice',
        'send',
        '@rt.bob',
        '-t',
        'no subject',
        '--data',
        '{"k":1}',
      ]),
      await home.json<{ id: string }>(['--as', '@rt.bob', 'send', '@rt.alice', '-s', 'Re: plan', '-t', 'ack']),
    ];
    await home.ok(['--as', '@rt.bob', 'read', sent[1].id]);
    const dir = join(home.dir, 'samp');
    await home.ok(['--as', '@rt.bob', 'samp', 'export', dir]);
    const records = readFileSync(join(dir, 'log-alice.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(records.map((r) => r.asmtp_id)).toEqual([sent[0].id, sent[1].id]);
    const before = await home.json<{ headers: Array<{ id: string }> }>(['--as', '@rt.bob', 'inbox', '--all']);

    // Back into the same mailboxes: every envelope is recognised, nothing is posted again.
    const back = await home.json<Summary>(['--as', '@rt.bob', 'samp', 'import', dir]);
    expect(back).toMatchObject({ posted: 0, replayed: 3, refused: [] });
    expect(
      (await home.json<{ headers: Array<{ id: string }> }>(['--as', '@rt.bob', 'inbox', '--all'])).headers.map(
        (h) => h.id,
      ),
    ).toEqual(before.headers.map((h) => h.id));
    expect(await home.ok(['--as', '@rt.bob', 'inbox'])).toMatch(/no unread mail/);

    // For another owner: ids derive from the mapped handles, so nothing collides, and again is a no-op.
    const other = await home.json<Summary>(['--as', '@rtb.bob', 'samp', 'import', dir, '--owner', 'rtb']);
    expect(other).toMatchObject({ posted: 3, replayed: 0, refused: [] });
    expect(await home.json<Summary>(['--as', '@rtb.bob', 'samp', 'import', dir, '--owner', 'rtb'])).toMatchObject({
      posted: 0,
      replayed: 3,
    });
    const ids = (
      await home.json<{ headers: Array<{ id: string }> }>(['--as', '@rtb.bob', 'inbox', '--all'])
    ).headers.map((h) => h.id);
    expect(ids).toHaveLength(2);
    for (const s of sent) expect(ids).not.toContain(s.id);

    // A refused batch: counts and the first reasons, not one long line.
    const refused = await home.run(['--as', '@rtc.alice', 'samp', 'import', dir, '--owner', 'rtc']);
    expect(refused.code).toBe(7);
    expect(refused.stdout).toMatch(/^refused 2: NOT_FOUND ×2$/m);
    expect(Math.max(...refused.stdout.split('\n').map((l) => l.length))).toBeLessThan(200);
    expect(refused.stderr).toMatch(/2 record\(s\) refused[\s\S]*hint: a recipient is unknown/);
  });
});
