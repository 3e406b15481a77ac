import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join, resolve } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { startOperator, type TestOperator } from '../../support/operator';
import { until } from './support';

/**
 * The CLI installed on an agent's machine without the repository: `npm pack` of libs/client
 * (@roost/client) and apps/cli (@roost/cli), `npm install -g --prefix <clean prefix>` of the two
 * tarballs (third-party packages from the npm cache, the registry only for what it lacks), then
 * `roost` from that prefix's bin against a running operator: send, inbox, listen, mcp, install.
 */

const ROOT = resolve(__dirname, '../../..');
/** The operator's own dependencies: none of them may come with the CLI. */
const SERVER_ONLY = [
  '@nestjs/core',
  '@nestjs/common',
  'pg',
  'kysely',
  '@electric-sql/pglite',
  'ioredis',
  'bullmq',
  'pino',
  'prom-client',
];

let op: TestOperator;
let dir: string;
let prefix: string;
let env: Record<string, string>;
const tokens: Record<string, string> = {};

/** npm without the variables of an enclosing `npm test` (npm_config_*, npm_package_*). */
function npm(args: string[], cwd: string): string {
  const clean = Object.fromEntries(
    Object.entries(process.env).filter(([key]) => !key.toLowerCase().startsWith('npm_')),
  ) as Record<string, string>;
  return execFileSync('npm', args, { cwd, env: clean, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/** `roost …` found on PATH (the prefix's bin), asynchronously: the operator runs in this process. */
function roost(
  args: string[],
  options: { input?: string; cwd?: string } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done, fail) => {
    const child = spawn('roost', args, { cwd: options.cwd ?? join(dir, 'work'), env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', fail);
    child.on('close', (code) => done({ code, stdout, stderr }));
    child.stdin.end(options.input ?? '');
  });
}

async function ok(args: string[], options: { input?: string; cwd?: string } = {}): Promise<string> {
  const result = await roost(args, options);
  if (result.code !== 0)
    throw new Error(`roost ${args.join(' ')} exited ${result.code}\n${result.stdout}\n${result.stderr}`);
  return result.stdout;
}

beforeAll(async () => {
  op = await startOperator();
  for (const handle of ['@pkg.alice', '@pkg.bob']) tokens[handle] = await op.agent(handle, { policy: 'open' });
  dir = mkdtempSync(join(tmpdir(), 'roost-standalone-'));
  mkdirSync(join(dir, 'work'));
  const packs = join(dir, 'packs');
  mkdirSync(packs);
  // prepack builds each package: tsc for the SDK, the esbuild bundle for the CLI.
  npm(['pack', '--pack-destination', packs], join(ROOT, 'libs', 'client'));
  npm(['pack', '--pack-destination', packs], join(ROOT, 'apps', 'cli'));
  const tarballs = readdirSync(packs).sort();
  expect(tarballs).toEqual(['roost-cli-0.1.0.tgz', 'roost-client-0.1.0.tgz']);
  prefix = join(dir, 'prefix');
  npm(
    [
      'install',
      '-g',
      '--prefix',
      prefix,
      '--prefer-offline',
      '--no-audit',
      '--no-fund',
      ...tarballs.map((t) => join(packs, t)),
    ],
    dir,
  );
  // Only the prefix's bin and node itself on PATH: no repository, no root node_modules.
  env = {
    PATH: [join(prefix, 'bin'), resolve(process.execPath, '..'), '/usr/bin', '/bin'].join(delimiter),
    HOME: dir,
    XDG_CONFIG_HOME: join(dir, 'config'),
    XDG_STATE_HOME: join(dir, 'state'),
  };
}, 300_000);
afterAll(() => op?.close());

it('installs a roost bin with the SDK package and none of the server', async () => {
  expect(realpathSync(join(prefix, 'bin', 'roost'))).toBe(
    join(prefix, 'lib', 'node_modules', '@roost', 'cli', 'dist', 'main.js'),
  );
  const modules = join(prefix, 'lib', 'node_modules', '@roost', 'cli', 'node_modules');
  for (const name of SERVER_ONLY) expect([name, existsSync(join(modules, name))]).toEqual([name, false]);
  expect(existsSync(join(prefix, 'lib', 'node_modules', '@roost', 'client', 'dist', 'index.js'))).toBe(true);
  // The bundles (main, hook, cli, mcp) require the SDK as a package, never the repository's sources.
  const dist = join(prefix, 'lib', 'node_modules', '@roost', 'cli', 'dist');
  expect(
    readdirSync(dist)
      .filter((name) => name.endsWith('.js'))
      .sort(),
  ).toEqual(['cli.js', 'hook.js', 'main.js', 'mcp.js']);
  const bundle = ['main.js', 'hook.js', 'cli.js', 'mcp.js']
    .map((name) => readFileSync(join(dist, name), 'utf8'))
    .join('\n');
  // The SDK is the @roost/client package (`#client` in the repository), not bundled source.
  expect(bundle).toMatch(/require\("@roost\/client"\)/);
  expect(bundle).not.toMatch(/require\("\.\.?\/[^"]*libs\/client/);
  expect(bundle).not.toMatch(/libs\/(db|core|config|http)\/|@nestjs|kysely/);
  expect((await ok(['--version'])).trim()).toBe('0.1.0');
  const serve = await roost(['serve']);
  expect(serve.code).toBe(2);
  expect(serve.stderr).toMatch(/does not include the operator/);
});

it('sends, lists the inbox and listens', async () => {
  await ok(['config', 'profile', 'test', '--url', op.url, '--default']);
  for (const handle of ['@pkg.alice', '@pkg.bob']) await ok(['config', 'token', handle], { input: tokens[handle] });
  const sent = JSON.parse(
    await ok(['--as', '@pkg.alice', 'send', '@pkg.bob', '-t', 'from the packaged cli', '-s', 'Packaged', '--json']),
  );
  expect(sent.id).toMatch(/^[0-9A-HJKMNP-TV-Z]{26}$/);
  const inbox = JSON.parse(await ok(['--as', '@pkg.bob', 'inbox', '--json'])) as {
    headers: Array<{ id: string; subject: string }>;
  };
  expect(inbox.headers).toEqual(
    expect.arrayContaining([expect.objectContaining({ id: sent.id, subject: 'Packaged' })]),
  );

  const child = spawn('roost', ['--as', '@pkg.bob', 'listen', '--cursor', join(dir, 'cursor.json')], {
    cwd: join(dir, 'work'),
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => lines.push(...chunk.toString().split('\n').filter(Boolean)));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const closed = new Promise<number | null>((done) => child.on('close', done));
  try {
    await until(() => lines.length >= 1, 20_000, 'the waiting envelope');
    await until(() => /resumed from the cursor|caught up/.test(stderr), 20_000, 'the listener to settle');
    const live = JSON.parse(await ok(['--as', '@pkg.alice', 'send', '@pkg.bob', '-t', 'live', '--json']));
    await until(() => lines.length >= 2, 20_000, 'the live envelope');
    expect(lines.map((line) => JSON.parse(line).id)).toEqual([sent.id, live.id]);
  } finally {
    child.kill('SIGINT');
  }
  expect(await closed).toBe(0);
});

it('serves MCP over stdio, compiled from its code cache after the first run', async () => {
  // The cache folder (docs/cli.md "Start-up"): written at the exit of a run, read by the next.
  const cache = join(dir, '.cache', 'roost', 'code-cache');
  for (const run of [1, 2]) {
    const client = new Client({ name: 'test', version: '1' });
    await client.connect(
      new StdioClientTransport({
        command: join(prefix, 'bin', 'roost'),
        args: ['mcp'],
        env: { ...env, ROOST_URL: op.url, ROOST_AGENT: '@pkg.bob', ROOST_TOKEN: tokens['@pkg.bob'] },
        stderr: 'pipe',
      }),
    );
    try {
      expect(client.getServerVersion()?.name).toBeTruthy();
      const { tools } = await client.listTools();
      expect(tools.map((tool) => tool.name)).toEqual(
        expect.arrayContaining(['send', 'inbox', 'read', 'reply', 'wait_for_mail']),
      );
    } finally {
      await client.close();
    }
    // After the first run's exit: on Node 20 one file per chunk run (cli.js, mcp.js); Node ≥ 22.1
    // keeps its own layout there.
    const [major, minor] = process.versions.node.split('.').map(Number);
    const files = major > 22 || (major === 22 && minor >= 1) ? 1 : 2;
    await until(
      () => (existsSync(cache) && readdirSync(cache).length >= files) || undefined,
      10_000,
      `the code cache after run ${run}`,
    );
  }
});

it('installs into a repository with hooks that run the installed bundle', async () => {
  const repo = join(dir, 'repo');
  mkdirSync(repo);
  await ok(['--as', '@pkg.bob', 'install'], { cwd: repo });
  const settings = readFileSync(join(repo, '.claude', 'settings.json'), 'utf8');
  expect(settings).toContain(join(prefix, 'lib', 'node_modules', '@roost', 'cli', 'dist', 'main.js'));
  expect(JSON.parse(readFileSync(join(repo, '.roost', 'config.json'), 'utf8'))).toMatchObject({ agent: '@pkg.bob' });
  // doctor (exit 0 only when every check passes) checks the operator, the token and the hooks.
  const doctor = await ok(['doctor'], { cwd: repo });
  expect(doctor).toMatch(/ok +operator/);
  expect(doctor).toMatch(/ok +hooks/);
});
