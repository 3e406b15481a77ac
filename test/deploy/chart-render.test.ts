import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { schemaErrors, strictFieldErrors } from './k8s-schemas';
import {
  CHART,
  DEPLOY,
  KUBE_VERSION,
  ROOT,
  configEnvNames,
  defaultValues,
  describeWithTool,
  helm,
  helmMissing,
  installDryRun,
  loadYaml,
  overlay,
  renderChart,
  valuesFile,
  type Rendered,
  type Values,
} from './support';

/**
 * The chart rendered by the real Helm (the pinned binary of scripts/fetch-helm.sh) over a matrix of
 * values: `helm lint --strict` passes, every object validates against the Kubernetes v1.33 API
 * (k8s-schemas.ts: OpenAPI schemas and strict fields), and the chart's own invariants hold.
 */

type K8s = Record<string, any>;

const MINIMAL = join(CHART, 'examples', 'minimal.yaml');
const PRODUCTION = join(CHART, 'examples', 'production.yaml');
const REQUIRED = { postgres: { url: 'postgres://roost:pw@db:5432/roost' }, redis: { url: 'redis://cache:6379' } };
/** Secrets the variants name as existing (created outside the chart). */
const EXTERNAL_SECRETS = new Set(['roost-credentials', 'pg', 'cache', 'admin', 'internal-ca']);
/** Variables the chart sets that the config loader does not read, on purpose. */
const NOT_ROOST_CONFIG = new Set([
  'NODE_EXTRA_CA_CERTS',
  'NODE_OPTIONS',
  'EXTRA_GLOBAL',
  'EXTRA_ROLE',
  'EXTRA_MIGRATE',
]);

const everyOptionalBlock = {
  fullnameOverride: 'r'.repeat(80),
  imagePullSecrets: [{ name: 'pull' }],
  image: { digest: `sha256:${'b'.repeat(64)}` },
  preStopSleepSeconds: 0,
  caBundle: { configMap: '', secret: 'internal-ca', key: 'bundle.pem' },
  extraEnv: [{ name: 'EXTRA_GLOBAL', value: '1' }],
  extraEnvFrom: [{ configMapRef: { name: 'global-env' } }],
  extraVolumes: [{ name: 'global-vol', configMap: { name: 'global-files' } }],
  extraVolumeMounts: [{ name: 'global-vol', mountPath: '/etc/global', readOnly: true }],
  initContainers: [{ name: 'global-init', image: 'busybox:1.36', command: ['true'] }],
  ...Object.fromEntries(
    ['api', 'gateway', 'worker', 'migrations'].map((role) => [
      role,
      {
        extraEnv: [{ name: role === 'migrations' ? 'EXTRA_MIGRATE' : 'EXTRA_ROLE', value: role }],
        extraEnvFrom: [{ secretRef: { name: `${role}-env` } }],
        extraVolumes: [{ name: `${role}-vol`, emptyDir: {} }],
        extraVolumeMounts: [{ name: `${role}-vol`, mountPath: `/var/${role}` }],
        initContainers: [{ name: `${role}-init`, image: 'busybox:1.36', command: ['true'] }],
        ...(role === 'api'
          ? {
              podAnnotations: { a: 'b' },
              nodeSelector: { pool: 'api' },
              tolerations: [{ key: 'k', operator: 'Exists' }],
              priorityClassName: 'high',
            }
          : {}),
      },
    ]),
  ),
};

/** [name, value files (after values.yaml), the objects' name prefix (release roost)]. */
const VARIANTS: Array<[string, Array<string | Values>, string]> = [
  ['required values only (ingress off)', [REQUIRED], 'roost'],
  ['examples/minimal.yaml', [MINIMAL], 'roost'],
  ['examples/production.yaml (ingress with TLS, monitoring, CA bundle, pinned egress)', [PRODUCTION], 'roost'],
  [
    'existingSecret everywhere',
    [
      {
        postgres: { existingSecret: 'pg' },
        redis: { existingSecret: 'cache', existingSecretKey: 'url' },
        adminToken: { existingSecret: 'admin' },
      },
    ],
    'roost',
  ],
  [
    'ingress on without TLS, token hash, no worker',
    [
      MINIMAL,
      {
        ingress: { enabled: true, host: 'roost.test' },
        adminToken: { hash: 'a'.repeat(64) },
        worker: { enabled: false },
      },
    ],
    'roost',
  ],
  [
    'HPA off on every role',
    [
      REQUIRED,
      {
        api: { autoscaling: { enabled: false } },
        gateway: { autoscaling: { enabled: false } },
        worker: { autoscaling: { enabled: false } },
      },
    ],
    'roost',
  ],
  [
    'ServiceMonitor, PrometheusRule and dashboard on',
    [
      REQUIRED,
      {
        metrics: {
          serviceMonitor: { enabled: true },
          prometheusRule: { enabled: true },
          grafanaDashboard: { enabled: true },
        },
      },
    ],
    'roost',
  ],
  [
    'networkPolicy off, topology spread off, migrations off',
    [
      REQUIRED,
      { networkPolicy: { enabled: false }, topologySpread: { enabled: false }, migrations: { enabled: false } },
    ],
    'roost',
  ],
  ['every optional block, an 80-character name override', [PRODUCTION, everyOptionalBlock], 'r'.repeat(55)],
];

const files = (inputs: Array<string | Values>) =>
  inputs.map((input) => (typeof input === 'string' ? input : valuesFile(input)));
const merged = (inputs: Array<string | Values>) =>
  inputs.reduce<Values>(
    (values, input) => overlay(values, typeof input === 'string' ? loadYaml(input) : input),
    defaultValues(),
  );

function render(valueFiles: string[]): Rendered {
  const result = renderChart(valueFiles);
  if (!result.ok) throw new Error(result.error);
  return result.rendered;
}

const find = (r: Rendered, kind: string, name: string) =>
  r.objects.find((o) => o.kind === kind && o.metadata?.name === name);
const podsOf = (r: Rendered) => r.objects.filter((o) => o.kind === 'Deployment' || o.kind === 'Job');
const roleOf = (o: K8s): string => o.metadata.labels['app.kubernetes.io/component'];
const valuesKeyOf = (role: string) => (role === 'migrate' ? 'migrations' : role);
const subset = (selector: Record<string, string>, labels: Record<string, string>) =>
  Object.entries(selector).every(([k, v]) => labels[k] === v);

const describeHelm = describeWithTool(helmMissing());

describeHelm(`the chart, rendered by Helm for Kubernetes ${KUBE_VERSION}`, () => {
  const rendered = new Map<string, Rendered>();
  let strictErrors: string[] = [];

  beforeAll(() => {
    const all: K8s[] = [];
    const labels: string[] = [];
    for (const [name, inputs] of VARIANTS) {
      const r = render(files(inputs));
      rendered.set(name, r);
      all.push(...r.objects);
      labels.push(...r.objects.map(() => name));
    }
    // a canary: a field the API does not have and a wrong type must be reported
    const canary = structuredClone(all.find((o) => o.kind === 'Deployment')!);
    canary.spec.template.spec.containers[0].readinessProbes = canary.spec.template.spec.containers[0].readinessProbe;
    canary.spec.template.spec.topologySpreadConstraints[0].maxSkew = '1';
    strictErrors = strictFieldErrors([...all, canary], [...labels, 'canary']);
  }, 120_000);

  it('validates against the Kubernetes 1.33 API: kubernetes-models 4.5 (its v1.33.0 OpenAPI schema)', () => {
    const models = JSON.parse(
      readFileSync(join(ROOT, 'node_modules', 'kubernetes-models', 'package.json'), 'utf8'),
    ) as { version: string };
    expect(models.version).toMatch(/^4\.5\./);
    expect(KUBE_VERSION).toBe('1.33.0');
  });

  it('the strict field check reports an unknown field and a wrong type (the check is real)', () => {
    const canary = strictErrors.filter((e) => e.startsWith('canary:'));
    expect(canary).toEqual([
      expect.stringMatching(/'"readinessProbes"' does not exist in type 'IContainer'/),
      expect.stringMatching(/Type 'string' is not assignable to type 'number'/),
    ]);
  });

  it.each(VARIANTS)('helm lint --strict passes with %s', (_name, inputs) => {
    const args = ['lint', '--strict', CHART, '--kube-version', KUBE_VERSION];
    for (const file of files(inputs)) args.push('--values', file);
    const run = helm(args);
    expect([run.status, run.stdout + run.stderr]).toEqual([
      0,
      expect.stringContaining('1 chart(s) linted, 0 chart(s) failed'),
    ]);
    expect(run.stdout).not.toMatch(/\[(WARNING|ERROR)\]/);
  });

  describe.each(VARIANTS)('%s', (name, inputs, fullname) => {
    let r: Rendered;
    let values: Values;
    beforeAll(() => {
      r = rendered.get(name)!;
      values = merged(inputs);
    });
    const v = (path: string): any => path.split('.').reduce<any>((node, key) => node?.[key], values);

    it('renders only objects valid against the Kubernetes API (schemas and strict fields)', () => {
      expect(r.objects.length).toBeGreaterThan(5);
      expect(r.objects.map(schemaErrors).filter((e) => e !== null)).toEqual([]);
      expect(strictErrors.filter((e) => e.startsWith(`${name}:`))).toEqual([]);
    });

    it('names every object within 63 characters, in the release namespace (the dashboard where asked)', () => {
      for (const object of r.objects) {
        expect(object.metadata.name.length).toBeLessThanOrEqual(63);
        const dashboard = object.metadata.labels?.grafana_dashboard !== undefined;
        expect(object.metadata.namespace).toBe(
          dashboard ? v('metrics.grafanaDashboard.namespace') || 'roost' : 'roost',
        );
      }
      const names = r.objects.map((o) => `${o.kind}/${o.metadata.name}`);
      expect(new Set(names).size).toBe(names.length);
    });

    it('runs every Roost pod non-root on a read-only root with emptyDir /tmp and /data', () => {
      for (const workload of podsOf(r)) {
        const pod = workload.spec.template.spec;
        expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 1000 });
        expect(pod.automountServiceAccountToken).toBe(false);
        const container = pod.containers[0];
        expect(container.securityContext).toMatchObject({
          readOnlyRootFilesystem: true,
          allowPrivilegeEscalation: false,
          capabilities: { drop: ['ALL'] },
        });
        const volumes = new Map<string, K8s>(pod.volumes.map((vol: K8s) => [vol.name, vol]));
        expect(volumes.size).toBe(pod.volumes.length);
        const mounts = new Map<string, string>(container.volumeMounts.map((m: K8s) => [m.mountPath, m.name]));
        expect(mounts.size).toBe(container.volumeMounts.length);
        expect(volumes.get(mounts.get('/tmp')!)?.emptyDir).toBeDefined();
        expect(volumes.get(mounts.get('/data')!)?.emptyDir).toBeDefined();
        for (const c of [...pod.containers, ...(pod.initContainers ?? [])]) {
          for (const mount of c.volumeMounts ?? [])
            expect([mount.name, volumes.has(mount.name)]).toEqual([mount.name, true]);
        }
        const containerNames = [...pod.containers, ...(pod.initContainers ?? [])].map((c: K8s) => c.name);
        expect(new Set(containerNames).size).toBe(containerNames.length);
      }
    });

    it('serves http on 8025 and metrics on 9464 (ROOST_METRICS_PORT), probed on http /healthz and /readyz', () => {
      const configMap = find(r, 'ConfigMap', fullname)!;
      expect(configMap.data).toMatchObject({ PORT: '8025', ROOST_METRICS_PORT: '9464', ROOST_HOST: '0.0.0.0' });
      for (const deployment of r.objects.filter((o) => o.kind === 'Deployment')) {
        const container = deployment.spec.template.spec.containers[0];
        const role = roleOf(deployment);
        expect(container.args).toEqual([role]);
        expect(container.env.find((e: K8s) => e.name === 'ROOST_ROLE')?.value).toBe(role);
        expect(container.envFrom[0]).toEqual({ configMapRef: { name: fullname } });
        expect(container.ports).toEqual([
          { name: 'http', containerPort: 8025, protocol: 'TCP' },
          { name: 'metrics', containerPort: 9464, protocol: 'TCP' },
        ]);
        expect(container.startupProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
        expect(container.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
        expect(container.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'http' });
        expect(container.resources.requests).toBeDefined();
        const service = find(r, 'Service', deployment.metadata.name)!;
        expect(service.spec.ports).toEqual([
          { name: 'http', port: 80, targetPort: 'http', protocol: 'TCP' },
          { name: 'metrics', port: 9464, targetPort: 'metrics', protocol: 'TCP' },
        ]);
      }
      for (const job of r.objects.filter((o) => o.kind === 'Job'))
        expect(job.spec.template.spec.containers[0].args).toEqual(['migrate']);
    });

    it('routes the Ingress only to http ports, and scrapes only the metrics port', () => {
      for (const ingress of r.objects.filter((o) => o.kind === 'Ingress')) {
        for (const path of ingress.spec.rules[0].http.paths) {
          expect(path.backend.service.port).toEqual({ name: 'http' });
          expect(find(r, 'Service', path.backend.service.name)).toBeDefined();
        }
      }
      expect(r.objects.some((o) => o.kind === 'Ingress')).toBe(Boolean(v('ingress.enabled')));
      const monitor = r.objects.find((o) => o.kind === 'ServiceMonitor');
      expect(Boolean(monitor)).toBe(Boolean(v('metrics.serviceMonitor.enabled')));
      if (monitor) {
        expect(monitor.spec.endpoints.map((e: K8s) => [e.port, e.path])).toEqual([['metrics', '/metrics']]);
        const selected = r.objects.filter(
          (o) =>
            o.kind === 'Service' &&
            subset(monitor.spec.selector.matchLabels, o.metadata.labels) &&
            monitor.spec.selector.matchExpressions[0].values.includes(roleOf(o)),
        );
        expect(selected.map((s) => s.metadata.name).sort()).toEqual(
          r.objects
            .filter((o) => o.kind === 'Deployment')
            .map((d) => d.metadata.name)
            .sort(),
        );
        for (const service of selected) expect(service.spec.ports.map((p: K8s) => p.name)).toContain('metrics');
      }
    });

    it('gives every pod the credentials from a Secret that exists (rendered or named as existing)', () => {
      const secrets = new Set(r.objects.filter((o) => o.kind === 'Secret').map((o) => o.metadata.name));
      for (const workload of podsOf(r)) {
        const env = workload.spec.template.spec.containers[0].env as K8s[];
        const names = env.map((e) => e.name);
        expect(names).toContain('DATABASE_URL');
        if (workload.kind === 'Deployment') {
          expect(names).toContain('REDIS_URL');
          expect(names.includes('ROOST_ADMIN_TOKEN') || names.includes('ROOST_ADMIN_TOKEN_HASH')).toBe(true);
        }
        for (const ref of env.filter((e) => e.valueFrom?.secretKeyRef).map((e) => e.valueFrom.secretKeyRef)) {
          expect([ref.name, secrets.has(ref.name) || EXTERNAL_SECRETS.has(ref.name)]).toEqual([ref.name, true]);
        }
      }
    });

    it('sets only environment variables the config loader reads (or Node reads)', () => {
      const known = configEnvNames();
      const configMap = find(r, 'ConfigMap', fullname)!;
      const names = [
        ...Object.keys(configMap.data),
        ...podsOf(r).flatMap((w) => w.spec.template.spec.containers[0].env.map((e: K8s) => e.name)),
      ].filter((n) => !NOT_ROOST_CONFIG.has(n) && !n.startsWith('ROOST_SCHEDULE'));
      expect(names.filter((n) => !known.has(n))).toEqual([]);
      for (const value of Object.values(configMap.data)) expect(value).not.toMatch(/e\+\d/); // no 1.048576e+06
      for (const workload of podsOf(r)) {
        const env = workload.spec.template.spec.containers[0].env.map((e: K8s) => e.name);
        expect(new Set(env).size).toBe(env.length);
      }
    });

    it("selects each role's pods from its Service, PodDisruptionBudget and HorizontalPodAutoscaler", () => {
      for (const deployment of r.objects.filter((o) => o.kind === 'Deployment')) {
        const labels = deployment.spec.template.metadata.labels;
        expect(subset(deployment.spec.selector.matchLabels, labels)).toBe(true);
        const name = deployment.metadata.name;
        expect(deployment.spec.selector.matchLabels['app.kubernetes.io/component']).toBe(roleOf(deployment));
        expect(find(r, 'Service', name)!.spec.selector).toEqual(deployment.spec.selector.matchLabels);
        const pdb = find(r, 'PodDisruptionBudget', name);
        if (pdb) expect(pdb.spec.selector.matchLabels).toEqual(deployment.spec.selector.matchLabels);
        const hpa = find(r, 'HorizontalPodAutoscaler', name);
        expect(Boolean(hpa)).toBe(Boolean(v(`${roleOf(deployment)}.autoscaling.enabled`)));
        if (hpa) {
          expect(hpa.spec.scaleTargetRef).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name });
          expect(deployment.spec.replicas).toBeUndefined();
        } else {
          expect(deployment.spec.replicas).toEqual(v(`${roleOf(deployment)}.replicaCount`));
        }
      }
    });

    it('spreads every role softly over nodes and zones unless the role sets its own constraints', () => {
      for (const deployment of r.objects.filter((o) => o.kind === 'Deployment')) {
        const pod = deployment.spec.template;
        const own = v(`${roleOf(deployment)}.topologySpreadConstraints`) as K8s[];
        if (own.length > 0) {
          expect(pod.spec.topologySpreadConstraints).toEqual(own);
        } else if (v('topologySpread.enabled')) {
          const constraints = pod.spec.topologySpreadConstraints as K8s[];
          expect(constraints.map((c) => c.topologyKey)).toEqual([
            'kubernetes.io/hostname',
            'topology.kubernetes.io/zone',
          ]);
          for (const c of constraints) {
            expect(c.whenUnsatisfiable).toBe('ScheduleAnyway');
            expect(subset(c.labelSelector.matchLabels, pod.metadata.labels)).toBe(true);
            expect(c.labelSelector.matchLabels['app.kubernetes.io/component']).toBe(roleOf(deployment));
          }
        } else {
          expect(pod.spec.topologySpreadConstraints).toBeUndefined();
        }
      }
    });

    it('isolates every pod with exactly one NetworkPolicy: http from the ingress and the release, metrics from monitoring, egress to Postgres, Redis and DNS', () => {
      const policies = r.objects.filter((o) => o.kind === 'NetworkPolicy');
      if (!v('networkPolicy.enabled')) {
        expect(policies).toEqual([]);
        return;
      }
      const workloads = podsOf(r);
      const roles = new Set(workloads.map(roleOf));
      if (v('migrations.enabled')) roles.add('migrate');
      expect(policies.map(roleOf).sort()).toEqual([...roles].sort());
      const ports = (rule: K8s) => (rule.ports ?? []).map((p: K8s) => `${p.port}/${p.protocol}`).sort();
      for (const workload of workloads) {
        const labels = workload.spec.template.metadata.labels;
        const role = roleOf(workload);
        const mine = policies.filter((p) => subset(p.spec.podSelector.matchLabels, labels));
        expect(mine.map((p) => p.metadata.name)).toEqual([`${fullname}-${role}`]);
        const [policy] = mine;
        expect(policy.spec.policyTypes).toEqual(['Ingress', 'Egress']);
        // nothing may open every port, and the metrics port only to metricsFrom
        for (const rule of policy.spec.ingress) {
          expect(rule.ports?.length).toBeGreaterThan(0);
          expect(rule.from?.length).toBeGreaterThan(0);
          if (ports(rule).includes('metrics/TCP'))
            expect([ports(rule), rule.from]).toEqual([['metrics/TCP'], v('networkPolicy.metricsFrom')]);
          for (const port of rule.ports) expect([8025, 9464]).not.toContain(port.port); // named ports only
        }
        const http = policy.spec.ingress.filter((rule: K8s) => ports(rule).includes('http/TCP'));
        if (role === 'api' || role === 'gateway') {
          expect(http).toHaveLength(1);
          expect(http[0].from).toEqual([
            ...v('networkPolicy.ingressFrom'),
            {
              podSelector: {
                matchLabels: { 'app.kubernetes.io/name': 'roost', 'app.kubernetes.io/instance': 'roost' },
              },
            },
          ]);
        } else {
          expect(http).toEqual([]);
        }
        const egress = policy.spec.egress as K8s[];
        for (const rule of egress.slice(0, role === 'migrate' ? 2 : 3)) expect(rule.ports?.length).toBeGreaterThan(0);
        const allowed = egress.flatMap(ports);
        const expected = ['5432/TCP', '53/UDP', '53/TCP', ...(role === 'migrate' ? [] : ['6379/TCP'])];
        expect(allowed.sort()).toEqual(expected.sort());
        const postgresRule = egress.find((rule) => ports(rule).includes('5432/TCP'))!;
        expect(postgresRule.to ?? []).toEqual(v('networkPolicy.egress.postgres.to'));
      }
    });

    it('mounts the CA bundle and names it in NODE_EXTRA_CA_CERTS in every pod, when one is given', () => {
      const bundle = v('caBundle') as { configMap: string; secret: string; key: string };
      for (const workload of podsOf(r)) {
        const pod = workload.spec.template.spec;
        const container = pod.containers[0];
        const extra = container.env.find((e: K8s) => e.name === 'NODE_EXTRA_CA_CERTS');
        if (!bundle.configMap && !bundle.secret) {
          expect(extra).toBeUndefined();
          continue;
        }
        const mount = container.volumeMounts.find((m: K8s) => extra.value.startsWith(`${m.mountPath}/`));
        expect(mount.readOnly).toBe(true);
        const volume = pod.volumes.find((vol: K8s) => vol.name === mount.name);
        const source = bundle.configMap ? volume.configMap : volume.secret;
        expect(bundle.configMap ? source.name : source.secretName).toBe(bundle.configMap || bundle.secret);
        expect(source.items).toEqual([{ key: bundle.key, path: extra.value.slice(mount.mountPath.length + 1) }]);
      }
    });

    it("adds extraEnv, extraEnvFrom, extraVolumes, extraVolumeMounts and initContainers (global, then the role's) to every pod", () => {
      for (const workload of podsOf(r)) {
        const key = valuesKeyOf(roleOf(workload));
        const pod = workload.spec.template.spec;
        const container = pod.containers[0];
        const global = (name: string) => v(name) as K8s[];
        const own = (name: string) => v(`${key}.${name}`) as K8s[];
        const tail = <T>(list: T[] | undefined, n: number) => (list ?? []).slice((list ?? []).length - n);
        const expectTail = (list: K8s[] | undefined, wanted: K8s[]) =>
          expect(tail(list, wanted.length)).toEqual(wanted);
        expectTail(pod.initContainers, [...global('initContainers'), ...own('initContainers')]);
        expectTail(pod.volumes, [...global('extraVolumes'), ...own('extraVolumes')]);
        expectTail(container.volumeMounts, [...global('extraVolumeMounts'), ...own('extraVolumeMounts')]);
        expectTail(container.envFrom, [...global('extraEnvFrom'), ...own('extraEnvFrom')]);
        expectTail(container.env, own('extraEnv'));
        for (const env of global('extraEnv')) expect(container.env).toContainEqual(env);
      }
    });

    it('runs migrations in a pre-install,pre-upgrade hook Job whose Secret exists before it', () => {
      const job = r.objects.find((o) => o.kind === 'Job');
      expect(Boolean(job)).toBe(Boolean(v('migrations.enabled')));
      if (!job) return;
      expect(job.metadata.annotations['helm.sh/hook']).toBe('pre-install,pre-upgrade');
      const ref = job.spec.template.spec.containers[0].env.find((e: K8s) => e.name === 'DATABASE_URL').valueFrom
        .secretKeyRef;
      const hookSecret = find(r, 'Secret', ref.name);
      if (hookSecret) {
        expect(hookSecret.metadata.annotations['helm.sh/hook']).toBe('pre-install,pre-upgrade');
        expect(Number(hookSecret.metadata.annotations['helm.sh/hook-weight'])).toBeLessThan(
          Number(job.metadata.annotations['helm.sh/hook-weight']),
        );
      } else {
        expect(EXTERNAL_SECRETS.has(ref.name)).toBe(true);
      }
    });

    it('ships the Grafana dashboard as a ConfigMap with the grafana_dashboard label, when enabled', () => {
      const dashboards = r.objects.filter(
        (o) => o.kind === 'ConfigMap' && o.metadata.labels.grafana_dashboard !== undefined,
      );
      expect(dashboards).toHaveLength(v('metrics.grafanaDashboard.enabled') ? 1 : 0);
      for (const dashboard of dashboards) {
        expect(dashboard.metadata.labels.grafana_dashboard).toBe('1');
        expect(JSON.parse(dashboard.data['roost.json'])).toEqual(
          JSON.parse(readFileSync(join(DEPLOY, 'grafana', 'roost.json'), 'utf8')),
        );
      }
    });
  });

  describe('values that Helm refuses, naming the key', () => {
    const refused: Array<[string, Values[], RegExp[]]> = [
      [
        'no values at all (Postgres and Redis missing)',
        [],
        [/at '\/postgres\/url': minLength/, /at '\/postgres\/existingSecret'/, /at '\/redis\/url'/],
      ],
      ['Redis missing', [{ postgres: { url: 'postgres://db/roost' } }], [/at '\/redis\/url': minLength/]],
      [
        'a replica count as text',
        [REQUIRED, { api: { replicaCount: 'two' } }],
        [/at '\/api\/replicaCount': got string, want integer/],
      ],
      ['a misspelt key', [REQUIRED, { gatway: { enabled: true } }], [/additional properties 'gatway' not allowed/]],
      [
        'a NetworkPolicy port as text',
        [REQUIRED, { networkPolicy: { egress: { postgres: { port: 'five' } } } }],
        [/at '\/networkPolicy\/egress\/postgres\/port': got string, want integer/],
      ],
      [
        'a volume without a name',
        [REQUIRED, { extraVolumes: [{ emptyDir: {} }] }],
        [/at '\/extraVolumes\/0': missing property 'name'/],
      ],
      ['the metrics port on the http port', [REQUIRED, { metrics: { port: 8025 } }], [/at '\/metrics\/port'/]],
      [
        'a CA bundle from both a ConfigMap and a Secret',
        [REQUIRED, { caBundle: { configMap: 'a', secret: 'b' } }],
        [/set caBundle\.configMap or caBundle\.secret, not both/],
      ],
    ];

    it.each(refused)('%s: helm template and helm install fail', (_what, inputs, messages) => {
      const valueFiles = inputs.map(valuesFile);
      const template = renderChart(valueFiles);
      const install = installDryRun(valueFiles);
      for (const result of [template, install]) {
        expect(result.ok).toBe(false);
        for (const message of messages) expect(!result.ok && result.error).toMatch(message);
      }
    });
  });

  it('routes /connect to the gateway Service with WebSocket timeouts and everything else to the api', () => {
    const r = render([PRODUCTION]);
    const ingresses = r.objects.filter((o) => o.kind === 'Ingress');
    const routes = ingresses.flatMap((ingress) =>
      ingress.spec.rules[0].http.paths.map((path: K8s) => ({
        path: path.path,
        service: path.backend.service.name,
        annotations: ingress.metadata.annotations,
      })),
    );
    expect(routes.map(({ path, service }) => [path, service]).sort()).toEqual([
      ['/', 'roost-api'],
      ['/connect', 'roost-gateway'],
    ]);
    const gateway = routes.find((route) => route.path === '/connect')!;
    expect(gateway.annotations).toMatchObject({
      'nginx.ingress.kubernetes.io/proxy-read-timeout': '3600',
      'nginx.ingress.kubernetes.io/proxy-send-timeout': '3600',
    });
    expect(
      routes.find((route) => route.path === '/')!.annotations['nginx.ingress.kubernetes.io/proxy-read-timeout'],
    ).toBeUndefined();
    for (const ingress of ingresses)
      expect(ingress.spec.tls).toEqual([{ hosts: ['mail.example.com'], secretName: 'roost-tls' }]);
  });

  it('writes the alerts the runbook documents, scoped to the release, with Prometheus templates left for Prometheus', () => {
    const r = render([PRODUCTION]);
    const rule = r.objects.find((o) => o.kind === 'PrometheusRule')!;
    const alerts = (rule.spec.groups[0].rules as K8s[]).filter((a) => a.alert);
    expect(alerts.map((a) => a.alert)).toEqual(
      expect.arrayContaining([
        'RoostAcceptErrorRateHigh',
        'RoostNoReadyReplicas',
        'RoostJobsFailing',
        'RoostRetentionNotRunning',
        'RoostWsSlowConsumerCloses',
      ]),
    );
    const runbook = readFileSync(join(ROOT, 'docs', 'operations.md'), 'utf8');
    for (const alert of alerts) {
      expect(runbook).toContain(`### ${alert.alert}`);
      expect(alert.annotations.runbook_url).toContain(`#${alert.alert.toLowerCase()}`);
      expect(alert.expr).toMatch(/namespace="roost"/);
    }
    expect(alerts.find((a) => a.alert === 'RoostAcceptErrorRateHigh')!.annotations.summary).toContain(
      '{{ $value | humanizePercentage }}',
    );
    // without a worker, no alert waits for worker metrics; without gateways, none for sockets
    const noWorker = render([
      MINIMAL,
      valuesFile({
        worker: { enabled: false },
        gateway: { enabled: false },
        metrics: { prometheusRule: { enabled: true } },
      }),
    ]);
    const names = noWorker.objects
      .find((o) => o.kind === 'PrometheusRule')!
      .spec.groups[0].rules.map((a: K8s) => a.alert);
    expect(names).not.toEqual(expect.arrayContaining(['RoostRetentionNotRunning']));
    expect(
      names.filter((n: string) =>
        ['RoostJobsFailing', 'RoostRetentionNotRunning', 'RoostWsSlowConsumerCloses', 'RoostScheduleLagHigh'].includes(
          n,
        ),
      ),
    ).toEqual([]);
  });

  it('generates an admin token into the chart Secret when none is given, and the install notes show how to read it', () => {
    const r = render([MINIMAL]);
    const secret = find(r, 'Secret', 'roost')!;
    expect(Buffer.from(secret.data.ROOST_ADMIN_TOKEN, 'base64').toString().length).toBeGreaterThanOrEqual(16);
    expect(Buffer.from(secret.data.DATABASE_URL, 'base64').toString()).toMatch(/^postgres:\/\//);
    const install = installDryRun([MINIMAL]);
    if (!install.ok) throw new Error(install.error);
    expect(install.release.info.notes).toContain(
      "kubectl -n roost get secret roost -o jsonpath='{.data.ROOST_ADMIN_TOKEN}'",
    );
    // the migration Job and its Secret are hooks, the rest release objects
    expect(install.release.hooks.map((h) => h.manifest.match(/^kind: (\w+)/m)?.[1]).sort()).toEqual(['Job', 'Secret']);
  });
});
