import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parse, stringify } from 'yaml';
import { ulid } from '#domain';
import { TestClient } from '../support/client';
import { createTestDatabase } from '../support/database';
import { freePort, ROOST_MAIN, startAll, stopAll, type TestProcess } from '../support/processes';
import { testRedisUrl } from '../support/services';
import { connect, type Listener } from '../support/ws';
import {
  CHART,
  DEPLOY,
  REQUIRE_TOOLS,
  definedMetrics,
  describeWithTool,
  helmMissing,
  referencedMetrics,
  renderChart,
  toolMissing,
} from './support';

/**
 * A real Prometheus (Debian's prometheus 2.42) scrapes a running api, gateway and worker under a
 * little load, with the chart's rendered alert rules loaded: every Grafana panel query and every
 * alert expression evaluates without error, the core panels return data, and Prometheus reports
 * every rule healthy.
 *
 * Each process runs with its separate metrics listener (ROOST_METRICS_PORT on a free port) and
 * Prometheus scrapes that port, as the chart's ServiceMonitor scrapes the `metrics` port; the main
 * port no longer serves /metrics. The targets carry the labels the ServiceMonitor gives them
 * (namespace, job = <release>-<role>).
 */

jest.setTimeout(180_000);

const PROMETHEUS = process.env.ROOST_PROMETHEUS ?? 'prometheus';
const services = Boolean(
  (process.env.ROOST_TEST_DATABASE_URL ?? process.env.DATABASE_URL) &&
  (process.env.ROOST_TEST_REDIS_URL ?? process.env.REDIS_URL),
);
const missing =
  helmMissing() ??
  toolMissing(PROMETHEUS, ['--version'], 'apt-get install prometheus, or .ci/helm.sh') ??
  (existsSync(ROOST_MAIN) ? null : `${ROOST_MAIN} is not built (npm run build)`) ??
  (services || REQUIRE_TOOLS ? null : 'no DATABASE_URL and REDIS_URL');

/** Panels whose series exist as soon as api, gateway and worker have served a little traffic. */
const CORE_PANELS = [
  'Request rate by route',
  'Latency p99 by route',
  'Envelopes accepted by result',
  'Accept batch size',
  'DB pool connections',
  'DB query latency',
  'Open WebSocket connections',
  'Frames sent by kind',
  'Stream read lag',
  'Commit-to-socket latency',
  'Job duration p99',
  'CPU per pod',
  'Resident memory per pod',
  'Event loop lag p99',
  'Targets up',
  // the gauges and counters of ops and limits that this load makes non-empty
  'Build info',
  'Dependencies up',
  'Job queues by state',
  'Stream length by partition',
  'Stream lag (entries) by partition',
  'WebSocket handshakes by outcome',
  'Rate limited by limit',
  'Unknown-token cache hits',
];

describeWithTool(missing)('a real Prometheus scraping api, gateway and worker', () => {
  const adminToken = `admin-${ulid()}`;
  let database: { url: string; drop: () => Promise<void> } | undefined;
  let roles: TestProcess[] = [];
  let prometheus: ChildProcess | undefined;
  let promUrl = '';
  let dir = '';
  let listener: Listener | undefined;
  let metricsPorts: number[] = [];
  const promOutput: string[] = [];

  async function query(expr: string): Promise<{ status: string; error?: string; data?: { result: unknown[] } }> {
    const response = await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent(expr)}`);
    return (await response.json()) as { status: string; error?: string; data?: { result: unknown[] } };
  }

  beforeAll(async () => {
    database = await createTestDatabase('roost_scrape');
    const env = {
      DATABASE_URL: database.url,
      REDIS_URL: testRedisUrl(),
      ROOST_REDIS_PREFIX: `roost-scrape:${ulid()}:`,
      ROOST_ADMIN_TOKEN: adminToken,
      ROOST_LOG_LEVEL: 'warn',
      ROOST_HOST: '127.0.0.1',
      ROOST_RETENTION_INTERVAL_MS: '1000',
      ROOST_DB_POOL_SIZE: '4',
      ROOST_AUTH_FAIL_LIMIT_PER_S: '2',
    };
    // Each role's separate metrics listener, on a free port of its own.
    metricsPorts = [await freePort(), await freePort(), await freePort()];
    // The api first: it applies the migrations.
    [roles[0]] = await startAll([
      { name: 'api', env: { ...env, ROOST_ROLE: 'api', ROOST_METRICS_PORT: String(metricsPorts[0]) } },
    ]);
    roles = [
      roles[0],
      ...(await startAll(
        ['gateway', 'worker'].map((role, i) => ({
          name: role,
          env: { ...env, ROOST_ROLE: role, ROOST_METRICS_PORT: String(metricsPorts[i + 1]) },
        })),
      )),
    ];

    // The chart's alert rules, rendered as for release "roost" in namespace "roost".
    const rendered = renderChart([join(CHART, 'examples', 'production.yaml')]);
    if (!rendered.ok) throw new Error(rendered.error);
    const rule = rendered.rendered.objects.find((o) => o.kind === 'PrometheusRule')!;
    dir = mkdtempSync(join(tmpdir(), 'roost-prometheus-'));
    writeFileSync(
      join(dir, 'rules.yaml'),
      stringify({ groups: rule.spec.groups.map((g: any) => ({ ...g, interval: '1s' })) }),
    );
    writeFileSync(
      join(dir, 'prometheus.yml'),
      stringify({
        global: { scrape_interval: '1s', scrape_timeout: '900ms', evaluation_interval: '1s' },
        rule_files: [join(dir, 'rules.yaml')],
        scrape_configs: ['api', 'gateway', 'worker'].map((role, i) => ({
          job_name: `roost-${role}`,
          metrics_path: '/metrics',
          static_configs: [{ targets: [`127.0.0.1:${metricsPorts[i]}`], labels: { namespace: 'roost' } }],
        })),
      }),
    );
    const port = await freePort();
    promUrl = `http://127.0.0.1:${port}`;
    prometheus = spawn(
      PROMETHEUS,
      [
        `--config.file=${join(dir, 'prometheus.yml')}`,
        `--storage.tsdb.path=${join(dir, 'data')}`,
        `--web.listen-address=127.0.0.1:${port}`,
        '--log.level=warn',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    for (const stream of [prometheus.stdout!, prometheus.stderr!])
      stream.on('data', (chunk: Buffer) => promOutput.push(chunk.toString()));
    const deadline = Date.now() + 30_000;
    for (;;) {
      if (prometheus.exitCode !== null) throw new Error(`prometheus exited: ${promOutput.join('')}`);
      const ready = await fetch(`${promUrl}/-/ready`).then(
        (r) => r.status === 200,
        () => false,
      );
      if (ready) break;
      if (Date.now() > deadline) throw new Error(`prometheus not ready: ${promOutput.join('')}`);
      await sleep(200);
    }

    // A little load: a listener on the gateway, 60 sends through the api, listings.
    const api = new TestClient(roles[0].url);
    const agent = async (handle: string) => {
      const reply = await api.post('/_admin/agents', { handle, policy: 'open' }, adminToken);
      if (reply.status !== 201) throw new Error(`creating ${handle}: ${reply.status} ${reply.text}`);
      return reply.body.token as string;
    };
    const [sender, inbox] = [await agent('@scrape.sender'), await agent('@scrape.inbox')];
    listener = await connect(roles[1].url, { token: inbox });
    for (let round = 0; round < 6; round++) {
      const replies = await Promise.all(
        Array.from({ length: 10 }, () =>
          api.post(
            '/messages',
            { id: ulid(), to: ['@scrape.inbox'], date_ms: Date.now(), content_parts: [{ type: 'text', text: 'hi' }] },
            sender,
          ),
        ),
      );
      expect(replies.map((r) => r.status)).toEqual(Array(10).fill(202));
      await api.get('/mailbox?limit=10', inbox);
      await sleep(500);
    }
    const notified = () => listener!.frames.filter((f: any) => f.op === 'envelope.notify').length;
    await listener.until(() => notified() >= 60, 15_000, '60 header frames');
    // One unknown token, repeated from one address past the auth-failure limit (2/s): 401s (the
    // later ones from the unknown-token cache), then 429s (limit="auth_fail").
    const unknown = `unknown-${ulid()}`;
    const refusals: Array<{ status: number }> = [];
    for (let i = 0; i < 30; i++) refusals.push(await api.get('/mailbox', unknown));
    expect(refusals.map((r) => r.status)).toContain(401);
    expect(refusals.map((r) => r.status)).toContain(429);
    // Enough scrapes after the load for rate() over 10s windows.
    await sleep(6_000);
  });

  afterAll(async () => {
    listener?.ws.close();
    if (prometheus && prometheus.exitCode === null) {
      const exited = new Promise((done) => prometheus!.once('exit', done));
      prometheus.kill('SIGTERM');
      await exited;
    }
    await stopAll(roles, 3_000);
    await database?.drop().catch(() => undefined);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('scrapes all three roles', async () => {
    const up = await query('up{namespace="roost"}');
    expect(up.status).toBe('success');
    const values = (up.data!.result as Array<{ metric: { job: string }; value: [number, string] }>)
      .map((r) => [r.metric.job, r.value[1]])
      .sort();
    expect(values).toEqual([
      ['roost-api', '1'],
      ['roost-gateway', '1'],
      ['roost-worker', '1'],
    ]);
  });

  it('serves /metrics on the metrics port only, as the chart expects', async () => {
    for (const [i, role] of roles.entries()) {
      const onMetricsPort = await fetch(`http://127.0.0.1:${metricsPorts[i]}/metrics`);
      expect([role.name, onMetricsPort.status]).toEqual([role.name, 200]);
      expect(await onMetricsPort.text()).toMatch(/^roost_build_info\{/m);
      expect([role.name, (await fetch(`${role.url}/metrics`)).status]).toEqual([role.name, 404]);
    }
  });

  it('evaluates every Grafana panel query without error; the core panels return data', async () => {
    const dashboard = JSON.parse(readFileSync(join(DEPLOY, 'grafana', 'roost.json'), 'utf8')) as {
      panels: Array<{ title: string; targets?: Array<{ expr: string }> }>;
    };
    const substitute = (expr: string) =>
      expr
        .replaceAll('$__rate_interval', '10s')
        .replaceAll('$namespace', 'roost')
        .replaceAll('$job', 'roost-api|roost-gateway|roost-worker');
    const defined = definedMetrics();
    const empty: string[] = [];
    for (const panel of dashboard.panels) {
      for (const target of panel.targets ?? []) {
        const result = await query(substitute(target.expr));
        expect([panel.title, target.expr, result.status, result.error]).toEqual([
          panel.title,
          target.expr,
          'success',
          undefined,
        ]);
        if (result.data!.result.length === 0) empty.push(`${panel.title}: ${target.expr}`);
      }
    }
    for (const title of CORE_PANELS) {
      const panel = dashboard.panels.find((p) => p.title === title)!;
      const withData = panel.targets!.filter((t) => !empty.includes(`${title}: ${t.expr}`));
      expect([title, withData.length > 0]).toEqual([title, true]);
      // a core panel uses only metrics this build defines
      for (const target of panel.targets!)
        for (const name of referencedMetrics(target.expr))
          expect([title, name, defined.has(name)]).toEqual([title, name, true]);
    }

    console.log(`Grafana queries without data in this run (${empty.length}):\n${empty.join('\n')}`);
  });

  it('evaluates every alert expression without error, and Prometheus reports every rule healthy', async () => {
    const rules = parse(readFileSync(join(dir, 'rules.yaml'), 'utf8')) as { groups: Array<{ rules: unknown[] }> };
    const groups = (await (await fetch(`${promUrl}/api/v1/rules`)).json()) as {
      data: { groups: Array<{ rules: Array<{ name: string; query: string; health: string; lastError?: string }> }> };
    };
    const loaded = groups.data.groups.flatMap((g) => g.rules);
    expect(loaded.length).toBe(rules.groups.reduce((n, g) => n + g.rules.length, 0));
    for (const rule of loaded) {
      const result = await query(rule.query);
      expect([rule.name, result.status, result.error]).toEqual([rule.name, 'success', undefined]);
    }
    // evaluated at least once by now (1s interval): health ok, no error
    expect(loaded.map((r) => [r.name, r.health, r.lastError ?? ''])).toEqual(loaded.map((r) => [r.name, 'ok', '']));
  });
});
