import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

/**
 * A short `npm run chaos` (chaos/src/main.ts): about a minute of load on 2 api + 2 gateway + 2
 * worker processes with a private Postgres and Redis, at least one fault of each kind (kill -9 of
 * an api, a gateway and a worker; Redis and Postgres restarts), then the checker. The run must exit
 * 0: nothing lost, duplicated or half-written, every listener and schedule exact, and the system
 * recovered by itself. The 10-minute run is `npm run chaos` by hand.
 */

jest.setTimeout(240_000);

const RUNNER = resolve(__dirname, '../../dist/chaos/src/main.js');

test('a one-minute chaos run with every fault kind keeps every invariant', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'roost-chaos-smoke-'));
  const json = join(dir, 'chaos.json');
  try {
    const started = Date.now();
    const output: string[] = [];
    const code = await new Promise<number | null>((done, fail) => {
      const child = spawn(process.execPath, [RUNNER, '--json', json], {
        env: {
          PATH: process.env.PATH ?? '',
          HOME: process.env.HOME ?? '',
          ROOST_CHAOS_SECONDS: '60',
          ROOST_CHAOS_FAULT_INTERVAL_S: '6',
          ROOST_CHAOS_RATE: '30',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      child.stdout.on('data', (chunk: Buffer) => output.push(chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => output.push(chunk.toString()));
      child.once('error', fail);
      child.once('exit', (exitCode) => done(exitCode));
    });
    const text = output.join('');
    console.log(`chaos smoke: exit ${code} after ${Math.round((Date.now() - started) / 1000)} s\n${text.slice(text.indexOf('Roost chaos:'))}`);
    if (code !== 0) throw new Error(`chaos run exited ${code}:\n${text.slice(-8_000)}`);
    const report = JSON.parse(readFileSync(json, 'utf8'));
    expect(report.ok).toBe(true);
    for (const kind of ['kill-api', 'kill-gateway', 'kill-worker', 'restart-redis', 'restart-postgres']) {
      expect({ kind, count: report.faults.by_kind[kind] }).toEqual({ kind, count: expect.any(Number) });
      expect(report.faults.by_kind[kind]).toBeGreaterThanOrEqual(1);
    }
    expect(report.invariants).toMatchObject({ lost: 0, duplicated: 0, half_written: 0 });
    expect(report.listeners).toMatchObject({ missing: 0, duplicated: 0 });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
