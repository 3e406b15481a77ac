import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import Ajv from 'ajv';
import { parse, parseAllDocuments, stringify } from 'yaml';

export const ROOT = resolve(__dirname, '..', '..');
export const DEPLOY = join(ROOT, 'deploy');
export const CHART = join(DEPLOY, 'helm', 'roost');

export const read = (path: string): string => readFileSync(path, 'utf8');

export type Values = Record<string, unknown>;

/** One YAML document, parsed strictly (duplicate keys, bad indentation and tabs are errors). */
export function loadYaml(path: string): unknown {
  return parse(read(path), { strict: true, uniqueKeys: true, merge: true, prettyErrors: true });
}

export function exampleFiles(): string[] {
  return readdirSync(join(CHART, 'examples'))
    .filter((name) => name.endsWith('.yaml'))
    .sort()
    .map((name) => join(CHART, 'examples', name));
}

const isMap = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** Helm's user-values overlay: maps merge key by key, any other value replaces, null deletes. */
export function overlay(base: unknown, top: unknown): Values {
  const out: Values = structuredClone(isMap(base) ? base : {});
  if (!isMap(top)) return out;
  for (const [key, value] of Object.entries(top)) {
    if (value === null) delete out[key];
    else if (isMap(value) && isMap(out[key])) out[key] = overlay(out[key], value);
    else out[key] = structuredClone(value);
  }
  return out;
}

export function defaultValues(): Values {
  return loadYaml(join(CHART, 'values.yaml')) as Values;
}

/** The chart's values.schema.json compiled as Helm applies it: to the merged values. */
export function valuesValidator() {
  const ajv = new Ajv({ allErrors: true, strict: true, allowUnionTypes: true });
  const validate = ajv.compile(JSON.parse(read(join(CHART, 'values.schema.json'))));
  return (values: Values): string[] =>
    validate(values) ? [] : (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message ?? ''}`);
}

/** Every ROOST_* (and other) variable name the config loader reads, from libs/config/src/config.ts. */
export function configEnvNames(): Set<string> {
  const source = read(join(ROOT, 'libs', 'config', 'src', 'config.ts'));
  return new Set([...source.matchAll(/\(env, '([A-Z][A-Z0-9_]*)'/g)].map((match) => match[1]));
}

/** Metric names defined in libs/metrics/src/metrics.ts. */
export function definedMetrics(): Set<string> {
  const source = read(join(ROOT, 'libs', 'metrics', 'src', 'metrics.ts'));
  return new Set([...source.matchAll(/name: '(roost_[a-z0-9_]+)'/g)].map((match) => match[1]));
}

/** `roost_*` series named in a PromQL text, with histogram/counter suffixes mapped to the metric. */
export function referencedMetrics(text: string): Set<string> {
  const names = new Set<string>();
  for (const [name] of text.matchAll(/\broost_[a-z0-9_]+/g)) {
    names.add(name.replace(/_(bucket|sum|count)$/, ''));
  }
  return names;
}

// ---- tools: Helm (scripts/fetch-helm.sh) and promtool (Debian's prometheus) -------------------

/** CI sets ROOST_TEST_REQUIRE_SERVICES=1: there a missing tool fails the tier instead of skipping it. */
export const REQUIRE_TOOLS = process.env.ROOST_TEST_REQUIRE_SERVICES === '1';

/** The pinned Helm that scripts/fetch-helm.sh unpacks (ROOST_HELM overrides). */
export const HELM = process.env.ROOST_HELM ?? join(ROOT, '.tools', 'bin', 'helm');
export const PROMTOOL = process.env.ROOST_PROMTOOL ?? 'promtool';
/** The Kubernetes release the chart is rendered for and validated against (kubernetes-models 4.5 = v1.33 OpenAPI). */
export const KUBE_VERSION = '1.33.0';

/** Why `command args` cannot run here (with the install hint), or null when it can. */
export function toolMissing(command: string, args: string[], hint: string): string | null {
  const run = spawnSync(command, args, { stdio: 'ignore' });
  return run.status === 0 ? null : `${command} not found or not runnable (${hint})`;
}

export const helmMissing = () => toolMissing(HELM, ['version'], 'run scripts/fetch-helm.sh');
export const promtoolMissing = () => toolMissing(PROMTOOL, ['--version'], 'apt-get install prometheus, or .ci/helm.sh');

/**
 * `describe` when the tool is there. Without it: skipped with a warning on a developer's machine,
 * and a failing test in CI (REQUIRE_TOOLS), never a silent skip.
 */
export function describeWithTool(missing: string | null): (name: string, body: () => void) => void {
  if (missing === null) return describe;
  if (REQUIRE_TOOLS) {
    return (name: string) =>
      describe(name, () => {
        it('has the tool it needs (ROOST_TEST_REQUIRE_SERVICES=1)', () => {
          throw new Error(missing);
        });
      });
  }

  console.warn(`deploy tests skipped: ${missing}`);
  return describe.skip;
}

let helmHome: string | null = null;

/** Helm with its own empty config/cache/data dirs and no kubeconfig: nothing from the host leaks in. */
export function helm(args: string[]): { status: number; stdout: string; stderr: string } {
  helmHome ??= mkdtempSync(join(tmpdir(), 'roost-helm-home-'));
  const run = spawnSync(HELM, args, {
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: helmHome,
      HELM_CACHE_HOME: join(helmHome, 'cache'),
      HELM_CONFIG_HOME: join(helmHome, 'config'),
      HELM_DATA_HOME: join(helmHome, 'data'),
      KUBECONFIG: join(helmHome, 'no-kubeconfig'),
    },
  });
  return { status: run.status ?? -1, stdout: run.stdout, stderr: run.stderr };
}

export interface Rendered {
  /** Kubernetes objects from every template (hooks included), in Helm's install order. */
  objects: Array<Record<string, any>>;
}

export type RenderResult = { ok: true; rendered: Rendered } | { ok: false; error: string };

export function parseManifests(text: string): Array<Record<string, any>> {
  const objects: Array<Record<string, any>> = [];
  for (const doc of parseAllDocuments(text, { strict: true, uniqueKeys: true })) {
    if (doc.errors.length > 0) throw new Error(doc.errors.map((e) => e.message).join('; '));
    const object = doc.toJS() as Record<string, any> | null;
    if (object !== null) objects.push(object);
  }
  return objects;
}

/** `helm template` with values.yaml plus `valueFiles` (later wins), for KUBE_VERSION. */
export function renderChart(valueFiles: string[], release = 'roost', namespace = 'roost'): RenderResult {
  const args = ['template', release, CHART, '--namespace', namespace, '--kube-version', KUBE_VERSION];
  for (const file of valueFiles) args.push('--values', file);
  const run = helm(args);
  if (run.status !== 0) return { ok: false, error: run.stderr };
  return { ok: true, rendered: { objects: parseManifests(run.stdout) } };
}

/** `helm install --dry-run=client -o json`: the release as Helm would install it (manifest, hooks, notes). */
export function installDryRun(valueFiles: string[], release = 'roost', namespace = 'roost') {
  const args = ['install', release, CHART, '--namespace', namespace, '--dry-run=client', '--output', 'json'];
  for (const file of valueFiles) args.push('--values', file);
  const run = helm(args);
  if (run.status !== 0) return { ok: false as const, error: run.stderr };
  const release_ = JSON.parse(run.stdout) as {
    manifest: string;
    hooks: Array<{ manifest: string }>;
    info: { notes: string };
  };
  return { ok: true as const, release: release_ };
}

/** A values file in a fresh temporary directory. */
export function valuesFile(values: unknown): string {
  const file = join(mkdtempSync(join(tmpdir(), 'roost-values-')), 'values.yaml');
  writeFileSync(file, stringify(values));
  return file;
}
