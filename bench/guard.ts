import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { scanContent, ulid } from '#domain';
import { ALL_CASES, CORPUS, corpusReport, DETECTOR_CODES } from './data/guard-corpus';
import {
  createAgent,
  loadLoop,
  request,
  round,
  scratchDatabase,
  startOperatorProcess,
  summary,
  type OperatorProcess,
} from './support';

/**
 * The content guard's price (EXTENSIONS.md §4, issue 5 benchmark): accept throughput and latency
 * with the guard on `warn` (the default) against `off`, in one operator process and one run.
 */

const SENDERS = 32;
/** Senders for the 16 KB latency comparison: one, so no request waits behind another. */
const LATENCY_SENDERS = 1;
/** ROOST_GUARD_LARGE_BYTES default: the 16 KB envelopes stay just under it, so both sizes are clean. */
const LARGE_BYTES = 16 * 1024;
/** Alternating warn/off slices cancel drift (table growth, JIT, autovacuum) between the two. */
const SLICES_PER_SIDE = 5;

const clean = (text: string) =>
  scanContent({ parts: [{ type: 'text', text }] }, { largeBytes: Number.MAX_SAFE_INTEGER }).length === 0;

/**
 * Text whose JSON string is about `bytes` UTF-8 bytes, made of `lines` in order (repeated as
 * needed); a line that would produce a finding next to the others is skipped, so the text is clean.
 */
function textOf(lines: readonly string[], bytes: number): string {
  const taken: string[] = [];
  let size = 2; // the string's quotes
  for (let i = 0; size < bytes; i++) {
    if (i > lines.length * 50) throw new Error('cannot build clean text');
    const line = lines[i % lines.length];
    if (!clean([...taken, line].join('\n'))) continue;
    taken.push(line);
    size += Buffer.byteLength(JSON.stringify(line)); // the escaped line without quotes, plus its escaped newline
  }
  let text = taken.join('\n');
  while (Buffer.byteLength(JSON.stringify(text)) > bytes) text = text.slice(0, -1);
  if (!clean(text)) throw new Error('bench text has a finding');
  return text;
}

/**
 * Two kinds of content. `docs`: the repository's README and accept service, line by line
 * (markdown prose and TypeScript, what agents mostly send). `near_miss`: the guard corpus's
 * negative cases, dense with the detectors' anchor words (rm, drop, key, token, password, prod, …)
 * so every rule that can run does run, yet nothing is found: the guard's worst clean case.
 */
function contentLines(): Record<'docs' | 'near_miss', string[]> {
  const root = join(__dirname, '..', '..');
  const file = (path: string) =>
    readFileSync(join(root, path), 'utf8')
      .split('\n')
      .filter((line) => line.trim() !== '');
  return {
    docs: [...file('README.md'), ...file('libs/core/src/accept.service.ts')],
    near_miss: ALL_CASES.filter((entry) => entry.codes.length === 0).map((entry) => entry.text),
  };
}

/** Mean microseconds of one `scanContent` over these parts, in this process. */
function scanMicros(parts: Array<{ type: string; text: string }>): number {
  const rounds = 2000;
  for (let i = 0; i < 200; i++) scanContent({ subject: 'bench', parts }, { largeBytes: LARGE_BYTES });
  const start = performance.now();
  for (let i = 0; i < rounds; i++) scanContent({ subject: 'bench', parts }, { largeBytes: LARGE_BYTES });
  return round(((performance.now() - start) * 1000) / rounds, 1);
}

interface Side {
  latencies: number[];
  elapsedMs: number;
  failures: number;
}

/** warn and off in alternating slices over `seconds` each, `concurrency` senders at a time; figures per side. */
async function compare(
  op: OperatorProcess,
  tokens: { warn: string[]; off: string[] },
  text: string,
  seconds: number,
  concurrency: number,
) {
  const body = (id: string) =>
    JSON.stringify({
      id,
      to: ['@bench.inbox'],
      date_ms: Date.now(),
      subject: `bench ${randomBytes(3).toString('hex')}`,
      content_parts: [{ type: 'text', text }],
    });
  const send = (side: 'warn' | 'off') => async (worker: number) => {
    const reply = await request(op.url, 'POST', '/messages', tokens[side][worker], body(ulid()));
    // A finding would change what is measured: the warn side must come back clean.
    return reply.status === 202 && !reply.text.includes('"warnings"');
  };
  // warm-up: connections, JIT, plans, on both sides
  await loadLoop(concurrency, 1000, send('warn'));
  await loadLoop(concurrency, 1000, send('off'));
  const sides: Record<'warn' | 'off', Side> = {
    warn: { latencies: [], elapsedMs: 0, failures: 0 },
    off: { latencies: [], elapsedMs: 0, failures: 0 },
  };
  const sliceMs = (seconds * 1000) / SLICES_PER_SIDE;
  for (let slice = 0; slice < SLICES_PER_SIDE; slice++) {
    // ABBA order: each side goes first as often as second.
    const order: Array<'warn' | 'off'> = slice % 2 === 0 ? ['warn', 'off'] : ['off', 'warn'];
    for (const side of order) {
      const result = await loadLoop(concurrency, sliceMs, send(side));
      sides[side].latencies.push(...result.latencies);
      sides[side].elapsedMs += result.elapsedMs;
      sides[side].failures += result.failures;
    }
  }
  const warn = summary({ ...sides.warn, latencies: sides.warn.latencies.sort((a, b) => a - b) });
  const off = summary({ ...sides.off, latencies: sides.off.latencies.sort((a, b) => a - b) });
  return { warn, off, envelope_bytes: Buffer.byteLength(body(ulid())) };
}

const figuresOf = (
  figures: { warn: ReturnType<typeof summary>; off: ReturnType<typeof summary>; envelope_bytes: number },
  text: string,
) => ({
  envelope_bytes: figures.envelope_bytes,
  warn_per_s: figures.warn.per_s,
  off_per_s: figures.off.per_s,
  warn_p50_ms: figures.warn.p50_ms,
  off_p50_ms: figures.off.p50_ms,
  warn_p99_ms: figures.warn.p99_ms,
  off_p99_ms: figures.off.p99_ms,
  failed: figures.warn.failed + figures.off.failed,
  scan_us: scanMicros([{ type: 'text', text }]),
});

/** Options: ROOST_BENCH_SECONDS (default 20) per side, size and content. */
export async function guardScenario(): Promise<Record<string, unknown>> {
  const seconds = Number(process.env.ROOST_BENCH_SECONDS ?? 20);
  const database = await scratchDatabase('roost_bench_guard');
  const op = await startOperatorProcess({ DATABASE_URL: database.url });
  try {
    await createAgent(op, '@bench.inbox');
    const warnTokens = await Promise.all(Array.from({ length: SENDERS }, (_, i) => createAgent(op, `@bench.warn${i}`)));
    // `off` as an agent override: the guard returns before scanning, the true zero-cost baseline.
    const offTokens = await Promise.all(
      Array.from({ length: SENDERS }, (_, i) => createGuardOffAgent(op, `@bench.off${i}`)),
    );
    const tokens = { warn: warnTokens, off: offTokens };

    const result: Record<string, unknown> = {
      scenario: 'guard',
      senders_1kb: SENDERS,
      senders_16kb: LATENCY_SENDERS,
      seconds_per_side: seconds,
    };
    const within: Record<string, boolean> = {};
    for (const [content, lines] of Object.entries(contentLines())) {
      // ~1 KB and ~16 KB envelopes; the 16 KB one stays under ROOST_GUARD_LARGE_BYTES (no `large` finding).
      const small = textOf(lines, 1000);
      const large = textOf(lines, LARGE_BYTES - 300);
      // Throughput at saturation (32 senders). Latency with one sender at a time: at saturation
      // every request queues behind the others, so p99 there measures lost throughput, not the
      // time the guard adds to one send.
      const kb1 = figuresOf(await compare(op, tokens, small, seconds, SENDERS), small);
      const kb16 = figuresOf(await compare(op, tokens, large, seconds, LATENCY_SENDERS), large);
      const costPct = round((1 - kb1.warn_per_s / kb1.off_per_s) * 100, 1);
      const p99DiffMs = round(kb16.warn_p99_ms - kb16.off_p99_ms, 2);
      const p50DiffMs = round(kb16.warn_p50_ms - kb16.off_p50_ms, 2);
      result[content] = {
        kb1,
        kb16,
        throughput_cost_pct_1kb: costPct,
        p99_diff_ms_16kb: p99DiffMs,
        p50_diff_ms_16kb: p50DiffMs,
      };
      within[content] = costPct <= 10 && p99DiffMs <= 2 && kb1.failed + kb16.failed === 0;
    }
    return { ...result, targets: { throughput_cost_pct_1kb: 10, p99_diff_ms_16kb: 2 }, within_targets: within };
  } finally {
    await op.stop();
    await database.drop();
  }
}

async function createGuardOffAgent(op: OperatorProcess, handle: string): Promise<string> {
  const reply = await request(
    op.url,
    'POST',
    '/_admin/agents',
    op.adminToken,
    JSON.stringify({ handle, policy: 'open', content_guard: 'off' }),
  );
  if (reply.status !== 201) throw new Error(`create ${handle}: ${reply.status} ${reply.text}`);
  return (JSON.parse(reply.text) as { token: string }).token;
}

/**
 * The corpus figures (issue 5): per detector, cases that must produce its code (positives) and
 * must not (negatives: its own near-misses plus every other table), how many were found, and the
 * false-positive rate on the negatives. Pure, no operator.
 */
export async function guardCorpusScenario(): Promise<Record<string, unknown>> {
  const report = corpusReport();
  const detectors: Record<string, unknown> = {};
  for (const code of DETECTOR_CODES) {
    const figures = report[code];
    detectors[code] = {
      table_positives: CORPUS[code].positives.length,
      table_negatives: CORPUS[code].negatives.length,
      positives: figures.positives,
      negatives: figures.negatives,
      detected: figures.detected,
      false_positives: figures.falsePositives,
      detection_rate: round(figures.detected / figures.positives, 4),
      false_positive_rate: round(figures.falsePositives / figures.negatives, 4),
    };
  }
  return { scenario: 'guard-corpus', cases: ALL_CASES.length, detectors };
}
