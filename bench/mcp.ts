import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { RoostClient } from '#client';
import { createAgent, percentile, round, scratchDatabase, standaloneCli, startOperatorProcess } from './support';

// js-tiktoken's types resolve as ESM under node16; its CommonJS build is what runs (as in bench/triage.ts).
// eslint-disable-next-line @typescript-eslint/no-require-imports -- the CommonJS build, see above
const { getEncoding } = require('js-tiktoken') as {
  getEncoding: (name: 'o200k_base' | 'cl100k_base') => { encode(text: string): number[] };
};

/**
 * `npm run bench -- mcp`: what the MCP server costs an agent.
 * - `tool_list_tokens`: the whole `tools/list` result (names, descriptions, input schemas) as JSON,
 *   with the triage bench's tokenizers (o200k_base, cl100k_base); paid at every session start.
 * - `initialize_ms`: from spawning `roost mcp` to its `initialize` answer on stdout (20 runs after
 *   3 warm-ups), for the repository's CLI and (`initialize_bundle_ms`) the packed `@roost/cli` bundle.
 * - `wait_wake_ms`: from the `202` of a send (written after the commit) to the waiting
 *   `wait_for_mail` call's result, over stdio (gateway WebSocket) and HTTP (`/mcp`, frame bus).
 * Uses DATABASE_URL (and REDIS_URL) when set, else the embedded PGlite and in-process bus.
 */

const CLI = join(__dirname, '..', 'apps', 'cli', 'src', 'main.js');
const INIT_RUNS = 20;
const INIT_WARMUP = 3;
const WAKES = 60;
const WAKE_WARMUP = 5;
const TOKEN_BUDGET = 1200;

function nodeBaseline(): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, ['-e', '0'], { stdio: 'ignore' });
    child.on('error', reject);
    child.on('exit', () => resolve(performance.now() - t0));
  });
}

function initializeOnce(cli: string, env: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, [cli, 'mcp'], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('\n')) {
        const ms = performance.now() - t0;
        const reply = JSON.parse(out.slice(0, out.indexOf('\n'))) as { result?: { serverInfo?: { name?: string } } };
        child.stdin.end();
        if (reply.result?.serverInfo?.name !== 'roost') reject(new Error(`unexpected initialize answer: ${out}`));
        else resolve(ms);
      }
    });
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    child.on('exit', (code) => {
      if (!out.includes('\n')) reject(new Error(`roost mcp exited ${code}: ${err}`));
    });
    child.stdin.write(
      `${JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'bench', version: '1' } } })}\n`,
    );
  });
}

async function wakeLatencies(waiter: Client, sender: RoostClient, to: string): Promise<Record<string, number>> {
  const times: number[] = [];
  // Each wait starts from the cursor the previous one returned, so a send that beats the wait's
  // subscription on a loaded machine is still found (it then counts as ~0 ms, not as a lost wake).
  let cursor: Record<string, unknown> = {};
  for (let i = 0; i < WAKE_WARMUP + WAKES; i++) {
    const waiting = waiter.callTool({ name: 'wait_for_mail', arguments: { timeout_ms: 20_000, ...cursor } });
    let woke = 0;
    void waiting.then(() => (woke = performance.now()));
    await sleep(300); // the wait is subscribed by then on an idle machine
    await sender.send({ to: [to], content_parts: [{ type: 'text', text: `wake ${i}` }] });
    const accepted = performance.now();
    const result = (await waiting) as {
      isError?: boolean;
      structuredContent?: { envelope_headers?: unknown[]; next_cursor?: { created_at: number; envelope_id: string } };
    };
    const next = result.structuredContent?.next_cursor;
    if (result.isError || result.structuredContent?.envelope_headers?.length !== 1 || !next)
      throw new Error(`wait_for_mail: ${JSON.stringify(result)}`);
    cursor = { after_created_at: next.created_at, after_envelope_id: next.envelope_id };
    if (i >= WAKE_WARMUP) times.push(Math.max(0, woke - accepted));
  }
  times.sort((a, b) => a - b);
  return {
    p50_ms: round(percentile(times, 50), 1),
    p99_ms: round(percentile(times, 99), 1),
    max_ms: round(times[times.length - 1], 1),
    runs: WAKES,
  };
}

export async function mcpScenario(): Promise<Record<string, unknown>> {
  const scratch = mkdtempSync(join(tmpdir(), 'roost-bench-mcp-'));
  const database = process.env.DATABASE_URL ? await scratchDatabase('bench_mcp') : undefined;
  const op = await startOperatorProcess(
    database
      ? { DATABASE_URL: database.url, ROOST_REDIS_PREFIX: `bench-mcp-${process.pid}:` }
      : { ROOST_DATA_DIR: join(scratch, 'data'), DATABASE_URL: '', REDIS_URL: '' },
  );
  const clients: Client[] = [];
  try {
    const alice = await createAgent(op, '@bench.alice');
    const bob = await createAgent(op, '@bench.bob');
    const carol = await createAgent(op, '@bench.carol');
    const env = (agent: string, token: string) => ({
      PATH: process.env.PATH ?? '',
      HOME: scratch,
      XDG_CONFIG_HOME: join(scratch, 'config'),
      XDG_STATE_HOME: join(scratch, 'state'),
      ROOST_URL: op.url,
      ROOST_AGENT: agent,
      ROOST_TOKEN: token,
    });

    const stdio = new Client({ name: 'bench', version: '1' });
    await stdio.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [CLI, 'mcp'],
        env: env('@bench.bob', bob),
        stderr: 'inherit',
      }),
    );
    clients.push(stdio);
    const http = new Client({ name: 'bench', version: '1' });
    await http.connect(
      new StreamableHTTPClientTransport(new URL(`${op.url}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${carol}` } },
      }),
    );
    clients.push(http);

    const { tools } = await stdio.listTools();
    const listed = JSON.stringify({ tools });
    const tokens = {
      o200k_base: getEncoding('o200k_base').encode(listed).length,
      cl100k_base: getEncoding('cl100k_base').encode(listed).length,
    };

    // Interleaved with `node -e 0`, so load on the shared machine weighs on both alike.
    const bundle = standaloneCli(scratch);
    const initTimes: number[] = [];
    const bundleTimes: number[] = [];
    const baseTimes: number[] = [];
    for (let i = 0; i < INIT_WARMUP + INIT_RUNS; i++) {
      const ms = await initializeOnce(CLI, env('@bench.bob', bob));
      const bundled = await initializeOnce(bundle.main, { ...env('@bench.bob', bob), ...bundle.env });
      const base = await nodeBaseline();
      if (i >= INIT_WARMUP) {
        initTimes.push(ms);
        bundleTimes.push(bundled);
        baseTimes.push(base);
      }
    }
    initTimes.sort((a, b) => a - b);
    bundleTimes.sort((a, b) => a - b);
    baseTimes.sort((a, b) => a - b);

    const sender = new RoostClient({ url: op.url, token: alice });
    const wakeStdio = await wakeLatencies(stdio, sender, '@bench.bob');
    const wakeHttp = await wakeLatencies(http, sender, '@bench.carol');
    return {
      scenario: 'mcp',
      tools: tools.length,
      tool_list_tokens: tokens,
      tool_list_bytes: Buffer.byteLength(listed),
      initialize_ms: {
        median_ms: round(percentile(initTimes, 50), 1),
        p95_ms: round(percentile(initTimes, 95), 1),
        min_ms: round(initTimes[0], 1),
        node_baseline_median_ms: round(percentile(baseTimes, 50), 1),
        over_baseline_ms: round(percentile(initTimes, 50) - percentile(baseTimes, 50), 1),
        runs: INIT_RUNS,
      },
      initialize_bundle_ms: {
        median_ms: round(percentile(bundleTimes, 50), 1),
        p95_ms: round(percentile(bundleTimes, 95), 1),
        min_ms: round(bundleTimes[0], 1),
        over_baseline_ms: round(percentile(bundleTimes, 50) - percentile(baseTimes, 50), 1),
        runs: INIT_RUNS,
      },
      wait_wake_ms: { stdio: wakeStdio, http: wakeHttp },
      targets: { tool_list_tokens: TOKEN_BUDGET, initialize_ms: 200, wait_wake_p99_ms: 50 },
      database: database ? 'postgres' : 'pglite',
      bus: database && process.env.REDIS_URL ? 'redis' : 'in-process',
    };
  } finally {
    for (const client of clients) await client.close().catch(() => undefined);
    await op.stop();
    await database?.drop();
    rmSync(scratch, { recursive: true, force: true });
  }
}
