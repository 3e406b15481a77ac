import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { CHART, configEnvNames, exampleFiles, renderChart, rendererUnavailable, type Rendered } from './support';

/**
 * Renders the chart with test/deploy/helm-render (Go's text/template + Sprig + Helm's functions,
 * not the helm binary, which cannot be installed here) and validates every object against the
 * Kubernetes OpenAPI schemas shipped by kubernetes-models (and the prometheus-operator CRD schemas).
 * Skipped, and said so, where the Go toolchain and Debian's Sprig sources are missing.
 */
const unavailable = rendererUnavailable();
const describeRender = unavailable === null ? describe : describe.skip;
if (unavailable !== null) {
  // eslint-disable-next-line no-console
  console.warn(`chart rendering tests skipped: ${unavailable}`);
}

const MODELS: Record<string, string> = {
  'v1/ConfigMap': 'kubernetes-models/v1/ConfigMap',
  'v1/Secret': 'kubernetes-models/v1/Secret',
  'v1/Service': 'kubernetes-models/v1/Service',
  'v1/ServiceAccount': 'kubernetes-models/v1/ServiceAccount',
  'apps/v1/Deployment': 'kubernetes-models/apps/v1/Deployment',
  'batch/v1/Job': 'kubernetes-models/batch/v1/Job',
  'policy/v1/PodDisruptionBudget': 'kubernetes-models/policy/v1/PodDisruptionBudget',
  'autoscaling/v2/HorizontalPodAutoscaler': 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler',
  'networking.k8s.io/v1/Ingress': 'kubernetes-models/networking.k8s.io/v1/Ingress',
  'monitoring.coreos.com/v1/ServiceMonitor': '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor',
  'monitoring.coreos.com/v1/PrometheusRule': '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule',
};

type K8s = Record<string, any>;

function schemaErrors(object: K8s): string | null {
  const module = MODELS[`${object.apiVersion}/${object.kind}`];
  if (!module) return `no schema known for ${object.apiVersion} ${object.kind}`;
  const exported = require(module) as Record<string, new (data: K8s) => { validate(): void }>;
  try {
    new exported[object.kind](object).validate();
    return null;
  } catch (error) {
    return `${object.kind}/${object.metadata?.name}: ${(error as Error).message}`;
  }
}

function valuesFile(values: unknown): string {
  const file = join(mkdtempSync(join(tmpdir(), 'roost-values-')), 'values.yaml');
  writeFileSync(file, stringify(values));
  return file;
}

function render(files: string[]): Rendered {
  const result = renderChart(files);
  if (!result.ok) throw new Error(result.error);
  return result.rendered;
}

const find = (r: Rendered, kind: string, name: string) => r.objects.find((o) => o.kind === kind && o.metadata?.name === name);
const MINIMAL = join(CHART, 'examples', 'minimal.yaml');
const PRODUCTION = join(CHART, 'examples', 'production.yaml');

describeRender('chart rendering', () => {
  it('with values.yaml alone, fails with the setting to provide', () => {
    const result = renderChart([]);
    expect(result.ok).toBe(false);
    expect(!result.ok && result.error).toMatch(/set postgres\.url or postgres\.existingSecret/);
  });

  it('without Redis, fails with the setting to provide', () => {
    const result = renderChart([valuesFile({ postgres: { url: 'postgres://db/roost' } })]);
    expect(!result.ok && result.error).toMatch(/set redis\.url or redis\.existingSecret/);
  });

  const variants: Array<[string, string[]]> = [
    ...exampleFiles().map((file): [string, string[]] => [`examples/${file.split('/').pop()}`, [file]]),
    ['ingress without TLS, token hash, no worker', [MINIMAL, valuesFile({ ingress: { enabled: true, host: 'roost.test' }, adminToken: { hash: 'a'.repeat(64) }, worker: { enabled: false } })]],
    ['a long release name override and every optional block', [PRODUCTION, valuesFile({
      fullnameOverride: 'r'.repeat(80),
      imagePullSecrets: [{ name: 'pull' }],
      image: { digest: `sha256:${'b'.repeat(64)}` },
      migrations: { enabled: true },
      preStopSleepSeconds: 0,
      extraEnv: [{ name: 'NODE_OPTIONS', value: '--max-old-space-size=400' }],
      api: { podAnnotations: { a: 'b' }, nodeSelector: { pool: 'api' }, tolerations: [{ key: 'k', operator: 'Exists' }], priorityClassName: 'high' },
    })]],
  ];

  describe.each(variants)('%s', (_name, files) => {
    // Rendered in beforeAll, not while collecting: a skipped suite (no Go here) must not render.
    let rendered: Rendered;
    beforeAll(() => {
      rendered = render(files);
    });

    it('renders only objects that validate against the Kubernetes schemas', () => {
      expect(rendered.objects.length).toBeGreaterThan(5);
      expect(rendered.objects.map(schemaErrors).filter((e) => e !== null)).toEqual([]);
    });

    it('names every object within 63 characters, in the release namespace', () => {
      for (const object of rendered.objects) {
        expect(object.metadata.name.length).toBeLessThanOrEqual(63);
        if (object.kind !== 'Namespace') expect(object.metadata.namespace).toBe('roost');
      }
    });

    it('runs every Roost pod non-root on a read-only root with emptyDir /tmp and /data, probed on /healthz and /readyz', () => {
      const deployments = rendered.objects.filter((o) => o.kind === 'Deployment');
      expect(deployments.length).toBeGreaterThanOrEqual(2);
      for (const deployment of [...deployments, ...rendered.objects.filter((o) => o.kind === 'Job')]) {
        const pod = deployment.spec.template.spec;
        expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: expect.any(Number) });
        expect(pod.securityContext.runAsUser).toBeGreaterThan(0);
        expect(pod.automountServiceAccountToken).toBe(false);
        const [container] = pod.containers;
        expect(container.securityContext).toMatchObject({ readOnlyRootFilesystem: true, allowPrivilegeEscalation: false });
        const mounts = Object.fromEntries(container.volumeMounts.map((m: K8s) => [m.mountPath, m.name]));
        expect(Object.keys(mounts).sort()).toEqual(['/data', '/tmp']);
        for (const volume of pod.volumes) expect(volume.emptyDir).toBeDefined();
        if (deployment.kind === 'Deployment') {
          const role = deployment.metadata.labels['app.kubernetes.io/component'];
          expect(container.args).toEqual([role]);
          expect(container.env.find((e: K8s) => e.name === 'ROOST_ROLE')?.value).toBe(role);
          expect(container.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
          expect(container.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'http' });
          expect(container.ports).toEqual([{ name: 'http', containerPort: 8025, protocol: 'TCP' }]);
          expect(container.resources.requests).toBeDefined();
        } else {
          expect(container.args).toEqual(['migrate']);
        }
      }
    });

    it('gives every role the credentials from a Secret that exists (rendered or named as existing)', () => {
      const secrets = new Set(rendered.objects.filter((o) => o.kind === 'Secret').map((o) => o.metadata.name));
      for (const deployment of rendered.objects.filter((o) => o.kind === 'Deployment')) {
        const env = deployment.spec.template.spec.containers[0].env as K8s[];
        const names = env.map((e) => e.name);
        expect(names).toEqual(expect.arrayContaining(['DATABASE_URL', 'REDIS_URL']));
        expect(names.includes('ROOST_ADMIN_TOKEN') || names.includes('ROOST_ADMIN_TOKEN_HASH')).toBe(true);
        for (const ref of env.filter((e) => e.valueFrom?.secretKeyRef).map((e) => e.valueFrom.secretKeyRef)) {
          const rendered = secrets.has(ref.name);
          const existing = ref.name === 'roost-credentials';
          expect([ref.name, rendered || existing]).toEqual([ref.name, true]);
        }
        const configMap = deployment.spec.template.spec.containers[0].envFrom[0].configMapRef.name;
        expect(find(rendered, 'ConfigMap', configMap)).toBeDefined();
      }
    });

    it('sets only environment variables the config loader reads', () => {
      const known = configEnvNames();
      const configMap = rendered.objects.find((o) => o.kind === 'ConfigMap')!;
      const names = [
        ...Object.keys(configMap.data),
        ...rendered.objects.filter((o) => o.kind === 'Deployment').flatMap((d) => d.spec.template.spec.containers[0].env.map((e: K8s) => e.name)),
      ].filter((name) => name !== 'NODE_OPTIONS' && !name.startsWith('ROOST_SCHEDULE'));
      expect(names.filter((name) => !known.has(name))).toEqual([]);
      for (const value of Object.values(configMap.data)) expect(value).not.toMatch(/e\+\d/); // no 1.048576e+06
    });

    it('selects each role\'s pods from its Service, PodDisruptionBudget and HorizontalPodAutoscaler', () => {
      for (const deployment of rendered.objects.filter((o) => o.kind === 'Deployment')) {
        const labels = deployment.spec.template.metadata.labels;
        const matches = (selector: Record<string, string>) => Object.entries(selector).every(([k, v]) => labels[k] === v);
        expect(matches(deployment.spec.selector.matchLabels)).toBe(true);
        const name = deployment.metadata.name;
        // exactly the role's pods: the Deployment's own selector, not a broader one
        expect(deployment.spec.selector.matchLabels['app.kubernetes.io/component']).toBe(deployment.metadata.labels['app.kubernetes.io/component']);
        expect(find(rendered, 'Service', name)!.spec.selector).toEqual(deployment.spec.selector.matchLabels);
        const pdb = find(rendered, 'PodDisruptionBudget', name);
        if (pdb) expect(pdb.spec.selector.matchLabels).toEqual(deployment.spec.selector.matchLabels);
        const hpa = find(rendered, 'HorizontalPodAutoscaler', name);
        if (hpa) {
          expect(hpa.spec.scaleTargetRef).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name });
          expect(deployment.spec.replicas).toBeUndefined();
        } else {
          expect(deployment.spec.replicas).toEqual(expect.any(Number));
        }
      }
    });

    it('runs migrations in a pre-install,pre-upgrade hook Job whose Secret exists before it', () => {
      const job = rendered.objects.find((o) => o.kind === 'Job');
      expect(job?.metadata.annotations['helm.sh/hook']).toBe('pre-install,pre-upgrade');
      const ref = job!.spec.template.spec.containers[0].env.find((e: K8s) => e.name === 'DATABASE_URL').valueFrom.secretKeyRef;
      const hookSecret = find(rendered, 'Secret', ref.name);
      if (hookSecret) {
        // a hook Secret, created before the Job (lower weight), since release objects come after hooks
        expect(hookSecret.metadata.annotations['helm.sh/hook']).toBe('pre-install,pre-upgrade');
        expect(Number(hookSecret.metadata.annotations['helm.sh/hook-weight'])).toBeLessThan(Number(job!.metadata.annotations['helm.sh/hook-weight']));
      } else {
        expect(ref.name).toBe('roost-credentials');
      }
    });
  });

  it('routes /connect to the gateway Service with WebSocket timeouts and everything else to the api', () => {
    const rendered = render([PRODUCTION]);
    const ingresses = rendered.objects.filter((o) => o.kind === 'Ingress');
    const routes = ingresses.flatMap((ingress) =>
      ingress.spec.rules[0].http.paths.map((path: K8s) => ({ path: path.path, service: path.backend.service.name, annotations: ingress.metadata.annotations })),
    );
    expect(routes.map(({ path, service }) => [path, service]).sort()).toEqual([['/', 'roost-api'], ['/connect', 'roost-gateway']]);
    const gateway = routes.find((r) => r.path === '/connect')!;
    expect(gateway.annotations).toMatchObject({
      'nginx.ingress.kubernetes.io/proxy-read-timeout': '3600',
      'nginx.ingress.kubernetes.io/proxy-send-timeout': '3600',
    });
    expect(routes.find((r) => r.path === '/')!.annotations['nginx.ingress.kubernetes.io/proxy-read-timeout']).toBeUndefined();
    for (const route of routes) expect(find(rendered, 'Service', route.service)).toBeDefined();
    for (const ingress of ingresses) expect(ingress.spec.tls).toEqual([{ hosts: ['mail.example.com'], secretName: 'roost-tls' }]);
  });

  it('writes the alerts the runbook documents, with Prometheus templates left for Prometheus', () => {
    const rendered = render([PRODUCTION]);
    const rule = rendered.objects.find((o) => o.kind === 'PrometheusRule')!;
    const alerts = rule.spec.groups[0].rules as K8s[];
    expect(alerts.map((a) => a.alert)).toEqual(
      expect.arrayContaining(['RoostAcceptErrorRateHigh', 'RoostHttpLatencyP99High', 'RoostStreamReadLagHigh', 'RoostScheduleLagHigh', 'RoostPodRestarting']),
    );
    const runbook = require('node:fs').readFileSync(join(CHART, '..', '..', '..', 'docs', 'operations.md'), 'utf8') as string;
    for (const alert of alerts.filter((a) => a.alert !== 'RoostWorkerJobFailures')) {
      expect(runbook).toContain(`### ${alert.alert}`);
      expect(alert.annotations.runbook_url).toContain(`#${alert.alert.toLowerCase()}`);
      expect(alert.expr).toMatch(/namespace="roost"/);
    }
    expect(alerts.find((a) => a.alert === "RoostAcceptErrorRateHigh")!.expr).toMatch(/roost_http_requests_total\{[^}]*route="\/messages",method="POST",status=~"5\.\."\}/);
    expect(alerts.find((a) => a.alert === 'RoostAcceptErrorRateHigh')!.annotations.summary).toContain('{{ $value | humanizePercentage }}');
    const monitor = rendered.objects.find((o) => o.kind === 'ServiceMonitor')!;
    const services = rendered.objects.filter((o) => o.kind === 'Service');
    const selected = services.filter((s) =>
      Object.entries(monitor.spec.selector.matchLabels).every(([k, v]) => s.metadata.labels[k] === v) &&
      monitor.spec.selector.matchExpressions[0].values.includes(s.metadata.labels['app.kubernetes.io/component']),
    );
    expect(selected.map((s) => s.metadata.name).sort()).toEqual(['roost-api', 'roost-gateway', 'roost-worker']);
  });

  it('generates an admin token into the chart Secret when none is given, and shows how to read it', () => {
    const rendered = render([MINIMAL]);
    const secret = find(rendered, 'Secret', 'roost')!;
    expect(Buffer.from(secret.data.ROOST_ADMIN_TOKEN, 'base64').toString().length).toBeGreaterThanOrEqual(16);
    expect(Buffer.from(secret.data.DATABASE_URL, 'base64').toString()).toMatch(/^postgres:\/\//);
    expect(rendered.notes).toContain("kubectl -n roost get secret roost -o jsonpath='{.data.ROOST_ADMIN_TOKEN}'");
  });
});
