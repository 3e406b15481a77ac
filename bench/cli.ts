import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createAgent, percentile, round, scratchDatabase, startOperatorProcess } from './support';

/**
 * `npm run bench -- cli`: wall time of whole `roost` processes, 30 runs each after 3 warm-ups:
 * `roost send` (one envelope), and `roost hook` with nothing new, in a worktree with the mailbox
 * installed and without one. `node_baseline` is `node -e 0` on the same machine, the floor every
 * figure includes. Uses DATABASE_URL when set, else the embedded PGlite.
 */

const CLI = join(__dirname, '..', 'apps', 'cli', 'src', 'main.js');
const RUNS = 30;
const WARMUP = 3;

function run(args: string[], env: Record<string, string>, cwd: string): Promise<{ ms: number; code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, args, { env, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ ms: performance.now() - t0, code, out }));
  });
}

async function measure(args: string[], env: Record<string, string>, cwd: string, check?: (out: string) => boolean) {
  const times: number[] = [];
  for (let i = 0; i < WARMUP + RUNS; i++) {
    const result = await run(args, env, cwd);
    if (result.code !== 0 || (check && !check(result.out))) throw new Error(`${args.join(' ')} failed (${result.code}): ${result.out}`);
    if (i >= WARMUP) times.push(result.ms);
  }
  times.sort((a, b) => a - b);
  return { median_ms: round(percentile(times, 50), 1), p95_ms: round(percentile(times, 95), 1), min_ms: round(times[0], 1), runs: RUNS };
}

export async function cliScenario(): Promise<Record<string, unknown>> {
  const scratch = mkdtempSync(join(tmpdir(), 'roost-bench-cli-'));
  const database = process.env.DATABASE_URL ? await scratchDatabase('bench_cli') : undefined;
  const op = await startOperatorProcess(database ? { DATABASE_URL: database.url } : { ROOST_DATA_DIR: join(scratch, 'data'), DATABASE_URL: '', REDIS_URL: '' });
  try {
    const alice = await createAgent(op, '@bench.alice');
    const bob = await createAgent(op, '@bench.bob');
    const env = {
      PATH: process.env.PATH ?? '',
      HOME: scratch,
      XDG_CONFIG_HOME: join(scratch, 'config'),
      XDG_STATE_HOME: join(scratch, 'state'),
    };
    mkdirSync(join(scratch, 'config', 'roost'), { recursive: true });
    writeFileSync(join(scratch, 'config', 'roost', 'config.json'), JSON.stringify({ default_profile: 'bench', profiles: { bench: { url: op.url } } }));
    writeFileSync(
      join(scratch, 'config', 'roost', 'credentials.json'),
      JSON.stringify({ profiles: { bench: { agents: { '@bench.alice': alice, '@bench.bob': bob } } } }),
      { mode: 0o600 },
    );
    const plain = join(scratch, 'plain');
    const worktree = join(scratch, 'worktree');
    mkdirSync(plain);
    mkdirSync(worktree);

    const baseline = await measure(['-e', '0'], env, plain);
    const send = await measure([CLI, '--as', '@bench.alice', 'send', '@bench.bob', '-t', 'bench', '-s', 'bench'], env, plain, (out) => out.startsWith('sent '));
    // Bob's unread mail was shown once by the warm-up runs; every measured run has nothing new.
    const hookPlain = await measure([CLI, 'hook', '--as', '@bench.bob', '--event', 'PostToolUse'], env, plain, (out) => out === '' || out.includes('Roost:'));
    const install = await run([CLI, '--as', '@bench.bob', 'install'], env, worktree);
    if (install.code !== 0) throw new Error(`install failed: ${install.out}`);
    const hookMailbox = await measure([CLI, 'hook', '--event', 'PostToolUse'], env, worktree);
    return {
      scenario: 'cli',
      node_baseline: baseline,
      send,
      hook_nothing_new: hookMailbox,
      hook_nothing_new_without_mailbox: hookPlain,
      targets: { send_median_ms: 150, hook_median_ms: 80 },
      database: database ? 'postgres' : 'pglite',
    };
  } finally {
    await op.stop();
    await database?.drop();
    rmSync(scratch, { recursive: true, force: true });
  }
}
