import {
  addCodexMcp,
  addHooks,
  addMcpJson,
  applyBlock,
  applyGitignore,
  END,
  hookCommand,
  isRoostHookCommand,
  managedBlock,
  removeBlock,
  removeCodexMcp,
  removeGitignore,
  removeHooks,
  removeMcpJson,
  shellSplit,
  START,
} from './install';

const block = managedBlock('@acme.bob');

describe('managed block', () => {
  it('appends after existing text with one blank line, and removes back to the same bytes', () => {
    for (const original of ['# Project\n\nRules.\n', '']) {
      const installed = applyBlock(original, block);
      expect(installed).toContain(START);
      expect(installed.startsWith(original)).toBe(true);
      expect(removeBlock(installed)).toBe(original);
    }
  });

  it('never touches the text before the block (odd endings are restored byte-exact by the install manifest)', () => {
    for (const original of ['# Project\n\nRules.', '# Project\n\n']) {
      const installed = applyBlock(original, block);
      expect(installed.startsWith(original)).toBe(true);
      expect(removeBlock(installed).trimEnd()).toBe(original.trimEnd());
    }
  });

  it('replaces the block in place, keeping what is around it, and is idempotent', () => {
    const text = `intro\n\n${START}\nold\n${END}\n\noutro\n`;
    const once = applyBlock(text, block);
    expect(once.startsWith('intro\n\n')).toBe(true);
    expect(once.endsWith(`${END}\n\noutro\n`)).toBe(true);
    expect(applyBlock(once, block)).toBe(once);
    expect(removeBlock(once)).toBe('intro\n\n\noutro\n');
  });

  it('tells the agent when to check and how to reply and send receipts', () => {
    expect(block).toMatch(/before a major decision/);
    expect(block).toMatch(/after tests/);
    expect(block).toMatch(/before your final answer/);
    expect(block).toMatch(/OUTBOX\.md/);
    expect(block).toMatch(/RECEIPTS\.md/);
  });
});

describe('hook groups', () => {
  const existing = {
    model: 'x',
    hooks: {
      PostToolUse: [{ matcher: 'Write', hooks: [{ type: 'command', command: 'prettier --write' }] }],
      Notification: [{ hooks: [{ type: 'command', command: 'notify-send hi' }] }],
    },
  };

  it('adds one group per event and keeps every other group', () => {
    const added = addHooks(existing);
    const hooks = added.hooks as Record<string, Array<{ hooks: Array<{ command: string }> }>>;
    expect(hooks.PostToolUse).toHaveLength(2);
    expect(hooks.PostToolUse[0]).toEqual(existing.hooks.PostToolUse[0]);
    expect(hooks.SessionStart[0].hooks[0].command).toBe('roost hook --event SessionStart');
    expect(hooks.Stop[0].hooks[0].command).toBe('roost hook --event Stop');
    expect(hooks.Notification).toEqual(existing.hooks.Notification);
    expect(added.model).toBe('x');
  });

  it('is idempotent and removal restores the original structure', () => {
    const added = addHooks(existing);
    expect(addHooks(added)).toEqual(added);
    expect(removeHooks(added)).toEqual(existing);
    expect(removeHooks(addHooks({}))).toEqual({});
  });

  it('removes only roost commands from a group shared with another tool', () => {
    const shared = {
      hooks: {
        Stop: [
          {
            hooks: [
              { type: 'command', command: 'say done' },
              { type: 'command', command: 'roost hook --event Stop' },
            ],
          },
        ],
      },
    };
    expect(removeHooks(shared)).toEqual({ hooks: { Stop: [{ hooks: [{ type: 'command', command: 'say done' }] }] } });
  });
});

describe('MCP entries (install --mcp)', () => {
  it('adds .mcp.json mcpServers.roost pinned to the agent, keeps other servers, removes back to the same JSON', () => {
    const original = { mcpServers: { other: { command: 'x', args: [] } }, extra: 1 };
    const installed = addMcpJson(original, '@acme.bob');
    expect(installed.mcpServers).toEqual({
      other: { command: 'x', args: [] },
      roost: { command: 'roost', args: ['--as', '@acme.bob', 'mcp'] },
    });
    expect(addMcpJson(installed, '@acme.bob')).toEqual(installed);
    expect(removeMcpJson(installed)).toEqual(original);
    expect(removeMcpJson(addMcpJson({}, undefined))).toEqual({});
  });

  it('leaves a roost server it did not write alone', () => {
    const theirs = { mcpServers: { roost: { url: 'https://elsewhere/mcp' } } };
    expect(addMcpJson(theirs, '@acme.bob')).toEqual(theirs);
    expect(removeMcpJson(theirs)).toEqual(theirs);
  });

  it('appends [mcp_servers.roost] to config.toml once and removes it byte-exact', () => {
    for (const original of [
      '',
      'model = "o3"\n',
      '[profiles.x]\nmodel = "o3"\n\n[mcp_servers.other]\ncommand = "y"\n',
    ]) {
      const installed = addCodexMcp(original, '@acme.bob');
      expect(installed).toContain('[mcp_servers.roost]\ncommand = "roost"\nargs = ["--as", "@acme.bob", "mcp"]\n');
      expect(addCodexMcp(installed, '@acme.bob')).toBe(installed);
      expect(removeCodexMcp(installed)).toBe(original);
    }
  });

  it('removes a roost table followed by another table, keeping that one', () => {
    const text =
      'a = 1\n\n[mcp_servers.roost]\ncommand = "roost"\nargs = ["mcp"]\n\n[mcp_servers.other]\ncommand = "y"\n';
    expect(removeCodexMcp(text)).toBe('a = 1\n\n[mcp_servers.other]\ncommand = "y"\n');
  });
});

describe('base command (no PATH needed)', () => {
  it('quotes words for sh and splits them back', () => {
    const base = ['/usr/bin/node', "/opt/it's here/main.js"];
    const line = hookCommand('Stop', base);
    expect(line).toBe(`/usr/bin/node '/opt/it'\\''s here/main.js' hook --event Stop`);
    expect(shellSplit(line)).toEqual([...base, 'hook', '--event', 'Stop']);
    expect(isRoostHookCommand(line)).toBe(true);
    expect(removeHooks(addHooks({}, base))).toEqual({});
  });

  it('puts the argv prefix into MCP entries', () => {
    expect(addMcpJson({}, '@acme.bob', ['/n', '/m.js']).mcpServers).toEqual({
      roost: { command: '/n', args: ['/m.js', '--as', '@acme.bob', 'mcp'] },
    });
  });

  it('.gitignore block is idempotent and removed byte-exact', () => {
    for (const original of ['', 'node_modules\n']) {
      const once = applyGitignore(original);
      expect(once).toContain('/.roost/mailbox/INBOX.md');
      expect(applyGitignore(once)).toBe(once);
      expect(removeGitignore(once)).toBe(original);
    }
  });
});
