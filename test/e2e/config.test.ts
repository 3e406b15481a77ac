import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, ROOST_MAIN } from '../support/processes';

/**
 * The real binary refuses a bad configuration before it touches anything: exit code 78
 * (EX_CONFIG), one line on stderr naming the variable, nothing on stdout, no data directory
 * created, no connection attempted (the database and Redis URLs point at closed ports, and the
 * process still exits at once). The rules themselves are unit-tested in libs/config.
 */

interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  ms: number;
}

function run(env: Record<string, string>): Promise<Run> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [ROOST_MAIN], {
      env: { PATH: process.env.PATH ?? '', ROOST_METRICS_PORT: '0', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.once('error', reject);
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, ms: Date.now() - started });
    });
  });
}

describe('configuration errors stop the real binary with exit 78 and name the variable', () => {
  let dataDir: string;
  let closed: number;

  beforeAll(async () => {
    dataDir = join(mkdtempSync(join(tmpdir(), 'roost-config-')), 'data');
    closed = await freePort();
  });
  afterAll(() => rmSync(join(dataDir, '..'), { recursive: true, force: true }));

  const shared = () => ({
    DATABASE_URL: `postgres://roost:hunter2-db-password@127.0.0.1:${closed}/roost`,
    REDIS_URL: `redis://127.0.0.1:${closed}`,
    ROOST_ADMIN_TOKEN: 'admin-token-long-enough-0123456789',
  });

  const cases: Array<[string, () => Record<string, string>, string]> = [
    ['PORT=abc', () => ({ ...shared(), PORT: 'abc' }), 'PORT'],
    ['PORT=70000', () => ({ ...shared(), PORT: '70000' }), 'PORT'],
    [
      'ROOST_METRICS_PORT=PORT',
      () => ({ ...shared(), PORT: '8025', ROOST_METRICS_PORT: '8025' }),
      'ROOST_METRICS_PORT',
    ],
    [
      'DATABASE_URL=mysql://x',
      () => ({ ...shared(), DATABASE_URL: 'mysql://user:hunter2-db-password@x/db' }),
      'DATABASE_URL',
    ],
    ['DATABASE_URL not a URL', () => ({ ...shared(), DATABASE_URL: 'not a url' }), 'DATABASE_URL'],
    ['ROOST_ROLE=nope', () => ({ ...shared(), ROOST_ROLE: 'nope' }), 'ROOST_ROLE'],
    [
      'ROOST_ROLE=api without DATABASE_URL',
      () => ({ ROOST_ROLE: 'api', REDIS_URL: `redis://127.0.0.1:${closed}` }),
      'DATABASE_URL',
    ],
    [
      'ROOST_ROLE=gateway without REDIS_URL',
      () => ({ ...shared(), ROOST_ROLE: 'gateway', REDIS_URL: '' }),
      'REDIS_URL',
    ],
    ['REDIS_URL=http://x', () => ({ ...shared(), REDIS_URL: 'http://x' }), 'REDIS_URL'],
    ['DATABASE_URL without an admin token', () => ({ ...shared(), ROOST_ADMIN_TOKEN: '' }), 'ROOST_ADMIN_TOKEN'],
    ['ROOST_ADMIN_TOKEN too short', () => ({ ...shared(), ROOST_ADMIN_TOKEN: 'short-secret' }), 'ROOST_ADMIN_TOKEN'],
    [
      'ROOST_ADMIN_TOKEN_HASH not hex',
      () => ({ ...shared(), ROOST_ADMIN_TOKEN: '', ROOST_ADMIN_TOKEN_HASH: 'xyz' }),
      'ROOST_ADMIN_TOKEN_HASH',
    ],
    ['ROOST_LOG_LEVEL=loud', () => ({ ...shared(), ROOST_LOG_LEVEL: 'loud' }), 'ROOST_LOG_LEVEL'],
    ['ROOST_DB_POOL_SIZE=1', () => ({ ...shared(), ROOST_DB_POOL_SIZE: '1' }), 'ROOST_DB_POOL_SIZE'],
    [
      'ROOST_SHUTDOWN_TIMEOUT_MS=-5',
      () => ({ ...shared(), ROOST_SHUTDOWN_TIMEOUT_MS: '-5' }),
      'ROOST_SHUTDOWN_TIMEOUT_MS',
    ],
    ['ROOST_NETWORK=Bad!', () => ({ ...shared(), ROOST_NETWORK: 'Bad!' }), 'ROOST_NETWORK'],
    ['ROOST_PUBLIC_URL=ftp://x', () => ({ ...shared(), ROOST_PUBLIC_URL: 'ftp://x' }), 'ROOST_PUBLIC_URL'],
  ];

  it.concurrent.each(cases)('%s', async (_name, env, variable) => {
    const result = await run({ ...env(), ROOST_DATA_DIR: dataDir, ROOST_LOG_LEVEL: env().ROOST_LOG_LEVEL ?? 'info' });
    expect({ code: result.code, signal: result.signal }).toEqual({ code: 78, signal: null });
    expect(result.stdout).toBe('');
    const lines = result.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(new RegExp(`^roost: configuration error: ${variable}: \\S`));
    // The message names the problem, never a secret it was given.
    expect(result.stderr).not.toContain('hunter2');
    expect(result.stderr).not.toContain('short-secret');
    expect(existsSync(dataDir)).toBe(false);
  });

  it('a valid configuration gets past validation (and fails later, on the closed database port, with exit 1)', async () => {
    // No start-up wait for the unreachable database (ROOST_DB_STARTUP_WAIT_MS=0): fail at once.
    const result = await run({
      ...shared(),
      ROOST_ROLE: 'api',
      ROOST_DATA_DIR: dataDir,
      ROOST_LOG_LEVEL: 'silent',
      ROOST_DB_STARTUP_WAIT_MS: '0',
      PORT: String(await freePort()),
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^roost: failed to start: /);
    expect(result.stderr).not.toContain('configuration error');
    expect(result.stderr).not.toContain('hunter2');
  });

  it('start-up waits for an unreachable Postgres up to ROOST_DB_STARTUP_WAIT_MS (retrying), then exits 1', async () => {
    const started = Date.now();
    const result = await run({
      ...shared(),
      ROOST_ROLE: 'api',
      ROOST_DATA_DIR: dataDir,
      ROOST_LOG_LEVEL: 'silent',
      ROOST_DB_STARTUP_WAIT_MS: '1500',
      PORT: String(await freePort()),
    });
    expect(result.code).toBe(1);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_000);
    expect(result.stderr).toMatch(/^roost: failed to start: /);
  });
});
