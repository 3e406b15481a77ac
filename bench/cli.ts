import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createAgent, percentile, round, scratchDatabase, standaloneCli, startOperatorProcess } from './support';

/**
 * `npm run bench -- cli`: wall time of whole `roost` processes, 30 runs each after 3 warm-ups:
 * `roost send` (one envelope, to an agent nobody reads), and `roost hook` with nothing new, in a
 * worktree with the mailbox installed and without one; each for the repository's CLI (dist/apps/cli)
 * and, `*_bundle`, for the packed `@roost/cli` (its esbuild bundle). `node_baseline` is `node -e 0`
 * on the same machine, the floor every figure includes. Uses DATABASE_URL when set, else the
 * embedded PGlite.
 */

const CLI = join(__dirname, '..', 'apps', 'cli', 'src', 'main.js');
const RUNS = 30;
const WARMUP = 3;

function run(
  args: string[],
  env: Record<string, string>,
  cwd: string,
): Promise<{ ms: number; code: number | null; out: string }> {
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

interface Case {
  name: string;
  args: string[];
  cwd: string;
  check?: (out: string) => boolean;
}

/**
 * Runs the cases interleaved (one of each per round), so a burst of load on the machine weighs on
 * every case alike; each figure also gets its distance from the `node -e 0` baseline.
 */
async function measureAll(cases: Case[], env: Record<string, string>): Promise<Record<string, Record<string, number>>> {
  const times = new Map<string, number[]>(cases.map((c) => [c.name, []]));
  for (let i = 0; i < WARMUP + RUNS; i++) {
    for (const c of cases) {
      const result = await run(c.args, env, c.cwd);
      if (result.code !== 0 || (c.check && !c.check(result.out)))
        throw new Error(`${c.args.join(' ')} failed (${result.code}): ${result.out}`);
      if (i >= WARMUP) times.get(c.name)!.push(result.ms);
    }
  }
  const out: Record<string, Record<string, number>> = {};
  for (const [name, list] of times) {
    list.sort((a, b) => a - b);
    out[name] = {
      median_ms: round(percentile(list, 50), 1),
      p95_ms: round(percentile(list, 95), 1),
      min_ms: round(list[0], 1),
      runs: RUNS,
    };
  }
  const base = out.node_baseline.median_ms;
  for (const [name, figures] of Object.entries(out))
    if (name !== 'node_baseline') figures.over_baseline_ms = round(figures.median_ms - base, 1);
  return out;
}

export async function cliScenario(): Promise<Record<string, unknown>> {
  const scratch = mkdtempSync(join(tmpdir(), 'roost-bench-cli-'));
  const database = process.env.DATABASE_URL ? await scratchDatabase('bench_cli') : undefined;
  const op = await startOperatorProcess(
    database
      ? { DATABASE_URL: database.url }
      : { ROOST_DATA_DIR: join(scratch, 'data'), DATABASE_URL: '', REDIS_URL: '' },
  );
  try {
    const alice = await createAgent(op, '@bench.alice');
    const bob = await createAgent(op, '@bench.bob');
    const carol = await createAgent(op, '@bench.carol');
    const bundle = standaloneCli(scratch);
    const env = {
      ...bundle.env,
      PATH: process.env.PATH ?? '',
      HOME: scratch,
      XDG_CONFIG_HOME: join(scratch, 'config'),
      XDG_STATE_HOME: join(scratch, 'state'),
    };
    mkdirSync(join(scratch, 'config', 'roost'), { recursive: true });
    writeFileSync(
      join(scratch, 'config', 'roost', 'config.json'),
      JSON.stringify({ default_profile: 'bench', profiles: { bench: { url: op.url } } }),
    );
    writeFileSync(
      join(scratch, 'config', 'roost', 'credentials.json'),
      JSON.stringify({
        profiles: { bench: { agents: { '@bench.alice': alice, '@bench.bob': bob, '@bench.carol': carol } } },
      }),
      { mode: 0o600 },
    );
    const plain = join(scratch, 'plain');
    const worktree = join(scratch, 'worktree');
    mkdirSync(plain);
    mkdirSync(worktree);

    // Mail Bob already has: shown by the first warm-up round, so measured hook runs find nothing new.
    for (let i = 0; i < 5; i++) {
      const sent = await run([CLI, '--as', '@bench.alice', 'send', '@bench.bob', '-t', `earlier ${i}`], env, plain);
      if (sent.code !== 0) throw new Error(`seeding failed: ${sent.out}`);
    }
    const install = await run([CLI, '--as', '@bench.bob', 'install'], env, worktree);
    if (install.code !== 0) throw new Error(`install failed: ${install.out}`);
    const figures = await measureAll(
      [
        { name: 'node_baseline', args: ['-e', '0'], cwd: plain },
        {
          name: 'send',
          args: [CLI, '--as', '@bench.alice', 'send', '@bench.carol', '-t', 'bench', '-s', 'bench'],
          cwd: plain,
          check: (out) => out.startsWith('sent '),
        },
        { name: 'hook_nothing_new', args: [CLI, 'hook', '--event', 'PostToolUse'], cwd: worktree },
        {
          name: 'hook_nothing_new_without_mailbox',
          args: [CLI, 'hook', '--as', '@bench.bob', '--event', 'PostToolUse'],
          cwd: plain,
        },
        {
          name: 'send_bundle',
          args: [bundle.main, '--as', '@bench.alice', 'send', '@bench.carol', '-t', 'bench', '-s', 'bench'],
          cwd: plain,
          check: (out) => out.startsWith('sent '),
        },
        { name: 'hook_nothing_new_bundle', args: [bundle.main, 'hook', '--event', 'PostToolUse'], cwd: worktree },
      ],
      env,
    );
    return {
      scenario: 'cli',
      ...figures,
      targets: { send_median_ms: 150, hook_median_ms: 80 },
      database: database ? 'postgres' : 'pglite',
    };
  } finally {
    await op.stop();
    await database?.drop();
    rmSync(scratch, { recursive: true, force: true });
  }
}
