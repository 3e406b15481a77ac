import { cpSync, existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { cliHome } from './support';

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
    await home.ok(['--as', '@acme.bob', 'install'], { cwd: repo });
    for (const file of FILES) expect([file, readFileSync(join(repo, file), 'utf8')]).toEqual([file, readFileSync(join(GOLDEN, 'installed', file), 'utf8')]);
    expect(JSON.parse(readFileSync(join(repo, '.roost', 'config.json'), 'utf8'))).toEqual({ agent: '@acme.bob' });
    expect(existsSync(join(repo, '.roost', 'mailbox', 'OUTBOX.md'))).toBe(true);
  });

  it('is idempotent', async () => {
    const { home, repo } = fixture();
    await home.ok(['--as', '@acme.bob', 'install'], { cwd: repo });
    const once = tree(repo);
    const again = await home.ok(['--as', '@acme.bob', 'install'], { cwd: repo });
    expect(again).toMatch(/already installed/);
    expect(tree(repo)).toEqual(once);
  });

  it('uninstall removes exactly what install added: the original bytes come back', async () => {
    const { home, repo } = fixture();
    const before = tree(repo);
    await home.ok(['--as', '@acme.bob', 'install'], { cwd: repo });
    await home.ok(['uninstall'], { cwd: repo });
    expect(tree(repo)).toEqual(before);
  });

  it('keeps edits made after install, outside the managed parts', async () => {
    const { home, repo } = fixture();
    await home.ok(['--as', '@acme.bob', 'install'], { cwd: repo });
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
    await home.ok(['--as', '@acme.bob', 'install', '--mcp'], { cwd: repo });
    const claude = JSON.parse(readFileSync(join(repo, '.mcp.json'), 'utf8'));
    expect(claude.mcpServers).toEqual({ other: { command: 'other-mcp' }, roost: { command: 'roost', args: ['--as', '@acme.bob', 'mcp'] } });
    expect(readFileSync(join(repo, '.codex/config.toml'), 'utf8')).toBe('[mcp_servers.roost]\ncommand = "roost"\nargs = ["--as", "@acme.bob", "mcp"]\n');
    expect(JSON.parse(readFileSync(join(repo, '.claude/settings.json'), 'utf8')).hooks.Stop).toBeDefined();
    const again = await home.ok(['--as', '@acme.bob', 'install', '--mcp'], { cwd: repo });
    expect(again).toContain('already installed');
    await home.ok(['uninstall'], { cwd: repo });
    expect(tree(repo)).toEqual(withMcp);
    expect(before['.mcp.json']).toBeUndefined();
  });
});
