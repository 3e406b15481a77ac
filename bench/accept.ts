import { mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { EnvelopesRepository, migrate, openPglite, type EntryRow, type EnvelopeRow, type MailboxState } from '#db';
import { ulid } from '#domain';
import Redis from 'ioredis';
import { machineBusyShare, machineCpu, processCounters, serverCpu, serverCpuBetween } from './cluster';
import { firstSecondEnd, firstSecondProcesses, firstSecondStart } from './first-second';
import { pgbenchCeiling } from './pgbench';
import {
  createAgent,
  embeddedStore,
  firstSeconds,
  gcCounters,
  gcFields,
  HttpConnection,
  loadLoop,
  request,
  round,
  scratchDatabase,
  startOperatorProcess,
  summary,
  timedLoop,
  type OperatorProcess,
} from './support';

export const SENDERS = 32;
/**
 * An ordinary 1 KB paragraph of English (177 words, 135 distinct), for `ROOST_BENCH_TEXT=prose`:
 * what full-text indexing costs on real text (Postgres's parser: ~130 µs per KB of prose, against
 * ~25 µs for the default text's one long run of `x`).
 */
export const PROSE =
  "Hi team, quick status update on the migration work before tomorrow's review. The import job finished overnight without errors, and I checked the row counts against the source tables: they match for every table except audit events, where we are missing roughly two thousand rows from the first week of March. I think those were written while the old service was still running in parallel, so they never reached the export. Could someone with access to the legacy cluster confirm whether the nightly backup from that week still exists? If it does, I can replay just those rows and we are done. Otherwise we should tell the compliance folks now rather than later. Separately, the dashboard latency regression turned out to be the new search index: queries that used to hit the cache now scan a much larger range. I have a patch that narrows the range again; it needs one more reviewer. Finally, please remember that the staging environment will be down on Thursday afternoon for the network upgrade. Thanks, and ping me with questions.";
/** Which text the accept benches send (in their JSON lines). */
export const TEXT_KIND = process.env.ROOST_BENCH_TEXT === 'prose' ? 'prose' : 'x-run';
/** The text part of every accept bench envelope: ~1 KB; `ROOST_BENCH_TEXT=prose` for PROSE. */
export const TEXT = TEXT_KIND === 'prose' ? PROSE : 'x'.repeat(900) + ' the quick brown fox jumps over the lazy dog';
/** The body the ceilings store for each envelope: TEXT as the content parts' JSON. */
export const TEXT_BODY = JSON.stringify({ content_parts: [{ type: 'text', text: TEXT }] });

/** The envelope every accept bench sender posts (a new id each), to one recipient. */
export const acceptEnvelope = (to: string, subject: string): string =>
  JSON.stringify({ id: ulid(), to: [to], date_ms: Date.now(), subject, content_parts: [{ type: 'text', text: TEXT }] });
/** Requests of the first seconds are reported per second, then left out of the steady figures. */
const FIRST_SECONDS = 3;

/** `postgres`: one `ROOST_ROLE=all` process on Postgres (+ Redis when REDIS_URL is set). `embedded`: no DATABASE_URL (PGlite). */
export type AcceptMode = 'postgres' | 'embedded';
/** `light`: the bench's minimal HTTP/1.1 client. `node-http`: Node's `http` with a keep-alive agent (what most agents use). */
export type SenderClient = 'light' | 'node-http';

/**
 * The raw ceiling: transactions that each insert one ~1 KB envelope row and one mailbox row
 * through `pg`, at the same concurrency, on the same Postgres.
 */
async function ceiling(url: string, durationMs: number) {
  const pool = new pg.Pool({ connectionString: url, max: SENDERS });
  pool.on('error', () => undefined);
  await pool.query('CREATE TABLE bench_envelopes (id text PRIMARY KEY, body text NOT NULL)');
  await pool.query(
    'CREATE TABLE bench_mailbox (mailbox bigint NOT NULL, seq bigserial, envelope_id text NOT NULL, PRIMARY KEY (mailbox, seq))',
  );
  const result = await loadLoop(SENDERS, durationMs, async () => {
    const client = await pool.connect();
    try {
      const id = ulid();
      await client.query('BEGIN');
      await client.query('INSERT INTO bench_envelopes (id, body) VALUES ($1, $2)', [id, TEXT_BODY]);
      await client.query('INSERT INTO bench_mailbox (mailbox, envelope_id) VALUES (1, $1)', [id]);
      await client.query('COMMIT');
      return true;
    } finally {
      client.release();
    }
  });
  await pool.end();
  return summary(result);
}

/**
 * The embedded ceiling: a bare PGlite (the same package and version Roost embeds) on disk in this
 * process, inserting one ~1 KB envelope row and one mailbox row per envelope, for `durationMs` at
 * each of `perTransaction` envelopes per transaction. Returns envelopes/s for each. It syncs each
 * commit to disk as Roost's embedded database does (DurableNodeFS), so the ratio compares like with
 * like.
 */
export async function pgliteCeiling(durationMs: number, perTransaction: readonly number[]): Promise<number[]> {
  const { PGlite } = await import('@electric-sql/pglite');
  const dir = mkdtempSync(join(tmpdir(), 'roost-bench-pglite-'));
  const { DurableNodeFS, durableStartParams } = await import('#db');
  // `as never`: this dynamic import types PGlite from its ESM build, DurableNodeFS from its CJS one.
  const db = new PGlite({ fs: new DurableNodeFS(join(dir, 'pgdata')) as never, startParams: durableStartParams() });
  try {
    await db.waitReady;
    await db.exec('CREATE TABLE bench_envelopes (id text PRIMARY KEY, body text NOT NULL)');
    await db.exec(
      'CREATE TABLE bench_mailbox (mailbox bigint NOT NULL, seq bigserial, envelope_id text NOT NULL, PRIMARY KEY (mailbox, seq))',
    );
    const rates: number[] = [];
    for (const size of perTransaction) {
      let envelopes = 0;
      const start = performance.now();
      while (performance.now() - start < durationMs) {
        await db.transaction(async (tx) => {
          for (let i = 0; i < size; i++) {
            const id = ulid();
            await tx.query('INSERT INTO bench_envelopes (id, body) VALUES ($1, $2)', [id, TEXT_BODY]);
            await tx.query('INSERT INTO bench_mailbox (mailbox, envelope_id) VALUES (1, $1)', [id]);
          }
        });
        envelopes += size;
      }
      rates.push(round(envelopes / ((performance.now() - start) / 1000), 1));
    }
    return rates;
  } finally {
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A counter's value (a labelled series named with its labels) in a Prometheus text exposition; 0 when absent. */
export function counter(text: string, name: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? 0 : Number(line.slice(name.length + 1));
}

/** One sender: posts an envelope body with its token, resolves with the HTTP status. */
type Sender = (token: string, body: string) => Promise<number>;

function senders(client: SenderClient, nodes: readonly OperatorProcess[]): { send: Sender[]; close(): void } {
  if (client === 'node-http') {
    return {
      send: Array.from(
        { length: SENDERS },
        (_, i) => async (token: string, body: string) =>
          (await request(nodes[i % nodes.length].url, 'POST', '/messages', token, body)).status,
      ),
      close: () => undefined,
    };
  }
  const connections = Array.from({ length: SENDERS }, (_, i) => new HttpConnection(nodes[i % nodes.length].url));
  return {
    send: connections.map(
      (connection) => async (token: string, body: string) =>
        (await connection.request('POST', '/messages', token, body)).status,
    ),
    close: () => connections.forEach((connection) => connection.close()),
  };
}

export interface AcceptOptions {
  mode?: AcceptMode;
  client?: SenderClient;
  extraEnv?: Record<string, string>;
  label?: string;
  /** Recipients' mailboxes: sender i posts to inbox i mod `inboxes` (default 1: every sender to one). */
  inboxes?: number;
  /**
   * The split topology (Postgres only, needs REDIS_URL): the senders post to `ROOST_ROLE=api`
   * processes, and one `ROOST_ROLE=gateway` process runs beside them, as in a cluster (it holds no
   * sockets here: an accept needs no gateway, its frames go to the Redis streams either way).
   */
  split?: boolean;
}

/**
 * Policy churn beside the senders: one more agent blocks and unblocks a handle, `perS` changes a
 * second (each moves the policy epoch that kept sender lookups are checked against). Stops with
 * `stop()`, resolving with the changes made.
 */
function churnPolicy(node: OperatorProcess, token: string, perS: number): { stop(): Promise<number> } {
  let running = true;
  let changes = 0;
  const loop = (async () => {
    const started = performance.now();
    while (running) {
      const block = changes % 2 === 0;
      await request(
        node.url,
        block ? 'POST' : 'DELETE',
        block ? '/agents/me/blocks' : `/agents/me/blocks/${encodeURIComponent('@bench.inbox')}`,
        token,
        block ? JSON.stringify({ handle: '@bench.inbox' }) : undefined,
      ).catch(() => undefined);
      changes++;
      const due = started + (changes * 1000) / perS;
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, due - performance.now())));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return changes;
    },
  };
}

/**
 * 32 senders post ~1 KB envelopes to one recipient (or, with `inboxes`, sender i to inbox i mod N) on a fresh operator with new agents, from the
 * very first request: the first FIRST_SECONDS seconds are reported second by second, the rest as
 * the steady figures. Options: ROOST_BENCH_SECONDS (default 20, steady part); ROOST_BENCH_APIS
 * (default 1, postgres mode only): operator processes sharing the database, sender i posting to
 * process i mod N.
 */
export async function acceptScenario(options: AcceptOptions = {}): Promise<Record<string, unknown>> {
  const mode = options.mode ?? 'postgres';
  const client = options.client ?? 'light';
  const extraEnv = options.extraEnv ?? {};
  const inboxes = Math.max(1, Math.min(SENDERS, options.inboxes ?? 1));
  const inboxOf = (w: number) => (w % inboxes === 0 ? '@bench.inbox' : `@bench.inbox${w % inboxes}`);
  const seconds = Number(process.env.ROOST_BENCH_SECONDS ?? 20);
  const loadBefore = round(loadavg()[0]);
  const apis = mode === 'embedded' ? 1 : Math.max(1, Number(process.env.ROOST_BENCH_APIS ?? 1));
  const split = options.split === true;
  if (split && (mode === 'embedded' || !process.env.REDIS_URL))
    throw new Error('the split accept runs on Postgres + Redis: set DATABASE_URL and REDIS_URL');
  const roleEnv: Record<string, string> = split ? { ROOST_ROLE: 'api' } : {};
  const database = mode === 'postgres' ? await scratchDatabase('roost_bench') : undefined;
  const embedded = mode === 'embedded' ? embeddedStore() : undefined;
  const baseEnv: Record<string, string> = database ? { DATABASE_URL: database.url } : embedded!.env;
  // Every process started, stopped in `finally` whatever fails, a start-up included.
  const started: OperatorProcess[] = [];
  const start = async (env: Record<string, string>): Promise<OperatorProcess> => {
    const node = await startOperatorProcess(env);
    started.push(node);
    return node;
  };
  let clients: ReturnType<typeof senders> | undefined;
  try {
    // pgbench runs before the operator's load and again after it: this machine's speed drifts over
    // tens of seconds (the same CPU loop takes 410-600 ms from one minute to the next), and one
    // reading taken after the load alone moved the ratio by as much as the load's own spread.
    const pgbenchBefore = database ? await pgbenchCeiling(database.url, SENDERS, seconds, TEXT_BODY) : undefined;
    const op = await start({ ...baseEnv, ...roleEnv, ...extraEnv });
    // One after another: a start that fails leaves none still starting when `finally` stops them.
    const nodes = [op];
    for (let i = 1; i < apis; i++)
      nodes.push(await start({ ...baseEnv, ...roleEnv, ROOST_ADMIN_TOKEN: op.adminToken, ...extraEnv }));
    // Started after the first api, which applies the migrations.
    const gateway = split
      ? await start({ ...baseEnv, ROOST_ROLE: 'gateway', ROOST_ADMIN_TOKEN: op.adminToken, ...extraEnv })
      : undefined;
    clients = senders(client, nodes);
    const post = clients.send;
    for (let i = 0; i < inboxes; i++) await createAgent(op, inboxOf(i));
    const tokens = await Promise.all(Array.from({ length: SENDERS }, (_, i) => createAgent(op, `@bench.sender${i}`)));
    const churnPerS = Number(process.env.ROOST_BENCH_POLICY_CHURN_PER_S ?? 0);
    const churner = churnPerS > 0 ? await createAgent(op, '@bench.churner') : undefined;
    const envelopeBody = (w = 0) => acceptEnvelope(inboxOf(w), `bench ${randomBytes(3).toString('hex')}`);
    const send = async (w: number) => (await post[w](tokens[w], envelopeBody(w))) === 202;
    const before = await Promise.all(
      nodes.map((n) =>
        request(n.url, 'GET', '/metrics', undefined)
          .then((r) => r.text)
          .catch(() => ''),
      ),
    );
    const gcBefore = await Promise.all(nodes.map((n) => gcCounters(n.child.pid)));
    const cpuBefore = await Promise.all(nodes.map((n) => n.cpuMs()));
    const gatewayCpuBefore = gateway ? await gateway.cpuMs() : undefined;
    // Where the machine's CPU goes during the load: the operators' main threads, Postgres, Redis.
    const redis = database && process.env.REDIS_URL ? new Redis(process.env.REDIS_URL) : undefined;
    const serversBefore = database ? await serverCpu(database.url, redis) : undefined;
    const threadsBefore = nodes.map((n) => processCounters(n.child.pid ?? 0));
    // What each operator process did in the first second of load (first_second_processes).
    const pids = nodes.map((n) => n.child.pid);
    const firstBefore = await firstSecondStart(pids);
    const runStart = performance.now();
    const firstSecond = firstSecondEnd(pids, runStart);
    const machineBefore = machineCpu();
    const benchBefore = process.cpuUsage();
    const churn = churner ? churnPolicy(op, churner, churnPerS) : undefined;
    const samples = await timedLoop(SENDERS, (FIRST_SECONDS + seconds) * 1000, send);
    const policyChanges = (await churn?.stop()) ?? 0;
    const first = await firstSecond.read();
    const benchInRun = process.cpuUsage(benchBefore);
    const machineAfter = machineCpu();
    const runS = (performance.now() - runStart) / 1000;
    const mainThreadS = nodes.reduce(
      (sum, n, i) => sum + processCounters(n.child.pid ?? 0).mainThreadS - threadsBefore[i].mainThreadS,
      0,
    );
    const serversAfter = database ? await serverCpu(database.url, redis) : undefined;
    redis?.disconnect();
    const servers = serversBefore && serversAfter ? serverCpuBetween(serversBefore, serversAfter) : undefined;
    const cpuInRunMs = (await Promise.all(nodes.map((n) => n.cpuMs()))).reduce(
      (sum, ms, i) => sum + ms - cpuBefore[i],
      0,
    );
    const gcAfter = await Promise.all(nodes.map((n) => gcCounters(n.child.pid)));
    const after = await Promise.all(
      nodes.map((n) =>
        request(n.url, 'GET', '/metrics', undefined)
          .then((r) => r.text)
          .catch(() => ''),
      ),
    );
    // Whole run, every process: database statements and (embedded) WAL fsyncs per accepted envelope.
    const delta = (name: string) =>
      nodes.reduce((sum, _, i) => sum + counter(after[i], name) - counter(before[i], name), 0);
    const accepted = delta('roost_accept_batch_envelopes_sum');
    const perEnvelope = (name: string) => (accepted > 0 ? round(delta(name) / accepted, 3) : null);
    // Mean time per envelope inside the operator, by stage (whole run).
    const meanMs = (metric: string, labels: string) => {
      const count = delta(`${metric}_count{${labels}}`);
      return count > 0 ? round((delta(`${metric}_sum{${labels}}`) / count) * 1000, 2) : null;
    };
    const processed = samples.latencies.length;
    const cpuMsPerEnvelope = (seconds: number | null) =>
      seconds !== null && processed > 0 ? round((seconds * 1000) / processed, 3) : null;
    const roost = summary(samples.after(FIRST_SECONDS * 1000));
    const cpuMs = await Promise.all(nodes.map((n) => n.cpuMs()));
    const gatewayCpuMs = gateway ? await gateway.cpuMs() : undefined;
    await Promise.all(started.map((n) => n.stop()));
    const result: Record<string, unknown> = {
      scenario: options.label ?? `accept-${mode}`,
      load_1m_before: loadBefore,
      mode:
        mode === 'embedded'
          ? 'embedded PGlite, ROOST_ROLE=all'
          : split
            ? `split: ${nodes.length} ROOST_ROLE=api + 1 ROOST_ROLE=gateway on Postgres + Redis`
            : `ROOST_ROLE=all on Postgres${process.env.REDIS_URL ? ' + Redis' : ''}`,
      client,
      inboxes,
      api_processes: nodes.length,
      senders: SENDERS,
      seconds,
      envelope_bytes: envelopeBody().length,
      text: TEXT_KIND,
      envelopes_per_s: roost.per_s,
      p50_ms: roost.p50_ms,
      p99_ms: roost.p99_ms,
      failed: roost.failed,
      first_seconds: firstSeconds(samples, FIRST_SECONDS),
      first_second_processes: firstSecondProcesses(
        nodes.map((_, i) => (nodes.length === 1 && !split ? 'all' : `api${i}`)),
        firstBefore,
        first,
      ),
      statements_per_envelope: perEnvelope('roost_db_query_duration_seconds_count'),
      batches_per_envelope: perEnvelope('roost_accept_batch_envelopes_count'),
      lock_fallbacks_per_envelope: perEnvelope('roost_accept_lock_fallbacks_total'),
      kept_lookups_per_envelope: perEnvelope('roost_auth_kept_lookups_total'),
      policy_stale_per_envelope: perEnvelope('roost_accept_policy_stale_total'),
      policy_changes_per_s: round(policyChanges / (FIRST_SECONDS + seconds), 1),
      ...(mode === 'embedded' ? { wal_syncs_per_envelope: perEnvelope('roost_db_syncs_total{kind="wal"}') } : {}),
      operator_cpu_s: round(cpuMs.reduce((a, b) => a + b, 0) / 1000, 1),
      // Split: the idle gateway's CPU from the load's start to the metrics read after it (it holds no
      // partition, so it reads none).
      ...(gatewayCpuMs !== undefined && gatewayCpuBefore !== undefined
        ? { gateway_cpu_s_in_run: round((gatewayCpuMs - gatewayCpuBefore) / 1000, 2) }
        : {}),
      bench_cpu_s: round(process.cpuUsage().user / 1e6 + process.cpuUsage().system / 1e6, 1),
      // CPU per accepted envelope over the whole load (first seconds included): far less sensitive to
      // the machine's load than the rates, so comparable between runs on a busy machine.
      operator_cpu_ms_per_envelope: cpuMsPerEnvelope(cpuInRunMs / 1000),
      // Same span (first seconds included), from the operators' own GC statistics (bench/gc-probe.ts).
      ...gcFields(gcBefore, gcAfter, processed),
      bench_cpu_ms_per_envelope: cpuMsPerEnvelope((benchInRun.user + benchInRun.system) / 1e6),
      // The operators' main threads (JavaScript, and the syscalls it makes): the share of the run
      // each was on a CPU, and its CPU per envelope; the rest of operator_cpu is V8's helper threads.
      operator_main_thread_busy: round(mainThreadS / runS / nodes.length, 2),
      operator_main_thread_cpu_ms_per_envelope: cpuMsPerEnvelope(mainThreadS),
      postgres_backends_cpu_ms_per_envelope: cpuMsPerEnvelope(servers?.postgres ?? null),
      redis_server_cpu_ms_per_envelope: cpuMsPerEnvelope(redis ? (servers?.redis ?? null) : null),
      // Server side, per envelope: the whole POST, the wait for a batch, the batch's statement.
      server_ms_mean: meanMs('roost_http_request_duration_seconds', 'route="/messages",method="POST"'),
      queue_ms_mean: meanMs('roost_accept_stage_seconds', 'stage="queue"'),
      write_ms_mean: meanMs('roost_accept_stage_seconds', 'stage="write"'),
    };
    // Whether the cores were the limit: the machine's share of CPU time not idle in the run, and the
    // rate at which the CPU per envelope of the processes measured (operators, Postgres backends,
    // Redis, this bench) would keep every core busy. Postgres's WAL writer and the kernel's own
    // work are not in the sum, so the real bound is lower.
    const cpuPerEnvelope = [
      result.operator_cpu_ms_per_envelope,
      result.postgres_backends_cpu_ms_per_envelope,
      result.redis_server_cpu_ms_per_envelope,
      result.bench_cpu_ms_per_envelope,
    ].reduce<number>((sum, ms) => sum + (typeof ms === 'number' ? ms : 0), 0);
    const cpuBound = cpuPerEnvelope > 0 ? (availableParallelism() * 1000) / cpuPerEnvelope : null;
    Object.assign(result, {
      machine_cpu_busy: round(machineBusyShare(machineBefore, machineAfter), 2),
      cpu_ms_per_envelope_measured: round(cpuPerEnvelope, 3),
      cpu_bound_envelopes_per_s: cpuBound === null ? null : Math.round(cpuBound),
    });
    if (database) {
      const raw = await ceiling(database.url, seconds * 1000);
      Object.assign(result, {
        ceiling: 'node pg, 32 clients, 1 envelope + 1 mailbox row per transaction',
        ceiling_per_s: raw.per_s,
        ceiling_p50_ms: raw.p50_ms,
        ceiling_p99_ms: raw.p99_ms,
        ratio: round(roost.per_s / raw.per_s, 3),
      });
      // The same two rows from pgbench (C, prepared statements), same concurrency and duration,
      // before and after the operator's load: the ratio is to their mean.
      const pgb = await pgbenchCeiling(database.url, SENDERS, seconds, TEXT_BODY);
      const tps = pgbenchBefore ? (pgbenchBefore.tps + pgb.tps) / 2 : pgb.tps;
      Object.assign(result, {
        pgbench_tps: round(tps, 1),
        pgbench_tps_before: pgbenchBefore?.tps ?? null,
        pgbench_tps_after: pgb.tps,
        pgbench_latency_avg_ms: pgb.latency_avg_ms,
        pgbench_failed: (pgbenchBefore?.failed ?? 0) + pgb.failed,
        pgbench_cpu_s: pgb.cpu_s,
        ratio_to_pgbench: round(roost.per_s / tps, 3),
        cpu_bound_ratio_to_pgbench: cpuBound === null ? null : round(cpuBound / tps, 3),
      });
    } else {
      const [one, batched] = await pgliteCeiling(Math.min(seconds, 10) * 1000, [1, 64]);
      Object.assign(result, {
        ceiling: 'bare PGlite on disk, fsync on as in Roost, 1 envelope + 1 mailbox row each',
        pglite_1_per_tx_per_s: one,
        pglite_64_per_tx_per_s: batched,
        ratio_to_64_per_tx: round(roost.per_s / batched, 3),
      });
    }
    result.load_1m_after = round(loadavg()[0]);
    return result;
  } finally {
    clients?.close();
    await Promise.all(started.map((n) => n.stop()));
    await database?.drop();
    embedded?.drop();
  }
}

/**
 * `accept-embedded-db`: the embedded accept path's database work alone, in CPU per envelope. The
 * operator's lock-free statement (`EnvelopesRepository.insertAllIfCurrent`, run as
 * `Database.prepared`) on a durable PGlite on disk with Roost's migrations, batches of 20 envelopes
 * of ~1 KB from 32 senders, spread over 32 recipients' mailboxes (`accept-embedded` commits ~20 per
 * batch, all to one recipient), one batch at a time. Process CPU over the batches, after 20 warm-up
 * batches: on a loaded machine it moves far less than wall time, so a change to the embedded
 * database layer can be judged in CPU per envelope.
 */
export async function acceptEmbeddedDbScenario(batches = Number(process.env.ROOST_BENCH_BATCHES ?? 200)) {
  const dir = mkdtempSync(join(tmpdir(), 'roost-bench-embedded-db-'));
  const database = await openPglite(dir);
  try {
    await migrate(database);
    await database.withSession((s) =>
      s.exec(`insert into agents (handle, owner, token_hash, policy, display_name, visibility, created_at, updated_at)
              select 'a' || g, 'o', 't' || g, 'open', 'A', 'public', 0, 0 from generate_series(1, ${SENDERS}) g;
              insert into mailboxes (agent_id) select id from agents;`),
    );
    const envelopes = new EnvelopesRepository(database);
    const states = new Map<number, MailboxState>();
    for (let id = 1; id <= SENDERS; id++) states.set(id, { agent_id: id, last_seq: 0, last_created_at: 0 });
    let n = 0;
    let now = Date.now();
    const run = async (count: number) => {
      for (let b = 0; b < count; b++) {
        const rows: EnvelopeRow[] = [];
        const entries: EntryRow[] = [];
        const touched = new Map<number, MailboxState>();
        const expected: number[] = [];
        for (let i = 0; i < 20; i++, n++, now++) {
          const to = 1 + ((n + 7) % SENDERS);
          const id = ulid();
          rows.push({
            id,
            sender_id: 1 + (n % SENDERS),
            created_at: now,
            received_ms: now,
            body: TEXT_BODY,
            header: '{}',
            recipients: [`a${to}`],
            self_addressed: false,
            search_text: `bench ${id}`,
            receipt_for: null,
            receipt_status: null,
            guard_override: null,
          });
          let state = touched.get(to);
          if (!state) {
            state = { ...states.get(to)! };
            touched.set(to, state);
            expected.push(state.last_seq);
          }
          state.last_seq++;
          state.last_created_at = now;
          entries.push({ mailbox_id: to, seq: state.last_seq, envelope_id: id, created_at: now, kind: 'to' });
        }
        const written = await envelopes.insertAllIfCurrent(rows, entries, [...touched.values()], expected);
        if (written !== 'written') throw new Error(`accept-embedded-db: batch ${written}`);
        for (const state of touched.values()) states.set(state.agent_id, state);
      }
    };
    await run(20);
    const load = loadavg()[0];
    const cpu = process.cpuUsage();
    const start = performance.now();
    await run(batches);
    const used = process.cpuUsage(cpu);
    const wallMs = performance.now() - start;
    return {
      scenario: 'accept-embedded-db',
      load_1m_before: round(load),
      batches,
      envelopes_per_batch: 20,
      cpu_ms_per_envelope: round((used.user + used.system) / 1000 / (batches * 20), 4),
      wall_ms_per_batch: round(wallMs / batches, 2),
      load_1m_after: round(loadavg()[0]),
    };
  } finally {
    await database.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
