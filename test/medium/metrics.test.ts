import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { FrameBus } from '#bus';
import { ulid } from '#domain';
import { ConnectionsService } from '../../apps/gateway/src/connections.service';
import { RetentionProcessor } from '../../apps/worker/src/retention.processor';
import { freePort } from '../support/processes';
import { envelope, startOperator, type TestOperator } from '../support/operator';
import { testRedisUrl } from '../support/services';
import { connect, type ConnectOptions, type Listener } from '../support/ws';

/**
 * Every metric of libs/metrics/src/metrics.ts, read back from `/metrics` as Prometheus text after
 * the traffic that drives it: names, TYPE, label sets, and that counters and histograms move. One
 * operator on Postgres with Redis fan-out and BullMQ jobs (fast ticks), so the jobs, schedules and
 * retention run on their own; a second api-only operator whose Redis is a closed port drives the
 * Redis error counter. Finally, no label value anywhere may carry a handle, token or envelope id.
 *
 * Two faults are planted with spies, the way the push tests do: a lost publish (`FrameBus.publish`
 * resolves without publishing) for the gap and sweep backfills, and one rejected retention purge
 * for the job failure counter; the sweep itself is started through `onResync`, the hook the Redis
 * bus calls when its connection comes back.
 */

const TICK_MS = 400;

/** Every metric Roost defines, with its type and label names (libs/metrics/src/metrics.ts). */
const CATALOGUE: Record<string, { type: string; labels: string[] }> = {
  roost_http_requests_total: { type: 'counter', labels: ['route', 'method', 'status'] },
  roost_http_request_duration_seconds: { type: 'histogram', labels: ['route', 'method'] },
  roost_envelopes_accepted_total: { type: 'counter', labels: ['result'] },
  roost_envelope_recipients: { type: 'histogram', labels: [] },
  roost_accept_batch_envelopes: { type: 'histogram', labels: [] },
  roost_accept_lock_fallbacks_total: { type: 'counter', labels: [] },
  roost_accept_queue_expired_total: { type: 'counter', labels: [] },
  roost_accept_stage_seconds: { type: 'histogram', labels: ['stage'] },
  roost_mailbox_list_duration_seconds: { type: 'histogram', labels: ['direction'] },
  roost_db_pool_connections: { type: 'gauge', labels: ['state'] },
  roost_db_query_duration_seconds: { type: 'histogram', labels: [] },
  roost_db_syncs_total: { type: 'counter', labels: ['kind'] },
  roost_redis_errors_total: { type: 'counter', labels: ['component'] },
  roost_ws_connections: { type: 'gauge', labels: [] },
  roost_ws_frames_sent_total: { type: 'counter', labels: ['kind'] },
  roost_ws_replayed_frames_total: { type: 'counter', labels: [] },
  roost_ws_backfills_total: { type: 'counter', labels: ['cause'] },
  roost_ws_closed_total: { type: 'counter', labels: ['reason'] },
  roost_ws_handshakes_total: { type: 'counter', labels: ['outcome'] },
  roost_ws_replays: { type: 'gauge', labels: ['state'] },
  roost_rate_limited_total: { type: 'counter', labels: ['limit'] },
  // Moved by admin reads: test/medium/console-api.test.ts.
  roost_admin_reads_total: { type: 'counter', labels: ['route'] },
  roost_auth_unknown_token_hits_total: { type: 'counter', labels: [] },
  // Moved by kept sender lookups and policy changes under them: test/medium/kept-lookups.test.ts.
  roost_auth_kept_lookups_total: { type: 'counter', labels: [] },
  roost_accept_policy_stale_total: { type: 'counter', labels: [] },
  roost_stream_read_lag_seconds: { type: 'histogram', labels: [] },
  roost_commit_to_socket_seconds: { type: 'histogram', labels: [] },
  roost_receipts_total: { type: 'counter', labels: ['status'] },
  roost_guard_findings_total: { type: 'counter', labels: ['code', 'outcome'] },
  roost_job_duration_seconds: { type: 'histogram', labels: ['name'] },
  roost_job_failures_total: { type: 'counter', labels: ['name'] },
  roost_schedule_firings_total: { type: 'counter', labels: ['result'] },
  roost_schedule_lag_seconds: { type: 'gauge', labels: [] },
  roost_retention_purged_rows_total: { type: 'counter', labels: ['table'] },
  roost_ws_slow_consumer_closes_total: { type: 'counter', labels: [] },
  roost_build_info: { type: 'gauge', labels: ['version', 'node'] },
  roost_dependency_up: { type: 'gauge', labels: ['dependency'] },
  roost_stream_length: { type: 'gauge', labels: ['partition'] },
  roost_stream_lag_entries: { type: 'gauge', labels: ['partition'] },
  roost_jobs: { type: 'gauge', labels: ['queue', 'state'] },
};

// --- Prometheus text ---------------------------------------------------------------------------

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

interface Scrape {
  text: string;
  types: Map<string, string>;
  samples: Sample[];
}

const unescape = (value: string) => value.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));

/** Parse the text exposition format (0.0.4); throws on a line it cannot read. */
function parseExposition(text: string): Scrape {
  const types = new Map<string, string>();
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '') continue;
    if (line.startsWith('#')) {
      const type = /^# TYPE (\S+) (\S+)$/.exec(line);
      if (type) types.set(type[1], type[2]);
      else if (!/^# HELP \S+ /.test(line)) throw new Error(`unexpected comment line: ${line}`);
      continue;
    }
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: \d+)?$/.exec(line);
    if (!match) throw new Error(`unparsable sample line: ${line}`);
    const labels: Record<string, string> = {};
    const body = match[2] ?? '';
    const pair = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?/gy;
    let consumed = 0;
    for (let m = pair.exec(body); m !== null; m = pair.exec(body)) {
      labels[m[1]] = unescape(m[2]);
      consumed = pair.lastIndex;
    }
    if (consumed !== body.length) throw new Error(`unparsable labels: ${line}`);
    const raw = match[3];
    // Go's ParseFloat (Prometheus) reads NaN and Inf case-insensitively; prom-client writes "Nan".
    const value = /^[+-]?inf$/i.test(raw)
      ? raw.startsWith('-')
        ? -Infinity
        : Infinity
      : /^nan$/i.test(raw)
        ? NaN
        : Number(raw);
    if (Number.isNaN(value) && !/^nan$/i.test(raw)) throw new Error(`unparsable value: ${line}`);
    samples.push({ name: match[1], labels, value });
  }
  return { text, types, samples };
}

const matches = (sample: Sample, labels: Record<string, string>) =>
  Object.entries(labels).every(([key, value]) => sample.labels[key] === value);

/** Sum of the samples of `name` whose labels include `labels` (0 when there is none). */
function valueOf(scrape: Scrape, name: string, labels: Record<string, string> = {}): number {
  return scrape.samples.filter((s) => s.name === name && matches(s, labels)).reduce((sum, s) => sum + s.value, 0);
}

function samplesOf(scrape: Scrape, name: string, labels: Record<string, string> = {}): Sample[] {
  return scrape.samples.filter((s) => s.name === name && matches(s, labels));
}

/** The label-value sets seen for `label` on `name` (histograms: on `_count`). */
function labelValues(scrape: Scrape, name: string, label: string): string[] {
  const series = scrape.types.get(name) === 'histogram' ? `${name}_count` : name;
  return [...new Set(samplesOf(scrape, series).map((s) => s.labels[label]))].sort();
}

/** Label names of every sample of `name` (histogram buckets add `le`). */
function labelNamesOf(scrape: Scrape, name: string): Set<string> {
  const names = new Set<string>();
  const series = new Set([name, `${name}_bucket`, `${name}_sum`, `${name}_count`]);
  for (const sample of scrape.samples)
    if (series.has(sample.name)) for (const key of Object.keys(sample.labels)) names.add(key);
  return names;
}

// --- the test ----------------------------------------------------------------------------------

describe('metrics: every Roost metric on /metrics, moving with its traffic', () => {
  /** Before the operator (and its own Redis key prefix) exists: no stream entry is older. */
  const suiteStarted = Date.now();
  let op: TestOperator;
  let db: pg.Client;
  /** Every token, handle and envelope id the test made: none may appear in a label value. */
  const secrets = new Set<string>();
  const handles = new Set<string>();
  const envelopeIds = new Set<string>();
  const sockets: Listener[] = [];

  const scrape = async (target: TestOperator = op): Promise<Scrape> => {
    const reply = await target.client.get('/metrics');
    expect(reply.status).toBe(200);
    expect(reply.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    return parseExposition(reply.text);
  };

  /** Poll until `predicate` holds on a scrape; returns that scrape. */
  const until = async (
    what: string,
    predicate: (s: Scrape) => boolean,
    timeoutMs = 10_000,
    target: TestOperator = op,
  ): Promise<Scrape> => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const s = await scrape(target);
      if (predicate(s)) return s;
      if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
      await sleep(25);
    }
  };

  const agent = async (
    handle: string,
    fields: Record<string, unknown> = {},
  ): Promise<{ handle: string; token: string }> => {
    const token = await op.agent(handle, fields);
    secrets.add(token);
    handles.add(handle);
    return { handle, token };
  };

  const post = async (token: string, body: Record<string, unknown>) => {
    if (typeof body.id === 'string') envelopeIds.add(body.id);
    return op.client.post('/messages', body, token);
  };

  const send = async (token: string, to: string | string[], fields: Record<string, unknown> = {}) => {
    const reply = await post(token, envelope(to, fields));
    if (reply.status !== 202) throw new Error(`send: ${reply.status} ${reply.text}`);
    return reply.body as { id: string; created_at: number };
  };

  const open = async (token: string, options: ConnectOptions = {}) => {
    const listener = await connect(op.url, { token, ...options });
    sockets.push(listener);
    return listener;
  };

  beforeAll(async () => {
    op = await startOperator({
      env: {
        // Redis Streams fan-out and BullMQ jobs on the test Redis, under a prefix of our own.
        REDIS_URL: testRedisUrl(),
        ROOST_REDIS_PREFIX: `roost-test:${ulid()}:`,
        ROOST_RATE_LIMIT_PER_S: '0',
        ROOST_SCHEDULE_TICK_MS: String(TICK_MS),
        ROOST_RETENTION_INTERVAL_MS: '300',
        ROOST_SCHEDULE_MIN_INTERVAL_MS: '1000',
        ROOST_WS_PING_INTERVAL_MS: '200',
        // The sweep is started by hand (onResync) so the gap and sweep backfills stay apart.
        ROOST_WS_SWEEP_INTERVAL_MS: '3600000',
        // A small pool, so concurrent listings queue for a connection (the "waiting" gauge).
        ROOST_DB_POOL_SIZE: '2',
      },
    });
    secrets.add(op.adminToken);
    db = new pg.Client({ connectionString: op.config.databaseUrl! });
    await db.connect();
  });

  afterEach(() => {
    for (const socket of sockets.splice(0)) socket.close();
  });

  afterAll(async () => {
    await db?.end();
    await op?.close();
  });

  it('serves Prometheus text with HELP and TYPE for every Roost metric, with the declared labels, and the default process metrics', async () => {
    const s = await scrape();
    for (const [name, { type }] of Object.entries(CATALOGUE)) {
      expect({ name, type: s.types.get(name) }).toEqual({ name, type });
      expect(s.text).toContain(`# HELP ${name} `);
      expect(name).toMatch(/^roost_[a-z_]+$/);
    }
    // And no Roost metric that this test does not know about (a new one needs a line above).
    const roost = [...s.types.keys()].filter((name) => name.startsWith('roost_')).sort();
    expect(roost).toEqual(Object.keys(CATALOGUE).sort());
    expect(s.types.get('process_cpu_user_seconds_total')).toBe('counter');
    expect(s.types.get('nodejs_heap_size_used_bytes')).toBe('gauge');
  });

  it('HTTP: requests by route template, method and status, and durations by route template and method', async () => {
    const alice = await agent('@mh.alice');
    const bob = await agent('@mh.bob');
    const before = await scrape();
    const sent = await send(alice.token, bob.handle);
    expect((await op.client.get(`/messages/${sent.id}`, bob.token)).status).toBe(200);
    const unknown = ulid();
    envelopeIds.add(unknown);
    expect((await op.client.get(`/messages/${unknown}`, bob.token)).status).toBe(404);
    expect((await op.client.get(`/messages/${sent.id}`)).status).toBe(401);
    expect((await op.client.get(`/_admin/agents/${encodeURIComponent(bob.handle)}`, op.adminToken)).status).toBe(200);
    // Paths no route matches, carrying a handle and an id: they must not become label values.
    expect((await op.client.get(`/nowhere/${encodeURIComponent(bob.handle)}/${sent.id}`, alice.token)).status).toBe(
      404,
    );
    expect((await op.client.request('DELETE', `/mailbox/${sent.id}`, { token: alice.token })).status).toBe(404);
    const after = await scrape();

    const delta = (labels: Record<string, string>) =>
      valueOf(after, 'roost_http_requests_total', labels) - valueOf(before, 'roost_http_requests_total', labels);
    expect(delta({ route: '/messages', method: 'POST', status: '202' })).toBe(1);
    expect(delta({ route: '/messages/:id', method: 'GET', status: '200' })).toBe(1);
    expect(delta({ route: '/messages/:id', method: 'GET', status: '404' })).toBe(1);
    expect(delta({ route: '/messages/:id', method: 'GET', status: '401' })).toBe(1);
    expect(delta({ route: '/_admin/agents/:handle', method: 'GET', status: '200' })).toBe(1);
    // Unrouted requests share one label value, whatever their path.
    expect(delta({ route: 'unmatched', method: 'GET', status: '404' })).toBe(1);
    expect(delta({ route: 'unmatched', method: 'DELETE', status: '404' })).toBe(1);
    // Every route label is a registered template (or the catch-all), never a raw path.
    for (const route of labelValues(after, 'roost_http_requests_total', 'route')) {
      expect(route).toMatch(/^(\/[\w./:-]*|\*|unmatched)$/);
      expect(route).not.toMatch(/@|%40|[0-9A-HJKMNP-TV-Z]{26}/);
    }
    expect(labelNamesOf(after, 'roost_http_requests_total')).toEqual(new Set(['route', 'method', 'status']));

    const count = (route: string, method: string, s: Scrape) =>
      valueOf(s, 'roost_http_request_duration_seconds_count', { route, method });
    expect(count('/messages', 'POST', after) - count('/messages', 'POST', before)).toBe(1);
    expect(count('/messages/:id', 'GET', after) - count('/messages/:id', 'GET', before)).toBe(3);
    const sum = (s: Scrape) =>
      valueOf(s, 'roost_http_request_duration_seconds_sum', { route: '/messages', method: 'POST' });
    expect(sum(after)).toBeGreaterThan(sum(before));
    // Buckets: cumulative, ending in +Inf equal to the count.
    const buckets = samplesOf(after, 'roost_http_request_duration_seconds_bucket', {
      route: '/messages',
      method: 'POST',
    });
    expect(buckets.length).toBeGreaterThan(5);
    const inf = buckets.find((b) => b.labels.le === '+Inf')!;
    expect(inf.value).toBe(count('/messages', 'POST', after));
    for (let i = 1; i < buckets.length; i++) expect(buckets[i].value).toBeGreaterThanOrEqual(buckets[i - 1].value);
    expect(labelNamesOf(after, 'roost_http_request_duration_seconds')).toEqual(new Set(['route', 'method', 'le']));
  });

  it('accept: envelopes by result (stored, replay, refused), recipients per envelope, accept batch sizes', async () => {
    const alice = await agent('@ma.alice');
    const [bob, carol, dave] = await Promise.all([agent('@ma.bob'), agent('@ma.carol'), agent('@ma.dave')]);
    const before = await scrape();

    const three = envelope([bob.handle, carol.handle, dave.handle]);
    expect((await post(alice.token, three)).status).toBe(202);
    expect((await post(alice.token, three)).status).toBe(202); // an idempotent replay
    expect((await post(alice.token, envelope('@ma.nobody'))).status).toBe(404);
    expect((await post(alice.token, { ...envelope(bob.handle), content_parts: 'nope' })).status).toBe(400);
    expect((await post(alice.token, { ...three, subject: 'changed' })).status).toBe(409);
    const burst = await Promise.all(Array.from({ length: 24 }, () => post(alice.token, envelope(bob.handle))));
    expect(burst.map((r) => r.status)).toEqual(Array(24).fill(202));
    const after = await scrape();

    const delta = (name: string, labels: Record<string, string> = {}) =>
      valueOf(after, name, labels) - valueOf(before, name, labels);
    expect(delta('roost_envelopes_accepted_total', { result: 'stored' })).toBe(25);
    expect(delta('roost_envelopes_accepted_total', { result: 'replay' })).toBe(1);
    expect(delta('roost_envelopes_accepted_total', { result: 'refused' })).toBe(3);
    expect(delta('roost_envelopes_accepted_total', { result: 'failed' })).toBe(0);
    expect(labelValues(after, 'roost_envelopes_accepted_total', 'result')).toEqual(
      expect.arrayContaining(['refused', 'replay', 'stored']),
    );
    for (const result of labelValues(after, 'roost_envelopes_accepted_total', 'result'))
      expect(['stored', 'replay', 'refused', 'failed']).toContain(result);

    // Recipients: one envelope of 3 and 24 of 1.
    expect(delta('roost_envelope_recipients_count')).toBe(25);
    expect(delta('roost_envelope_recipients_sum')).toBe(27);
    expect(delta('roost_envelope_recipients_bucket', { le: '1' })).toBe(24);
    expect(delta('roost_envelope_recipients_bucket', { le: '5' })).toBe(25);

    // Batches: every job that reached the writer (25 stored, the replay and the 409 retry) is in
    // exactly one batch; 24 concurrent sends share batches, so there are fewer batches than jobs.
    expect(delta('roost_accept_batch_envelopes_sum')).toBe(27);
    expect(delta('roost_accept_batch_envelopes_count')).toBeGreaterThanOrEqual(4);
    expect(delta('roost_accept_batch_envelopes_count')).toBeLessThanOrEqual(27);
  });

  it('receipts by status; content guard findings by code and outcome (warned, blocked), never the matched text', async () => {
    const alice = await agent('@mg.alice');
    const bob = await agent('@mg.bob');
    const before = await scrape();
    const original = await send(alice.token, bob.handle);
    const receipt = await op.client.post(`/messages/${original.id}/receipts`, { status: 'accepted' }, bob.token);
    expect(receipt.status).toBe(201);
    expect(typeof receipt.body.id).toBe('string');
    envelopeIds.add(receipt.body.id);

    // A fake AWS access key in the subject and the body: warned by default, blocked by a policy.
    const key = `AKIA${ulid()
      .slice(10, 26)
      .replace(/[^A-Z0-9]/g, 'Q')}`;
    secrets.add(key);
    const leaky = (to: string) =>
      envelope(to, { subject: `creds ${key}`, content_parts: [{ type: 'text', text: `aws_access_key_id = ${key}` }] });
    const warned = await post(alice.token, leaky(bob.handle));
    expect(warned.status).toBe(202);
    expect(warned.body.warnings.map((w: { code: string }) => w.code)).toContain('secret');
    const strict = await agent('@mg.strict', { content_guard: 'block' });
    const blocked = await post(strict.token, leaky(bob.handle));
    expect(blocked.status).toBe(422);
    const after = await scrape();

    const delta = (name: string, labels: Record<string, string>) =>
      valueOf(after, name, labels) - valueOf(before, name, labels);
    expect(delta('roost_receipts_total', { status: 'accepted' })).toBe(1);
    expect(delta('roost_guard_findings_total', { code: 'secret', outcome: 'warned' })).toBe(1);
    expect(delta('roost_guard_findings_total', { code: 'secret', outcome: 'blocked' })).toBe(1);
    for (const code of labelValues(after, 'roost_guard_findings_total', 'code'))
      expect(['secret', 'destructive', 'production', 'credential_request', 'large']).toContain(code);
    for (const outcome of labelValues(after, 'roost_guard_findings_total', 'outcome'))
      expect(['warned', 'blocked', 'overridden']).toContain(outcome);
    expect(after.text).not.toContain(key);
  });

  it('mailbox listing duration by direction (in, out, both)', async () => {
    const alice = await agent('@ml.alice');
    const bob = await agent('@ml.bob');
    await send(alice.token, bob.handle);
    const before = await scrape();
    expect((await op.client.get('/mailbox', bob.token)).status).toBe(200);
    expect((await op.client.get('/mailbox?unread=true', bob.token)).status).toBe(200);
    expect((await op.client.get('/mailbox?direction=out', alice.token)).status).toBe(200);
    expect((await op.client.get('/mailbox?direction=both', alice.token)).status).toBe(200);
    expect((await op.client.get('/mailbox?direction=sideways', alice.token)).status).toBe(400); // refused before listing
    const after = await scrape();
    const delta = (direction: string) =>
      valueOf(after, 'roost_mailbox_list_duration_seconds_count', { direction }) -
      valueOf(before, 'roost_mailbox_list_duration_seconds_count', { direction });
    expect({ in: delta('in'), out: delta('out'), both: delta('both') }).toEqual({ in: 2, out: 1, both: 1 });
    expect(labelValues(after, 'roost_mailbox_list_duration_seconds', 'direction')).toEqual(['both', 'in', 'out']);
    expect(valueOf(after, 'roost_mailbox_list_duration_seconds_sum')).toBeGreaterThan(
      valueOf(before, 'roost_mailbox_list_duration_seconds_sum'),
    );
  });

  it('Postgres: pool connections by state (in_use, idle, waiting) follow the load; query durations are observed', async () => {
    const alice = await agent('@mp.alice');
    const bob = await agent('@mp.bob');
    await send(alice.token, bob.handle);
    const before = await scrape();
    expect(labelValues(before, 'roost_db_pool_connections', 'state')).toEqual(['idle', 'in_use', 'waiting']);

    // 40 listings at once on a pool of 2: scrapes taken meanwhile see connections in use and
    // requests waiting for one.
    let inUse = 0;
    let waiting = 0;
    const deadline = Date.now() + 10_000;
    while ((inUse === 0 || waiting === 0) && Date.now() < deadline) {
      const load = Promise.all(Array.from({ length: 40 }, () => op.client.get('/mailbox?direction=both', bob.token)));
      for (let i = 0; i < 5; i++) {
        const s = await scrape();
        inUse = Math.max(inUse, valueOf(s, 'roost_db_pool_connections', { state: 'in_use' }));
        waiting = Math.max(waiting, valueOf(s, 'roost_db_pool_connections', { state: 'waiting' }));
      }
      expect((await load).every((r) => r.status === 200)).toBe(true);
    }
    expect(inUse).toBeGreaterThan(0);
    expect(inUse).toBeLessThanOrEqual(2);
    expect(waiting).toBeGreaterThan(0);
    // Once the load is gone nothing waits, and the pool never exceeds its size.
    const idle = await until(
      'the pool to settle',
      (s) => valueOf(s, 'roost_db_pool_connections', { state: 'waiting' }) === 0,
    );
    expect(
      valueOf(idle, 'roost_db_pool_connections', { state: 'in_use' }) +
        valueOf(idle, 'roost_db_pool_connections', { state: 'idle' }),
    ).toBeLessThanOrEqual(2);

    expect(valueOf(idle, 'roost_db_query_duration_seconds_count')).toBeGreaterThan(
      valueOf(before, 'roost_db_query_duration_seconds_count') + 40,
    );
    expect(valueOf(idle, 'roost_db_query_duration_seconds_sum')).toBeGreaterThan(
      valueOf(before, 'roost_db_query_duration_seconds_sum'),
    );
  });

  it('gateway: connections, frames sent by kind, replayed frames, backfills (gap, sweep), closes (revoked, ping_timeout), stream read lag, commit-to-socket', async () => {
    const alice = await agent('@mw.alice');
    const bob = await agent('@mw.bob');
    const baseline = await until('no open sockets', (s) => valueOf(s, 'roost_ws_connections') === 0);

    // Two live sockets and one live frame.
    const one = await open(bob.token);
    const two = await open(bob.token);
    await until('2 connections', (s) => valueOf(s, 'roost_ws_connections') === 2);
    const first = await send(alice.token, bob.handle);
    await Promise.all(
      [one, two].map((socket) => socket.until(() => socket.ids.includes(first.id), 5_000, 'the notify')),
    );
    let s = await scrape();
    const delta = (name: string, labels: Record<string, string> = {}) =>
      valueOf(s, name, labels) - valueOf(baseline, name, labels);
    expect(delta('roost_ws_frames_sent_total', { kind: 'notify' })).toBe(2);
    expect(delta('roost_commit_to_socket_seconds_count')).toBe(2);
    expect(delta('roost_stream_read_lag_seconds_count')).toBeGreaterThanOrEqual(1);
    // Each lag is the read time minus its entry's time, in seconds: none is negative, none older than the suite.
    const lagSum = delta('roost_stream_read_lag_seconds_sum');
    expect(lagSum).toBeGreaterThanOrEqual(0);
    expect(lagSum).toBeLessThanOrEqual(
      (delta('roost_stream_read_lag_seconds_count') * (Date.now() - suiteStarted)) / 1000,
    );

    // A resume from the origin replays the one envelope, then replay.complete (a control frame).
    const resumed = await open(bob.token, {
      query: { after_created_at: '0', after_envelope_id: `01${'0'.repeat(24)}` },
    });
    await resumed.until(() => resumed.frames.some((f) => f.op === 'replay.complete'), 5_000, 'replay.complete');
    s = await scrape();
    expect(delta('roost_ws_replayed_frames_total')).toBe(1);
    expect(delta('roost_ws_frames_sent_total', { kind: 'replay' })).toBe(1);
    expect(delta('roost_ws_frames_sent_total', { kind: 'control' })).toBe(1);
    expect(valueOf(s, 'roost_ws_connections')).toBe(3);

    // A lost publish, then the next frame shows the gap: backfill{cause="gap"}.
    const bus = op.app.get(FrameBus);
    const lose = () => jest.spyOn(bus, 'publish').mockImplementationOnce(async () => undefined);
    let publish = lose();
    const lost = await send(alice.token, bob.handle);
    publish.mockRestore();
    const next = await send(alice.token, bob.handle);
    await resumed.until(() => resumed.ids.includes(next.id), 5_000, 'the next notify');
    expect(resumed.ids).toEqual([first.id, lost.id, next.id]);
    s = await until(
      'gap backfills',
      (x) =>
        valueOf(x, 'roost_ws_backfills_total', { cause: 'gap' }) -
          valueOf(baseline, 'roost_ws_backfills_total', { cause: 'gap' }) ===
        3,
    );

    // A lost publish and no further traffic: the sweep (as after a Redis reconnect) fills it.
    publish = lose();
    const swept = await send(alice.token, bob.handle);
    publish.mockRestore();
    op.app.get(ConnectionsService).onResync();
    await resumed.until(() => resumed.ids.includes(swept.id), 5_000, 'the swept notify');
    s = await until(
      'sweep backfills',
      (x) =>
        valueOf(x, 'roost_ws_backfills_total', { cause: 'sweep' }) -
          valueOf(baseline, 'roost_ws_backfills_total', { cause: 'sweep' }) ===
        3,
    );
    expect(labelValues(s, 'roost_ws_backfills_total', 'cause')).toEqual(['gap', 'sweep']);

    // A client that never answers pings is cut off: closed{reason="ping_timeout"}.
    const deaf = await open(bob.token, { autoPong: false });
    await deaf.untilClosed(5_000);
    expect(deaf.closeCode).toBe(1006); // terminated, no close frame
    await until(
      'a ping timeout',
      (x) =>
        valueOf(x, 'roost_ws_closed_total', { reason: 'ping_timeout' }) >
        valueOf(baseline, 'roost_ws_closed_total', { reason: 'ping_timeout' }),
    );

    // Rotating bob's token closes his three sockets 4001: closed{reason="revoked"}.
    const rotated = await op.client.post(
      `/_admin/agents/${encodeURIComponent(bob.handle)}/rotate-token`,
      {},
      op.adminToken,
    );
    expect(rotated.status).toBe(200);
    secrets.add(rotated.body.token);
    await Promise.all([one, two, resumed].map((socket) => socket.untilClosed(5_000)));
    expect([one, two, resumed].map((socket) => socket.closeCode)).toEqual([4001, 4001, 4001]);
    s = await until('the revoked sockets to be forgotten', (x) => valueOf(x, 'roost_ws_connections') === 0);
    expect(delta('roost_ws_closed_total', { reason: 'revoked' })).toBe(3);
    expect(delta('roost_ws_closed_total', { reason: 'ping_timeout' })).toBe(1);
    for (const reason of labelValues(s, 'roost_ws_closed_total', 'reason'))
      expect(['slow_consumer', 'revoked', 'ping_timeout', 'drain', 'error']).toContain(reason);
    for (const kind of labelValues(s, 'roost_ws_frames_sent_total', 'kind'))
      expect(['notify', 'monitor', 'replay', 'control']).toContain(kind);
    // Every notify written live was timed from its commit.
    expect(delta('roost_commit_to_socket_seconds_count')).toBe(
      delta('roost_ws_frames_sent_total', { kind: 'notify' }) - 6,
    );
  });

  it('worker jobs: durations by job name on every run, failures by job name', async () => {
    const before = await scrape();
    const runs = (x: Scrape, name: string) => valueOf(x, 'roost_job_duration_seconds_count', { name });
    let s = await until(
      'both jobs to run twice',
      (x) =>
        runs(x, 'schedules.tick') >= runs(before, 'schedules.tick') + 2 &&
        runs(x, 'retention.purge') >= runs(before, 'retention.purge') + 2,
    );
    expect(labelValues(s, 'roost_job_duration_seconds', 'name')).toEqual(['retention.purge', 'schedules.tick']);
    expect(valueOf(s, 'roost_job_duration_seconds_sum')).toBeGreaterThan(0);

    const failuresBefore = valueOf(s, 'roost_job_failures_total', { name: 'retention.purge' });
    const purge = jest
      .spyOn(op.app.get(RetentionProcessor), 'purge')
      .mockRejectedValueOnce(new Error('planted job failure'));
    try {
      s = await until(
        'a failed purge',
        (x) => valueOf(x, 'roost_job_failures_total', { name: 'retention.purge' }) === failuresBefore + 1,
      );
    } finally {
      purge.mockRestore();
    }
    expect(valueOf(s, 'roost_job_failures_total', { name: 'schedules.tick' })).toBe(0);
    for (const name of labelValues(s, 'roost_job_failures_total', 'name'))
      expect(['retention.purge', 'schedules.tick']).toContain(name);
  });

  it('schedules: firings by result (sent, refused), lag of the oldest due run while one is due', async () => {
    const alice = await agent('@ms.alice');
    const bob = await agent('@ms.bob');
    const gone = await agent('@ms.gone');
    const before = await scrape();
    const start = Date.now() + 800;
    const schedule = async (to: string) => {
      const reply = await op.client.post(
        '/schedules',
        { envelope: { to: [to], subject: 'tick', content_parts: [{ type: 'text', text: 'tock' }] }, start_at: start },
        alice.token,
      );
      expect(reply.status).toBe(201);
      secrets.add(reply.body.id); // a schedule id is an id too
      return reply.body.id as string;
    };
    await schedule(bob.handle);
    await schedule(gone.handle);
    expect((await op.client.delete(`/_admin/agents/${encodeURIComponent(gone.handle)}`, op.adminToken)).status).toBe(
      204,
    );

    // Sample the lag while the runs come due and fire: the tick that fires them reports how late
    // they are (up to one tick); once they are fired nothing is due and the lag is 0 again.
    let maxLag = 0;
    const s = await until(
      'both firings',
      (x) => {
        maxLag = Math.max(maxLag, valueOf(x, 'roost_schedule_lag_seconds'));
        const fired = (result: string) =>
          valueOf(x, 'roost_schedule_firings_total', { result }) -
          valueOf(before, 'roost_schedule_firings_total', { result });
        return fired('sent') === 1 && fired('refused') === 1;
      },
      10_000,
    );
    expect(labelValues(s, 'roost_schedule_firings_total', 'result')).toEqual(
      expect.arrayContaining(['refused', 'sent']),
    );
    for (const result of labelValues(s, 'roost_schedule_firings_total', 'result'))
      expect(['sent', 'replayed', 'refused', 'error']).toContain(result);
    const settled = await until('the lag to return to 0', (x) => {
      maxLag = Math.max(maxLag, valueOf(x, 'roost_schedule_lag_seconds'));
      return valueOf(x, 'roost_schedule_lag_seconds') === 0;
    });
    expect(maxLag).toBeGreaterThan(0);
    expect(maxLag).toBeLessThan(5);
    // The fired envelope reached bob, through the accept path (counted as stored).
    expect(
      valueOf(settled, 'roost_envelopes_accepted_total', { result: 'stored' }) -
        valueOf(before, 'roost_envelopes_accepted_total', { result: 'stored' }),
    ).toBe(1);
    const inbox = await op.client.get('/mailbox', bob.token);
    for (const header of inbox.body.envelope_headers) envelopeIds.add(header.id);
    expect(inbox.body.envelope_headers).toHaveLength(1);
  });

  it('retention: purged rows by table, from the worker job', async () => {
    expect((await op.client.post('/_admin/orgs', { name: 'mr' }, op.adminToken)).status).toBe(201);
    expect((await op.client.patch('/_admin/orgs/mr', { retention_days: 1 }, op.adminToken)).status).toBe(200);
    const alice = await agent('@mr.alice');
    const bob = await agent('@mr.bob');
    const before = await scrape();
    const ids = [(await send(alice.token, bob.handle)).id, (await send(alice.token, bob.handle)).id];
    const DAY = 24 * 60 * 60 * 1000;
    await db.query('UPDATE mailbox_entries SET created_at = created_at - $2::bigint WHERE envelope_id = ANY($1)', [
      ids,
      2 * DAY,
    ]);
    await db.query(
      'UPDATE envelopes SET created_at = created_at - $2::bigint, received_ms = received_ms - $2::bigint WHERE id = ANY($1)',
      [ids, 2 * DAY],
    );
    const purged = (x: Scrape, table: string) =>
      valueOf(x, 'roost_retention_purged_rows_total', { table }) -
      valueOf(before, 'roost_retention_purged_rows_total', { table });
    // Bob's two entries, and the bodies (alice is in the same org, so she keeps 1 day too).
    const s = await until('the purge job', (x) => purged(x, 'mailbox_entries') === 2 && purged(x, 'envelopes') === 2);
    expect(labelValues(s, 'roost_retention_purged_rows_total', 'table')).toEqual(['envelopes', 'mailbox_entries']);
    expect((await op.client.get('/mailbox', bob.token)).body.envelope_headers).toEqual([]);
  });

  it('accept lock fallbacks: a node whose mailbox state another node moved on counts one fallback', async () => {
    const other = await startOperator({
      databaseUrl: op.config.databaseUrl!,
      env: { ROOST_ADMIN_TOKEN: op.adminToken },
    });
    try {
      const alice = await agent('@mf.alice');
      const bob = await agent('@mf.bob');
      expect((await post(alice.token, envelope(bob.handle))).status).toBe(202);
      const before = await scrape();
      expect((await post(alice.token, envelope(bob.handle))).status).toBe(202); // this node's state is current
      expect((await other.client.post('/messages', envelope(bob.handle), alice.token)).status).toBe(202);
      // Stale: moved on by the other. A body above the guard's 64 KB peek is looked up without the
      // sender, so without a mailbox state: only this node's memory, which the other node outdated.
      const unpeeked = envelope(bob.handle, { content_parts: [{ type: 'text', text: 'x'.repeat(70_000) }] });
      expect((await post(alice.token, unpeeked)).status).toBe(202);
      const after = await scrape();
      expect(
        valueOf(after, 'roost_accept_lock_fallbacks_total') - valueOf(before, 'roost_accept_lock_fallbacks_total'),
      ).toBe(1);
    } finally {
      await other.close();
    }
  });

  it('Redis errors by component: an api node whose Redis is unreachable counts failed publishes and rate-limit calls, and stays ready with redis: false', async () => {
    const closedPort = await freePort();
    const broken = await startOperator({
      databaseUrl: op.config.databaseUrl!,
      env: {
        ROOST_ROLE: 'api',
        REDIS_URL: `redis://127.0.0.1:${closedPort}`,
        ROOST_REDIS_PREFIX: `roost-test:${ulid()}:`,
        ROOST_RATE_LIMIT_PER_S: '1000',
        ROOST_ADMIN_TOKEN: op.adminToken,
      },
    });
    try {
      const alice = await agent('@mx.alice');
      const bob = await agent('@mx.bob');
      const before = await scrape(broken);
      const body = envelope(bob.handle);
      envelopeIds.add(body.id as string);
      // Committed in Postgres, so 202; the frame publish fails (the gateways' sweep recovers it)
      // and the rate limiter takes the token from this node's bucket.
      const reply = await broken.client.post('/messages', body, alice.token);
      expect(reply.status).toBe(202);
      const s = await until(
        'redis errors',
        (x) =>
          valueOf(x, 'roost_redis_errors_total', { component: 'publish' }) >
            valueOf(before, 'roost_redis_errors_total', { component: 'publish' }) &&
          valueOf(x, 'roost_redis_errors_total', { component: 'rate_limit' }) >
            valueOf(before, 'roost_redis_errors_total', { component: 'rate_limit' }),
        10_000,
        broken,
      );
      for (const component of labelValues(s, 'roost_redis_errors_total', 'component'))
        expect(['publish', 'read', 'control', 'rate_limit', 'auth_fail_limit', 'ws_limit']).toContain(component);
      expect(labelNamesOf(s, 'roost_redis_errors_total')).toEqual(new Set(['component']));
      // An api node serves without Redis: ready, with Redis reported down (body and gauge).
      const ready = await fetch(`${broken.url}/readyz`);
      expect(ready.status).toBe(200);
      expect(((await ready.json()) as { checks: unknown }).checks).toEqual({ postgres: true, redis: false });
      expect(valueOf(await scrape(broken), 'roost_dependency_up', { dependency: 'redis' })).toBe(0);
      expect(valueOf(await scrape(broken), 'roost_dependency_up', { dependency: 'postgres' })).toBe(1);
      // The envelope is durable: bob lists it through the healthy operator.
      const inbox = await op.client.get('/mailbox', bob.token);
      expect(inbox.body.envelope_headers.map((h: { id: string }) => h.id)).toEqual([body.id]);
      await checkLabels(s);
    } finally {
      await broken.close();
    }
  });

  /** No label value carries a handle, a token, an envelope or schedule id (or any ULID at all). */
  const checkLabels = async (s: Scrape) => {
    const values = s.samples.flatMap((sample) =>
      Object.values(sample.labels).map((value) => ({ series: sample.name, value })),
    );
    expect(values.length).toBeGreaterThan(100);
    const bad = values.filter(({ value }) => {
      if (/@|%40/.test(value)) return true;
      if (/[0-9A-HJKMNP-TV-Z]{26}/i.test(value)) return true;
      for (const secret of secrets) if (value.includes(secret)) return true;
      for (const id of envelopeIds) if (value.toUpperCase().includes(id.toUpperCase())) return true;
      for (const handle of handles) if (value.includes(handle.slice(1))) return true;
      return false;
    });
    expect(bad).toEqual([]);
  };

  it('no label value anywhere carries a handle, a token or an envelope id', async () => {
    expect(secrets.size).toBeGreaterThan(10);
    expect(envelopeIds.size).toBeGreaterThan(20);
    // A held mailbox, so the gateway reports the read lag of its partition.
    const holder = await agent('@mlab.holder');
    await open(holder.token);
    // An admin read (the console's), counted by route.
    const mailbox = `/_admin/agents/${encodeURIComponent(holder.handle)}/mailbox`;
    expect((await op.client.get(mailbox, op.adminToken)).status).toBe(200);
    const s = await until('a stream lag sample', (x) => samplesOf(x, 'roost_stream_lag_entries').length > 0);
    await checkLabels(s);
    // Every Roost metric has at least one sample by now (Redis errors: on the broken node, above),
    // and only its declared labels.
    for (const [name, { type, labels }] of Object.entries(CATALOGUE)) {
      if (name === 'roost_redis_errors_total') continue;
      // Embedded PGlite only (this operator runs on Postgres): test/medium/pglite-durability.test.ts.
      if (name === 'roost_db_syncs_total') continue;
      const series = type === 'histogram' ? `${name}_count` : name;
      expect({ name, samples: samplesOf(s, series).length > 0 }).toEqual({ name, samples: true });
      const expected = new Set(type === 'histogram' ? [...labels, 'le'] : labels);
      expect({ name, labels: [...labelNamesOf(s, name)].sort() }).toEqual({ name, labels: [...expected].sort() });
    }
  });
});
