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
 * - `initialize_ms`: from spawning `roost mcp` to its `initialize` answer on stdout, and
 *   (`tools_list_*`) to the answer of the `tools/list` sent right after it (20 runs after 3 warm-ups),
 *   for the repository's CLI and (`initialize_bundle_ms`) the packed `@roost/cli` bundle, with its
 *   code cache and (`initialize_bundle_cold_ms`) without. `node_baseline_ms`: `node -e 0` spawned
 *   the same way (same env, piped stdio) to its exit, interleaved.
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

/** `node -e 0` spawned as `roost mcp` is (same env, piped stdio), to its exit: the floor of every start-up figure. */
function nodeBaseline(env: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, ['-e', '0'], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    child.on('error', reject);
    child.on('exit', () => resolve(performance.now() - t0));
  });
}

const INITIALIZE = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'bench', version: '1' } },
};

/**
 * Spawns `roost mcp`, sends `initialize`, then (once answered) `notifications/initialized` and
 * `tools/list`: the times from the spawn to each answer on stdout. Resolves once the process has
 * exited (stdin closed), so its teardown never overlaps the next measurement.
 */
function startOnce(cli: string, env: Record<string, string>): Promise<{ initialize: number; toolsList: number }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, [cli, 'mcp'], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    let initialize = 0;
    let toolsList = 0;
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const lines = out.split('\n');
      if (initialize === 0 && lines.length > 1) {
        initialize = performance.now() - t0;
        const reply = JSON.parse(lines[0]) as { result?: { serverInfo?: { name?: string } } };
        if (reply.result?.serverInfo?.name !== 'roost') {
          child.kill();
          return reject(new Error(`unexpected initialize answer: ${out}`));
        }
        child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })}\n`);
        child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' })}\n`);
      }
      if (toolsList === 0 && lines.length > 2) {
        toolsList = performance.now() - t0;
        const reply = JSON.parse(lines[1]) as { result?: { tools?: unknown[] } };
        if (!reply.result?.tools?.length) {
          child.kill();
          return reject(new Error(`unexpected tools/list answer: ${out}`));
        }
        child.stdin.end();
      }
    });
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    child.on('error', reject);
    child.on('exit', (code) => {
      if (toolsList === 0) reject(new Error(`roost mcp exited ${code}: ${err}`));
      else resolve({ initialize, toolsList });
    });
    child.stdin.write(`${JSON.stringify(INITIALIZE)}\n`);
  });
}

/** Median, p95 and min of the times from the spawn to `initialize`, and the median to `tools/list`. */
function startFigures(runs: Array<{ initialize: number; toolsList: number }>, base: number): Record<string, number> {
  const init = runs.map((r) => r.initialize).sort((a, b) => a - b);
  const list = runs.map((r) => r.toolsList).sort((a, b) => a - b);
  return {
    median_ms: round(percentile(init, 50), 1),
    p95_ms: round(percentile(init, 95), 1),
    min_ms: round(init[0], 1),
    over_baseline_ms: round(percentile(init, 50) - base, 1),
    tools_list_median_ms: round(percentile(list, 50), 1),
    tools_list_p95_ms: round(percentile(list, 95), 1),
    runs: runs.length,
  };
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

    // Interleaved with `node -e 0`, so load on the shared machine weighs on all alike. The bundle
    // runs with its code cache (written by the first warm-up) and, `_cold`, without it (the first
    // run after an install or upgrade: NODE_DISABLE_COMPILE_CACHE).
    const bundle = standaloneCli(scratch);
    const agentEnv = env('@bench.bob', bob);
    const bundleEnv = { ...agentEnv, ...bundle.env };
    const repo: Array<{ initialize: number; toolsList: number }> = [];
    const bundled: Array<{ initialize: number; toolsList: number }> = [];
    const cold: Array<{ initialize: number; toolsList: number }> = [];
    const baseTimes: number[] = [];
    for (let i = 0; i < INIT_WARMUP + INIT_RUNS; i++) {
      const r = await startOnce(CLI, agentEnv);
      const b = await startOnce(bundle.main, bundleEnv);
      const c = await startOnce(bundle.main, { ...bundleEnv, NODE_DISABLE_COMPILE_CACHE: '1' });
      const base = await nodeBaseline(agentEnv);
      if (i >= INIT_WARMUP) {
        repo.push(r);
        bundled.push(b);
        cold.push(c);
        baseTimes.push(base);
      }
    }
    baseTimes.sort((a, b) => a - b);
    const base = percentile(baseTimes, 50);

    const sender = new RoostClient({ url: op.url, token: alice });
    const wakeStdio = await wakeLatencies(stdio, sender, '@bench.bob');
    const wakeHttp = await wakeLatencies(http, sender, '@bench.carol');
    return {
      scenario: 'mcp',
      tools: tools.length,
      tool_list_tokens: tokens,
      tool_list_bytes: Buffer.byteLength(listed),
      node_baseline_ms: { median_ms: round(base, 1), min_ms: round(baseTimes[0], 1), runs: INIT_RUNS },
      initialize_ms: startFigures(repo, base),
      initialize_bundle_ms: startFigures(bundled, base),
      initialize_bundle_cold_ms: startFigures(cold, base),
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
