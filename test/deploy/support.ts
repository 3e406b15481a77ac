import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import Ajv from 'ajv';
import { parse, parseAllDocuments } from 'yaml';

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

// ---- the Go renderer (test/deploy/helm-render) ---------------------------------------------

const GOPATH = '/usr/share/gocode';

/**
 * Why the chart cannot be rendered here, or null when it can: rendering needs the Go toolchain and
 * Debian's Sprig and sigs.k8s.io/yaml sources (apt-get install golang-go
 * golang-github-masterminds-sprig-dev golang-k8s-sigs-yaml-dev).
 */
export function rendererUnavailable(): string | null {
  if (spawnSync('go', ['version'], { stdio: 'ignore' }).status !== 0) return 'no Go toolchain (apt-get install golang-go)';
  for (const dir of ['github.com/Masterminds/sprig', 'sigs.k8s.io/yaml']) {
    if (!existsSync(join(GOPATH, 'src', dir))) return `no ${dir} sources in ${GOPATH} (Debian golang-*-dev packages)`;
  }
  return null;
}

let binary: string | null = null;

function rendererBinary(): string {
  if (binary !== null) return binary;
  const out = join(mkdtempSync(join(tmpdir(), 'roost-helm-render-')), 'helm-render');
  execFileSync('go', ['build', '-o', out, join(__dirname, 'helm-render', 'main.go')], {
    env: { ...process.env, GO111MODULE: 'off', GOPATH, GOFLAGS: '', GOCACHE: process.env.GOCACHE ?? join(tmpdir(), 'roost-go-cache') },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  binary = out;
  return out;
}

export interface Rendered {
  /** Kubernetes objects from every template, in file order. */
  objects: Array<Record<string, any>>;
  notes: string;
}

export type RenderResult = { ok: true; rendered: Rendered } | { ok: false; error: string };

/** Render the chart with values.yaml plus `valueFiles` (later wins), like `helm template`. */
export function renderChart(valueFiles: string[], release = 'roost', namespace = 'roost'): RenderResult {
  const args = ['-chart', CHART, '-name', release, '-namespace', namespace];
  for (const file of valueFiles) args.push('-f', file);
  const run = spawnSync(rendererBinary(), args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (run.status !== 0) return { ok: false, error: run.stderr };
  const output = JSON.parse(run.stdout) as { manifests: Record<string, string>; notes: string };
  const objects: Array<Record<string, any>> = [];
  for (const name of Object.keys(output.manifests).sort()) {
    for (const doc of parseAllDocuments(output.manifests[name], { strict: true, uniqueKeys: true })) {
      if (doc.errors.length > 0) throw new Error(`${name}: ${doc.errors.map((e) => e.message).join('; ')}`);
      const object = doc.toJS() as Record<string, any> | null;
      if (object !== null) objects.push(object);
    }
  }
  return { ok: true, rendered: { objects, notes: output.notes } };
}
