import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { processCpuMs, round } from './support';

/**
 * The honest ceiling of the accept figures: `pgbench` (a C client, far cheaper per transaction than
 * any Node client) running transactions that insert one ~1 KB envelope row and one mailbox row,
 * `clients` connections, on the Postgres of `url`, for `seconds`. Needs `pgbench` on PATH (Debian:
 * postgresql-client or postgresql-contrib). Returns its tps, average latency and its own CPU.
 */
export async function pgbenchCeiling(url: string, clients: number, seconds: number, body: string) {
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await admin.query('CREATE TABLE IF NOT EXISTS pgbench_envelopes (id text PRIMARY KEY, body text NOT NULL)');
    await admin.query(
      'CREATE TABLE IF NOT EXISTS pgbench_mailbox (mailbox bigint NOT NULL, seq bigserial, envelope_id text NOT NULL, PRIMARY KEY (mailbox, seq))',
    );
  } finally {
    await admin.end();
  }
  const dir = mkdtempSync(join(tmpdir(), 'roost-bench-pgbench-'));
  const script = join(dir, 'accept.sql');
  const literal = `'${body.replace(/'/g, "''")}'`;
  writeFileSync(
    script,
    [
      'BEGIN;',
      `INSERT INTO pgbench_envelopes (id, body) VALUES (gen_random_uuid()::text, ${literal}) RETURNING id AS env_id \\gset`,
      'INSERT INTO pgbench_mailbox (mailbox, envelope_id) VALUES (1, :env_id);',
      'END;',
      '',
    ].join('\n'),
  );
  try {
    const args = ['-n', '-M', 'prepared', '-c', String(clients), '-j', '2', '-T', String(seconds), '-f', script, url];
    const child = spawn('pgbench', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
    // Its CPU from /proc while it runs (a child's rusage is not exposed to Node): the last reading.
    let cpuMs = 0;
    const sampler = setInterval(() => {
      void processCpuMs(child.pid).then((ms) => (cpuMs = Math.max(cpuMs, ms)));
    }, 250);
    const code = await new Promise<number | null>((resolve, reject) => {
      child.once('error', reject);
      child.once('exit', resolve);
    });
    clearInterval(sampler);
    const tps = /tps = ([\d.]+) \(without initial connection time\)/.exec(out)?.[1];
    const latency = /latency average = ([\d.]+) ms/.exec(out)?.[1];
    const failed = /number of failed transactions: (\d+)/.exec(out)?.[1];
    if (code !== 0 || tps === undefined) throw new Error(`pgbench failed (${code}): ${out.slice(-500)}`);
    return {
      tps: round(Number(tps), 1),
      latency_avg_ms: latency === undefined ? null : round(Number(latency)),
      failed: failed === undefined ? 0 : Number(failed),
      cpu_s: round(cpuMs / 1000, 1),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
