import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import {
  CHART,
  DEPLOY,
  PROMTOOL,
  describeWithTool,
  helmMissing,
  promtoolMissing,
  renderChart,
  valuesFile,
  type Values,
} from './support';

/**
 * The chart's PrometheusRule and the Grafana dashboard, checked by Prometheus's own promtool
 * (Debian's prometheus package): every rendering's rules pass `promtool check rules`, every alert
 * has a `promtool test rules` unit test that fires on a synthetic failing series and stays quiet on
 * a healthy one, and every dashboard query parses as PromQL.
 */

type K8s = Record<string, any>;
const PRODUCTION = join(CHART, 'examples', 'production.yaml');
const REQUIRED = { postgres: { url: 'postgres://db/roost' }, redis: { url: 'redis://cache:6379' } };

function promtool(args: string[], cwd?: string) {
  const run = spawnSync(PROMTOOL, args, { encoding: 'utf8', cwd });
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

/** The rule groups of a rendering, as a Prometheus rule file. */
function ruleFile(
  inputs: Array<string | Values>,
  namespace = 'roost',
  release = 'roost',
): { file: string; groups: K8s[] } {
  const files = inputs.map((input) => (typeof input === 'string' ? input : valuesFile(input)));
  const result = renderChart(files, release, namespace);
  if (!result.ok) throw new Error(result.error);
  const rule = result.rendered.objects.find((o) => o.kind === 'PrometheusRule');
  if (!rule) throw new Error('no PrometheusRule rendered');
  const dir = mkdtempSync(join(tmpdir(), 'roost-rules-'));
  const file = join(dir, 'rules.yaml');
  writeFileSync(file, stringify({ groups: rule.spec.groups }));
  return { file, groups: rule.spec.groups };
}

const describeTools = describeWithTool(helmMissing() ?? promtoolMissing());

describeTools('the PrometheusRule, checked by promtool', () => {
  const renderings: Array<[string, Array<string | Values>, string, string]> = [
    ['examples/production.yaml', [PRODUCTION], 'roost', 'roost'],
    ['required values, rules on', [REQUIRED, { metrics: { prometheusRule: { enabled: true } } }], 'roost', 'roost'],
    [
      'no worker and no gateway',
      [
        REQUIRED,
        { worker: { enabled: false }, gateway: { enabled: false }, metrics: { prometheusRule: { enabled: true } } },
      ],
      'roost',
      'roost',
    ],
    [
      'another release and namespace, every threshold changed, extra rules',
      [
        REQUIRED,
        {
          metrics: {
            prometheusRule: {
              enabled: true,
              acceptErrorRatio: 0.05,
              httpP99Seconds: 2.5,
              streamLagP99Seconds: 10,
              scheduleLagSeconds: 300,
              restartsPer15m: 5,
              retentionStaleMinutes: 120,
              slowConsumerClosesPer5m: 0.5,
              extraRules: [
                {
                  alert: 'MyRoostAlert',
                  expr: 'sum(rate(roost_receipts_total[5m])) > 100',
                  for: '5m',
                  labels: { severity: 'info' },
                },
              ],
            },
          },
        },
      ],
      'mail',
      'prod',
    ],
  ];

  it.each(renderings)('%s: promtool check rules passes', (_name, inputs, namespace, release) => {
    const { file, groups } = ruleFile(inputs, namespace, release);
    const count = groups.reduce((n, g) => n + g.rules.length, 0);
    const run = promtool(['check', 'rules', file]);
    expect([run.status, run.output]).toEqual([0, expect.stringContaining(`SUCCESS: ${count} rules found`)]);
    for (const group of groups) {
      for (const rule of group.rules)
        if (rule.alert && rule.alert !== 'MyRoostAlert') expect(rule.expr).toContain(`namespace="${namespace}"`);
    }
  });

  it('promtool check rules rejects a broken expression (the check is real)', () => {
    const { file } = ruleFile([
      REQUIRED,
      {
        metrics: {
          prometheusRule: {
            enabled: true,
            extraRules: [{ alert: 'Broken', expr: 'sum(rate(roost_receipts_total[5m]) > ' }],
          },
        },
      },
    ]);
    const run = promtool(['check', 'rules', file]);
    expect(run.status).not.toBe(0);
    expect(run.output).toMatch(/Broken|parse error/);
  });

  describe('promtool test rules: every alert fires on a failing series and stays quiet on a healthy one', () => {
    const sel = (job: string, extra = '') => `namespace="roost",job="${job}",instance="10.0.0.1:9464"${extra}`;
    const ksm = 'job="kube-state-metrics",namespace="roost"';
    /** Per alert: the failing case (series, when, labels and summary it fires with) and healthy cases. */
    const cases: Array<{
      alert: string;
      fires: { series: Array<[string, string]>; at: string; labels: Record<string, string>; summary: string };
      quiet: Array<Array<[string, string]>>;
    }> = [
      {
        alert: 'RoostAcceptErrorRateHigh',
        fires: {
          series: [
            [
              `roost_http_requests_total{${sel('roost-api', ',route="/messages",method="POST",status="202"')}}`,
              '0+90x30',
            ],
            [
              `roost_http_requests_total{${sel('roost-api', ',route="/messages",method="POST",status="500"')}}`,
              '0+10x30',
            ],
          ],
          at: '15m',
          labels: { severity: 'critical' },
          summary: 'More than 10% of POST /messages fail with a 5xx',
        },
        quiet: [
          [
            [
              `roost_http_requests_total{${sel('roost-api', ',route="/messages",method="POST",status="202"')}}`,
              '0+100x30',
            ],
            [
              `roost_http_requests_total{${sel('roost-api', ',route="/messages",method="POST",status="500"')}}`,
              '0+0x30',
            ],
            [
              `roost_http_requests_total{${sel('roost-api', ',route="/mailbox",method="GET",status="500"')}}`,
              '0+50x30',
            ],
          ],
        ],
      },
      {
        alert: 'RoostHttpLatencyP99High',
        fires: {
          series: ['0.5', '1', '2.5', '+Inf'].map((le): [string, string] => [
            `roost_http_request_duration_seconds_bucket{${sel('roost-api', `,route="/messages",method="POST",le="${le}"`)}}`,
            le === '0.5' || le === '1' ? '0+0x40' : '0+10x40',
          ]),
          at: '20m',
          labels: { severity: 'warning', route: '/messages' },
          summary: 'p99 latency of /messages is 2.485s',
        },
        quiet: [
          ['0.5', '1', '2.5', '+Inf'].map((le): [string, string] => [
            `roost_http_request_duration_seconds_bucket{${sel('roost-api', `,route="/messages",method="POST",le="${le}"`)}}`,
            '0+10x40',
          ]),
          // a slow WebSocket upgrade is not an HTTP latency problem
          ['0.5', '+Inf'].map((le): [string, string] => [
            `roost_http_request_duration_seconds_bucket{${sel('roost-gateway', `,route="/connect",method="GET",le="${le}"`)}}`,
            le === '+Inf' ? '0+10x40' : '0+0x40',
          ]),
        ],
      },
      {
        alert: 'RoostStreamReadLagHigh',
        fires: {
          series: ['1', '5', '+Inf'].map((le): [string, string] => [
            `roost_stream_read_lag_seconds_bucket{${sel('roost-gateway', `,le="${le}"`)}}`,
            le === '1' ? '0+0x30' : '0+10x30',
          ]),
          at: '15m',
          labels: { severity: 'warning' },
          summary: 'Gateways read header frames 4.96s after they were published (p99)',
        },
        quiet: [
          ['1', '5', '+Inf'].map((le): [string, string] => [
            `roost_stream_read_lag_seconds_bucket{${sel('roost-gateway', `,le="${le}"`)}}`,
            '0+10x30',
          ]),
        ],
      },
      {
        alert: 'RoostScheduleLagHigh',
        fires: {
          series: [[`roost_schedule_lag_seconds{${sel('roost-worker')}}`, '300+0x20']],
          at: '10m',
          labels: { severity: 'warning' },
          summary: 'A due schedule has waited 5m 0s',
        },
        quiet: [[[`roost_schedule_lag_seconds{${sel('roost-worker')}}`, '0+0x20']]],
      },
      {
        alert: 'RoostPodRestarting',
        fires: {
          series: [
            [`kube_pod_container_status_restarts_total{${ksm},pod="roost-api-6d9f-x2k4",container="roost"}`, '0+1x30'],
          ],
          at: '20m',
          labels: {
            severity: 'warning',
            job: 'kube-state-metrics',
            namespace: 'roost',
            pod: 'roost-api-6d9f-x2k4',
            container: 'roost',
          },
          summary: 'roost-api-6d9f-x2k4 restarted 15 times in 15 minutes',
        },
        quiet: [
          [
            [`kube_pod_container_status_restarts_total{${ksm},pod="roost-api-6d9f-x2k4",container="roost"}`, '2+0x30'],
            [`kube_pod_container_status_restarts_total{${ksm},pod="other-app-1",container="app"}`, '0+1x30'],
          ],
        ],
      },
      {
        alert: 'RoostTargetDown',
        fires: {
          series: [[`up{${sel('roost-api')}}`, '0x20']],
          at: '10m',
          labels: { severity: 'warning', namespace: 'roost', job: 'roost-api', instance: '10.0.0.1:9464' },
          summary: 'roost-api target 10.0.0.1:9464 is down',
        },
        quiet: [
          [
            [`up{${sel('roost-api')}}`, '1x20'],
            [`up{namespace="roost",job="postgres",instance="db:9187"}`, '0x20'],
          ],
        ],
      },
      {
        alert: 'RoostRedisErrors',
        fires: {
          series: [[`roost_redis_errors_total{${sel('roost-gateway', ',component="bus"')}}`, '0+6x30']],
          at: '20m',
          labels: { severity: 'warning', job: 'roost-gateway', component: 'bus' },
          summary: 'Redis commands failing in roost-gateway (bus)',
        },
        quiet: [[[`roost_redis_errors_total{${sel('roost-gateway', ',component="bus"')}}`, '5+0x30']]],
      },
      {
        alert: 'RoostDbPoolExhausted',
        fires: {
          series: [[`roost_db_pool_connections{${sel('roost-api', ',state="waiting"')}}`, '3x30']],
          at: '15m',
          labels: { severity: 'warning', job: 'roost-api', instance: '10.0.0.1:9464' },
          summary: '10.0.0.1:9464 has queries waiting for a Postgres connection',
        },
        quiet: [
          [
            [`roost_db_pool_connections{${sel('roost-api', ',state="waiting"')}}`, '0x30'],
            [`roost_db_pool_connections{${sel('roost-api', ',state="in_use"')}}`, '20x30'],
          ],
        ],
      },
      {
        alert: 'RoostNoReadyReplicas',
        fires: {
          series: [
            [`kube_deployment_status_replicas_available{${ksm},deployment="roost-gateway"}`, '0x10'],
            [`kube_deployment_spec_replicas{${ksm},deployment="roost-gateway"}`, '2x10'],
          ],
          at: '5m',
          labels: { severity: 'critical', job: 'kube-state-metrics', namespace: 'roost', deployment: 'roost-gateway' },
          summary: 'Deployment roost-gateway has no available replica',
        },
        quiet: [
          [
            [`kube_deployment_status_replicas_available{${ksm},deployment="roost-gateway"}`, '1x10'],
            [`kube_deployment_spec_replicas{${ksm},deployment="roost-gateway"}`, '2x10'],
          ],
          // scaled to zero on purpose
          [
            [`kube_deployment_status_replicas_available{${ksm},deployment="roost-worker"}`, '0x10'],
            [`kube_deployment_spec_replicas{${ksm},deployment="roost-worker"}`, '0x10'],
          ],
        ],
      },
      {
        alert: 'RoostDependencyDown',
        fires: {
          series: [
            [`roost_dependency_up{${sel('roost-api', ',dependency="redis"')}}`, '0x10'],
            [
              `roost_dependency_up{namespace="roost",job="roost-api",instance="10.0.0.2:9464",dependency="redis"}`,
              '0x10',
            ],
            [`roost_dependency_up{${sel('roost-api', ',dependency="postgres"')}}`, '1x10'],
          ],
          at: '5m',
          labels: { severity: 'critical', job: 'roost-api', dependency: 'redis' },
          summary: 'roost-api cannot reach redis',
        },
        // one pod of two cut off is that pod's problem, not the dependency's
        quiet: [
          [
            [`roost_dependency_up{${sel('roost-api', ',dependency="redis"')}}`, '0x10'],
            [
              `roost_dependency_up{namespace="roost",job="roost-api",instance="10.0.0.2:9464",dependency="redis"}`,
              '1x10',
            ],
          ],
        ],
      },
      {
        alert: 'RoostJobsFailing',
        fires: {
          series: [[`roost_job_failures_total{${sel('roost-worker', ',name="retention.purge"')}}`, '0+1x40']],
          at: '30m',
          labels: { severity: 'warning', name: 'retention.purge' },
          summary: 'Worker job retention.purge failed 15 times in 15 minutes',
        },
        quiet: [[[`roost_job_failures_total{${sel('roost-worker', ',name="retention.purge"')}}`, '4+0x40']]],
      },
      {
        alert: 'RoostRetentionNotRunning',
        fires: {
          // every run fails
          series: [
            [`roost_job_duration_seconds_count{${sel('roost-worker', ',name="retention.purge"')}}`, '0+1x60'],
            [`roost_job_failures_total{${sel('roost-worker', ',name="retention.purge"')}}`, '0+1x60'],
          ],
          at: '50m',
          labels: { severity: 'warning' },
          summary: 'No successful retention run in 30 minutes',
        },
        quiet: [
          [
            [`roost_job_duration_seconds_count{${sel('roost-worker', ',name="retention.purge"')}}`, '0+1x60'],
            [`roost_job_failures_total{${sel('roost-worker', ',name="retention.purge"')}}`, '0+0x60'],
            [`roost_job_duration_seconds_count{${sel('roost-worker', ',name="schedules.tick"')}}`, '0+1x60'],
          ],
        ],
      },
      {
        alert: 'RoostWsSlowConsumerCloses',
        fires: {
          series: [[`roost_ws_slow_consumer_closes_total{${sel('roost-gateway')}}`, '0+10x40']],
          at: '30m',
          labels: { severity: 'warning' },
          summary: 'Gateways closed 50 slow-consumer sockets in 5 minutes',
        },
        quiet: [[[`roost_ws_slow_consumer_closes_total{${sel('roost-gateway')}}`, '0+1x40']]],
      },
      {
        alert: 'RoostAuthFailuresRateLimited',
        fires: {
          series: [[`roost_rate_limited_total{${sel('roost-api', ',limit="auth_fail"')}}`, '0+100x40']],
          at: '30m',
          labels: { severity: 'warning' },
          summary: 'Requests refused 500 times in 5 minutes after failed authentication',
        },
        quiet: [
          [[`roost_rate_limited_total{${sel('roost-api', ',limit="auth_fail"')}}`, '0+10x40']],
          // other limits refusing as much do not count
          [[`roost_rate_limited_total{${sel('roost-api', ',limit="agent"')}}`, '0+100x40']],
        ],
      },
    ];

    let rules: { file: string; groups: K8s[] };
    let alerts: K8s[];
    beforeAll(() => {
      rules = ruleFile([PRODUCTION]);
      alerts = rules.groups.flatMap((g) => g.rules).filter((r: K8s) => r.alert);
    });

    it('has a case for every alert the chart renders', () => {
      expect(cases.map((c) => c.alert).sort()).toEqual(alerts.map((a) => a.alert).sort());
    });

    it('with no retention series at all (no worker ever ran), RoostRetentionNotRunning fires too', () => {
      const dir = join(rules.file, '..');
      writeFileSync(
        join(dir, 'absent.test.yaml'),
        stringify({
          rule_files: ['rules.yaml'],
          evaluation_interval: '1m',
          tests: [
            {
              interval: '1m',
              input_series: [{ series: `up{${sel('roost-api')}}`, values: '1x30' }],
              alert_rule_test: [
                {
                  eval_time: '15m',
                  alertname: 'RoostRetentionNotRunning',
                  exp_alerts: [
                    expected(
                      'RoostRetentionNotRunning',
                      { severity: 'warning' },
                      'No successful retention run in 30 minutes',
                    ),
                  ],
                },
              ],
            },
          ],
        }),
      );
      const run = promtool(['test', 'rules', 'absent.test.yaml'], dir);
      expect([run.status, run.output]).toEqual([0, expect.stringContaining('SUCCESS')]);
    });

    /** An expected alert: its labels, and its annotations with the summary Prometheus renders. */
    function expected(alert: string, labels: Record<string, string>, summary: string) {
      const rule = alerts.find((a) => a.alert === alert)!;
      return { exp_labels: labels, exp_annotations: { ...rule.annotations, summary } };
    }

    it.each(cases.map((c) => [c.alert, c] as const))('%s', (alert, c) => {
      const dir = join(rules.file, '..');
      const series = (list: Array<[string, string]>) => list.map(([s, values]) => ({ series: s, values }));
      const tests = [
        {
          interval: '1m',
          input_series: series(c.fires.series),
          alert_rule_test: [
            { eval_time: c.fires.at, alertname: alert, exp_alerts: [expected(alert, c.fires.labels, c.fires.summary)] },
          ],
        },
        ...c.quiet.map((quiet) => ({
          interval: '1m',
          input_series: series(quiet),
          alert_rule_test: ['5m', '15m', '30m'].map((at) => ({ eval_time: at, alertname: alert, exp_alerts: [] })),
        })),
      ];
      const file = `${alert}.test.yaml`;
      writeFileSync(join(dir, file), stringify({ rule_files: ['rules.yaml'], evaluation_interval: '1m', tests }));
      const run = promtool(['test', 'rules', file], dir);
      expect([run.status, run.output]).toEqual([0, expect.stringContaining('SUCCESS')]);
    });

    it('a wrong expectation fails promtool test rules (the test is real)', () => {
      const dir = join(rules.file, '..');
      const c = cases[0];
      writeFileSync(
        join(dir, 'wrong.test.yaml'),
        stringify({
          rule_files: ['rules.yaml'],
          tests: [
            {
              interval: '1m',
              input_series: c.quiet[0].map(([s, values]) => ({ series: s, values })),
              alert_rule_test: [
                {
                  eval_time: c.fires.at,
                  alertname: c.alert,
                  exp_alerts: [expected(c.alert, c.fires.labels, c.fires.summary)],
                },
              ],
            },
          ],
        }),
      );
      const run = promtool(['test', 'rules', 'wrong.test.yaml'], dir);
      expect(run.status).not.toBe(0);
      expect(run.output).toContain(c.alert);
    });
  });
});

describeWithTool(promtoolMissing())('the Grafana dashboard, checked by promtool', () => {
  const dashboard = JSON.parse(readFileSync(join(DEPLOY, 'grafana', 'roost.json'), 'utf8')) as {
    templating: { list: Array<{ name: string; query: unknown }> };
    panels: Array<{ id: number; title: string; targets?: Array<{ refId: string; expr: string }> }>;
  };
  /** Grafana's variables as a query would see them on a real dashboard. */
  const substitute = (expr: string) =>
    expr
      .replaceAll('$__rate_interval', '2m')
      .replaceAll('$namespace', 'roost')
      .replaceAll('$job', 'roost-api|roost-gateway');

  it('every panel query and variable query parses as PromQL', () => {
    const rules: Array<{ record: string; expr: string }> = [];
    for (const panel of dashboard.panels) {
      for (const target of panel.targets ?? [])
        rules.push({ record: `grafana_panel_${panel.id}_${target.refId}`, expr: substitute(target.expr) });
    }
    for (const variable of dashboard.templating.list) {
      const query = variable.query as { query?: string } | string | undefined;
      const text = typeof query === 'string' ? query : query?.query;
      const inner = text && /^label_values\((.+),\s*\w+\)$/.exec(text)?.[1];
      if (inner) rules.push({ record: `grafana_variable_${variable.name}`, expr: substitute(inner) });
    }
    expect(rules.length).toBeGreaterThan(40);
    const dir = mkdtempSync(join(tmpdir(), 'roost-grafana-'));
    writeFileSync(join(dir, 'panels.yaml'), stringify({ groups: [{ name: 'grafana', rules }] }));
    const run = promtool(['check', 'rules', join(dir, 'panels.yaml')]);
    expect([run.status, run.output]).toEqual([0, expect.stringContaining(`SUCCESS: ${rules.length} rules found`)]);
  });
});
