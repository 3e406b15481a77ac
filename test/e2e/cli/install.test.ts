import { spawnSync } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join, relative } from 'node:path';
import { CLI, cliHome } from './support';

/**
 * `roost install` / `roost uninstall` on a repository that already has an AGENTS.md, a CLAUDE.md
 * and hook groups of other tools, against golden files (test/e2e/cli/golden).
 */

const GOLDEN = join(__dirname, 'golden');
const FILES = ['AGENTS.md', 'CLAUDE.md', '.claude/settings.json', '.codex/hooks.json'];

function tree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const path = join(d, name);
      if (statSync(path).isDirectory()) walk(path);
      else out[relative(dir, path)] = readFileSync(path, 'utf8');
    }
  };
  walk(dir);
  return out;
}

function fixture(): { home: ReturnType<typeof cliHome>; repo: string } {
  const home = cliHome({ ROOST_URL: 'http://127.0.0.1:1' });
  const repo = join(home.dir, 'repo');
  cpSync(join(GOLDEN, 'repo'), repo, { recursive: true });
  return { home, repo };
}

describe('roost install / uninstall', () => {
  it('matches the golden files, preserving other content and hook groups', async () => {
    const { home, repo } = fixture();
    await home.ok(['--as', '@acme.bob', 'install', '--command', 'roost'], { cwd: repo });
    for (const file of FILES)
      expect([file, readFileSync(join(repo, file), 'utf8')]).toEqual([
        file,
        readFileSync(join(GOLDEN, 'installed', file), 'utf8'),
      ]);
    expect(JSON.parse(readFileSync(join(repo, '.roost', 'config.json'), 'utf8'))).toEqual({ agent: '@acme.bob' });
    expect(existsSync(join(repo, '.roost', 'mailbox', 'OUTBOX.md'))).toBe(true);
  });

  it('is idempotent', async () => {
    const { home, repo } = fixture();
    await home.ok(['--as', '@acme.bob', 'install', '--command', 'roost'], { cwd: repo });
    const once = tree(repo);
    const again = await home.ok(['--as', '@acme.bob', 'install', '--command', 'roost'], { cwd: repo });
    expect(again).toMatch(/already installed/);
    expect(tree(repo)).toEqual(once);
  });

  it('uninstall removes exactly what install added: the original bytes come back', async () => {
    const { home, repo } = fixture();
    const before = tree(repo);
    await home.ok(['--as', '@acme.bob', 'install', '--command', 'roost'], { cwd: repo });
    await home.ok(['uninstall'], { cwd: repo });
    expect(tree(repo)).toEqual(before);
  });

  it('keeps edits made after install, outside the managed parts', async () => {
    const { home, repo } = fixture();
    await home.ok(['--as', '@acme.bob', 'install', '--command', 'roost'], { cwd: repo });
    writeFileSync(join(repo, 'AGENTS.md'), `${readFileSync(join(repo, 'AGENTS.md'), 'utf8')}\n## Added later\n`);
    const settings = JSON.parse(readFileSync(join(repo, '.claude', 'settings.json'), 'utf8'));
    settings.hooks.Stop.push({ hooks: [{ type: 'command', command: 'say done' }] });
    writeFileSync(join(repo, '.claude', 'settings.json'), JSON.stringify(settings, null, 2));
    await home.ok(['uninstall'], { cwd: repo });
    const agents = readFileSync(join(repo, 'AGENTS.md'), 'utf8');
    expect(agents).not.toContain('ROOST_MAILBOX');
    expect(agents.startsWith(readFileSync(join(GOLDEN, 'repo', 'AGENTS.md'), 'utf8'))).toBe(true);
    expect(agents).toContain('## Added later');
    const after = JSON.parse(readFileSync(join(repo, '.claude', 'settings.json'), 'utf8'));
    expect(JSON.stringify(after)).not.toContain('roost hook');
    expect(after.hooks.Stop).toEqual([{ hooks: [{ type: 'command', command: 'say done' }] }]);
    expect(after.hooks.PostToolUse).toHaveLength(1);
    expect(after.permissions).toEqual({ allow: ['Bash(npm test)'] });
  });

  it('on an empty folder creates the files and uninstall leaves nothing behind', async () => {
    const home = cliHome();
    const repo = join(home.dir, 'work');
    await home.ok(['--as', '@acme.bob', 'install', '--no-codex'], { cwd: repo });
    expect(existsSync(join(repo, '.codex'))).toBe(false);
    expect(readFileSync(join(repo, 'AGENTS.md'), 'utf8')).toMatch(/^<!-- ROOST_MAILBOX_START -->/);
    await home.ok(['uninstall'], { cwd: repo });
    expect(readdirSync(repo)).toEqual([]);
  });

  it('--mcp registers roost mcp for Claude Code and Codex beside the hooks; uninstall restores every byte', async () => {
    const { home, repo } = fixture();
    const before = tree(repo);
    writeFileSync(join(repo, '.mcp.json'), '{\n  "mcpServers": {\n    "other": { "command": "other-mcp" }\n  }\n}\n');
    const withMcp = tree(repo);
    await home.ok(['--as', '@acme.bob', 'install', '--mcp', '--command', 'roost'], { cwd: repo });
    const claude = JSON.parse(readFileSync(join(repo, '.mcp.json'), 'utf8'));
    expect(claude.mcpServers).toEqual({
      other: { command: 'other-mcp' },
      roost: { command: 'roost', args: ['--as', '@acme.bob', 'mcp'] },
    });
    expect(readFileSync(join(repo, '.codex/config.toml'), 'utf8')).toBe(
      '[mcp_servers.roost]\ncommand = "roost"\nargs = ["--as", "@acme.bob", "mcp"]\n',
    );
    expect(JSON.parse(readFileSync(join(repo, '.claude/settings.json'), 'utf8')).hooks.Stop).toBeDefined();
    const again = await home.ok(['--as', '@acme.bob', 'install', '--mcp', '--command', 'roost'], { cwd: repo });
    expect(again).toContain('already installed');
    await home.ok(['uninstall'], { cwd: repo });
    expect(tree(repo)).toEqual(withMcp);
    expect(before['.mcp.json']).toBeUndefined();
  });

  it('by default writes hooks and MCP entries that start without roost on PATH (absolute node + main.js)', async () => {
    const home = cliHome({ ROOST_URL: 'http://127.0.0.1:1' });
    const repo = join(home.dir, 'dir with space');
    await home.ok(['--as', '@acme.bob', 'install', '--mcp', '--dir', repo]);
    const settings = JSON.parse(readFileSync(join(repo, '.claude', 'settings.json'), 'utf8'));
    const command: string = settings.hooks.Stop[0].hooks[0].command;
    expect(command).toBe(`${process.execPath} ${realpathSync(CLI)} hook --event Stop`);
    expect(JSON.parse(readFileSync(join(repo, '.mcp.json'), 'utf8')).mcpServers.roost).toEqual({
      command: process.execPath,
      args: [realpathSync(CLI), '--as', '@acme.bob', 'mcp'],
    });
    // A harness with no useful PATH runs the hook through sh: it must start (a bare `roost` exits 127).
    for (const cmd of [command, 'roost hook --event Stop']) {
      const run = spawnSync('/bin/sh', ['-c', cmd], {
        cwd: repo,
        env: { ...home.env, PATH: '/nonexistent' },
        encoding: 'utf8',
      });
      expect([cmd, run.status]).toEqual([cmd, cmd.startsWith('roost') ? 127 : 0]);
    }
    // doctor checks the hooks it finds: absolute ones pass, a bare `roost` off PATH fails.
    const doctor = await home.run(['doctor'], { cwd: repo });
    expect(doctor.stdout).toMatch(/ok +hooks +\.claude\/settings\.json runs /);
    await home.ok(['uninstall'], { cwd: repo });
    await home.ok(['--as', '@acme.bob', 'install', '--command', 'roost'], { cwd: repo });
    const bare = await home.run(['doctor'], { cwd: repo, env: { PATH: '/nonexistent' } });
    expect(bare.stdout).toMatch(
      /FAIL hooks +\.claude\/settings\.json: `roost hook --event SessionStart`: roost is not on PATH/,
    );
    expect(bare.code).not.toBe(0);
  });

  it('quotes paths with spaces and quotes so sh runs them', async () => {
    const home = cliHome({ ROOST_URL: 'http://127.0.0.1:1' });
    const repo = join(home.dir, 'repo');
    const weird = join(home.dir, "it's here");
    mkdirSync(weird);
    cpSync(join(__dirname, '../../../dist'), join(weird, 'dist'), { recursive: true });
    // package.json maps the `#` aliases (#client, …) the built CLI imports.
    cpSync(join(__dirname, '../../../package.json'), join(weird, 'package.json'));
    symlinkSync(join(__dirname, '../../../node_modules'), join(weird, 'node_modules'));
    const cli = join(weird, 'dist', 'apps', 'cli', 'src', 'main.js');
    const r = spawnSync(process.execPath, [cli, '--as', '@acme.bob', 'install', '--dir', repo], {
      env: home.env,
      encoding: 'utf8',
    });
    expect(r.status).toBe(0);
    const command: string = JSON.parse(readFileSync(join(repo, '.claude', 'settings.json'), 'utf8')).hooks.Stop[0]
      .hooks[0].command;
    expect(command).toContain(`'${weird.replace(/'/g, `'\\''`)}`);
    const run = spawnSync('/bin/sh', ['-c', command], {
      cwd: repo,
      env: { ...home.env, PATH: '/nonexistent' },
      encoding: 'utf8',
    });
    expect(run.status).toBe(0);
  }, 60_000);

  it('adds a marked .gitignore block so mailbox bodies, cursors and state are not committed; uninstall restores .gitignore', async () => {
    const { home, repo } = fixture();
    writeFileSync(join(repo, '.gitignore'), 'node_modules\n');
    spawnSync('git', ['init', '-q'], { cwd: repo });
    await home.ok(['--as', '@acme.bob', 'install', '--command', 'roost'], { cwd: repo });
    const ignore = readFileSync(join(repo, '.gitignore'), 'utf8');
    expect(ignore.startsWith('node_modules\n\n# ROOST_MAILBOX_START')).toBe(true);
    for (const f of [
      '.roost/mailbox/INBOX.md',
      '.roost/mailbox/STATE.json',
      '.roost/hook.json',
      '.roost/admin-token',
      '.roost/mailbox/.lock',
    ])
      writeFileSync(join(repo, f), '{}');
    const check = spawnSync(
      'git',
      [
        'check-ignore',
        '.roost/mailbox/INBOX.md',
        '.roost/mailbox/STATE.json',
        '.roost/hook.json',
        '.roost/install.json',
        '.roost/admin-token',
        '.roost/mailbox/OUTBOX.md',
      ],
      { cwd: repo, encoding: 'utf8' },
    );
    expect(check.stdout.trim().split('\n').sort()).toEqual([
      '.roost/admin-token',
      '.roost/hook.json',
      '.roost/install.json',
      '.roost/mailbox/INBOX.md',
      '.roost/mailbox/STATE.json',
    ]);
    await home.ok(['--as', '@acme.bob', 'install', '--command', 'roost'], { cwd: repo });
    expect(readFileSync(join(repo, '.gitignore'), 'utf8')).toBe(ignore);
    const out = await home.ok(['uninstall'], { cwd: repo });
    expect(readFileSync(join(repo, '.gitignore'), 'utf8')).toBe('node_modules\n');
    // What it removed (cursors, lock) and what it left behind, each with the reason.
    expect(existsSync(join(repo, '.roost/hook.json'))).toBe(false);
    expect(existsSync(join(repo, '.roost/mailbox/.lock'))).toBe(false);
    expect(out).toMatch(/left behind: \.roost\/mailbox\/INBOX\.md \(mail received/);
    expect(out).toMatch(/left behind: \.roost\/mailbox\/STATE\.json \(/);
    expect(out).toMatch(/left behind: \.roost\/admin-token \(/);
    expect(existsSync(join(repo, '.roost/mailbox/INBOX.md'))).toBe(true);
  });
});
