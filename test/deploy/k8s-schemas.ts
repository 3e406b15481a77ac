import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { ROOT } from './support';

/**
 * Validation of rendered objects against the Kubernetes v1.33 API (support.ts KUBE_VERSION), two ways:
 * - kubernetes-models' validators (JSON Schema from the v1.33 OpenAPI document; the
 *   prometheus-operator package for ServiceMonitor/PrometheusRule): required fields, types,
 *   enums, formats;
 * - the same models' TypeScript interfaces, with the objects compiled as typed literals: that
 *   rejects any field the API does not have (what `kubectl apply` does with strict field
 *   validation, the default since 1.27), which the OpenAPI schemas alone do not.
 */

type K8s = Record<string, any>;

/** apiVersion/kind → [module, exported class, TypeScript interface]. */
const MODELS: Record<string, [string, string, string]> = {
  'v1/ConfigMap': ['kubernetes-models/v1/ConfigMap', 'ConfigMap', 'IConfigMap'],
  'v1/Secret': ['kubernetes-models/v1/Secret', 'Secret', 'ISecret'],
  'v1/Service': ['kubernetes-models/v1/Service', 'Service', 'IService'],
  'v1/ServiceAccount': ['kubernetes-models/v1/ServiceAccount', 'ServiceAccount', 'IServiceAccount'],
  'apps/v1/Deployment': ['kubernetes-models/apps/v1/Deployment', 'Deployment', 'IDeployment'],
  'batch/v1/Job': ['kubernetes-models/batch/v1/Job', 'Job', 'IJob'],
  'policy/v1/PodDisruptionBudget': [
    'kubernetes-models/policy/v1/PodDisruptionBudget',
    'PodDisruptionBudget',
    'IPodDisruptionBudget',
  ],
  'autoscaling/v2/HorizontalPodAutoscaler': [
    'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler',
    'HorizontalPodAutoscaler',
    'IHorizontalPodAutoscaler',
  ],
  'networking.k8s.io/v1/Ingress': ['kubernetes-models/networking.k8s.io/v1/Ingress', 'Ingress', 'IIngress'],
  'networking.k8s.io/v1/NetworkPolicy': [
    'kubernetes-models/networking.k8s.io/v1/NetworkPolicy',
    'NetworkPolicy',
    'INetworkPolicy',
  ],
  'monitoring.coreos.com/v1/ServiceMonitor': [
    '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor',
    'ServiceMonitor',
    'IServiceMonitor',
  ],
  'monitoring.coreos.com/v1/PrometheusRule': [
    '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule',
    'PrometheusRule',
    'IPrometheusRule',
  ],
};

const describe_ = (object: K8s) => `${object.kind}/${object.metadata?.name}`;

/** kubernetes-models' JSON Schema validation of one object, or the error. */
export function schemaErrors(object: K8s): string | null {
  const model = MODELS[`${object.apiVersion}/${object.kind}`];
  if (!model) return `no schema known for ${object.apiVersion} ${object.kind}`;
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- the model module is chosen at run time
  const exported = require(model[0]) as Record<string, new (data: K8s) => { validate(): void }>;
  try {
    new exported[model[1]](object).validate();
    return null;
  } catch (error) {
    return `${describe_(object)}: ${(error as Error).message}`;
  }
}

/**
 * Fields the Kubernetes API does not know, and wrong types, for every object: the objects are
 * written as literals typed by kubernetes-models' interfaces and type-checked (excess property
 * checks apply at every depth). One compilation for all objects; errors name the object.
 */
export function strictFieldErrors(objects: K8s[], labels: string[] = []): string[] {
  const dir = join(ROOT, 'node_modules', '.cache', 'roost-k8s-check');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `objects-${process.pid}.ts`);
  const lines: string[] = [];
  const owners: Array<{ name: string }> = [];
  const imported = new Map<string, string>();
  objects.forEach((object, i) => {
    const model = MODELS[`${object.apiVersion}/${object.kind}`];
    if (!model) throw new Error(`no schema known for ${object.apiVersion} ${object.kind}`);
    let alias = imported.get(model[0]);
    if (!alias) {
      alias = `T${imported.size}`;
      imported.set(model[0], alias);
    }
    owners.push({ name: `${labels[i] ?? `#${i}`}: ${describe_(object)}` });
    lines.push(`export const o${i}: ${alias} = ${JSON.stringify(object, null, 1)};`);
  });
  const header = [...imported].map(([module, alias]) => {
    const model = Object.values(MODELS).find((m) => m[0] === module)!;
    return `import type { ${model[2]} as ${alias} } from '${module}';`;
  });
  const body = lines.join('\n');
  writeFileSync(file, `${header.join('\n')}\n${body}\n`);
  const program = ts.createProgram([file], {
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: [],
    module: ts.ModuleKind.CommonJS,
    moduleResolution: ts.ModuleResolutionKind.Node10,
    target: ts.ScriptTarget.ES2022,
  });
  const source = program.getSourceFile(file)!;
  // line of each object's declaration in the file (after the header)
  const starts: Array<{ line: number; name: string }> = [];
  let line = header.length;
  for (let i = 0; i < lines.length; i++) {
    starts.push({ line, name: owners[i].name });
    line += lines[i].split('\n').length;
  }
  const diagnostics = ts.getPreEmitDiagnostics(program, source);
  rmSync(file, { force: true });
  return diagnostics.map((d) => {
    const at = d.start === undefined ? 0 : source.getLineAndCharacterOfPosition(d.start).line;
    const owner = [...starts].reverse().find((s) => s.line <= at);
    const text = ts.flattenDiagnosticMessageText(d.messageText, '\n').split('\n').slice(-1)[0];
    const property = d.start === undefined ? '' : ` near ${source.text.slice(d.start, d.start + 60).split('\n')[0]}`;
    return `${owner?.name ?? '?'}: ${text}${property}`;
  });
}
