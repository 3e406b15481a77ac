import { basename, join } from 'node:path';
import { CHART, defaultValues, exampleFiles, loadYaml, overlay, read, valuesValidator, type Values } from './support';

// Helm validates values.schema.json against the merged values (values.yaml, then each -f file).
// (chart-render.test.ts checks the same with the real Helm; this is the fast, tool-free check.)
const REQUIRED = { postgres: { url: 'postgres://db/roost' }, redis: { url: 'redis://cache:6379' } };
describe('values.schema.json', () => {
  const validate = valuesValidator();

  it('is a draft-07 JSON Schema', () => {
    const schema = JSON.parse(read(join(CHART, 'values.schema.json'))) as Record<string, unknown>;
    expect(schema.$schema).toBe('http://json-schema.org/draft-07/schema#');
  });

  it('rejects values.yaml alone: Postgres and Redis have no default (url or existingSecret)', () => {
    const errors = validate(defaultValues()).join('\n');
    expect(errors).toMatch(/\/postgres\/url must NOT have fewer than 1 characters/);
    expect(errors).toMatch(/\/redis\/existingSecret must NOT have fewer than 1 characters/);
  });

  it('accepts values.yaml with a Postgres and a Redis URL, or existing Secrets', () => {
    expect(
      validate(
        overlay(defaultValues(), { postgres: { url: 'postgres://db/roost' }, redis: { url: 'rediss://cache:6380' } }),
      ),
    ).toEqual([]);
    expect(
      validate(overlay(defaultValues(), { postgres: { existingSecret: 'pg' }, redis: { existingSecret: 'cache' } })),
    ).toEqual([]);
  });

  it.each(exampleFiles().map((file) => [basename(file), file]))('accepts values.yaml + examples/%s', (_name, file) => {
    expect(validate(overlay(defaultValues(), loadYaml(file)))).toEqual([]);
  });

  const broken: Array<[string, Values, RegExp]> = [
    ['a replica count as text', { api: { replicaCount: 'two' } }, /\/api\/replicaCount must be integer/],
    ['a misspelt top-level key', { gatway: { enabled: true } }, /must NOT have additional properties/],
    ['a misspelt role key', { worker: { replicas: 2 } }, /\/worker must NOT have additional properties/],
    ['a MySQL database URL', { postgres: { url: 'mysql://db/roost' } }, /\/postgres\/url must match pattern/],
    ['an http Redis URL', { redis: { url: 'http://redis:6379' } }, /\/redis\/url must match pattern/],
    [
      'an unknown log level',
      { config: { logLevel: 'loud' } },
      /\/config\/logLevel must be equal to one of the allowed values/,
    ],
    ['a 0 partition count', { config: { streamPartitions: 0 } }, /\/config\/streamPartitions must be >= 1/],
    ['an admin token under 16 characters', { adminToken: { value: 'short' } }, /\/adminToken\/value/],
    [
      'an admin token hash in upper case',
      { adminToken: { hash: 'A'.repeat(64) } },
      /\/adminToken\/hash must match pattern/,
    ],
    [
      'a relative gateway ingress path',
      { ingress: { gateway: { path: 'connect' } } },
      /\/ingress\/gateway\/path must match pattern/,
    ],
    ['an image pull policy that does not exist', { image: { pullPolicy: 'Sometimes' } }, /\/image\/pullPolicy/],
    [
      'a CPU target over 100%',
      { gateway: { autoscaling: { targetCPUUtilizationPercentage: 150 } } },
      /targetCPUUtilizationPercentage must be <= 100/,
    ],
    ['an env var name with a dash', { env: { 'BAD-NAME': '1' } }, /\/env/],
    [
      'an alert ratio above 1',
      { metrics: { prometheusRule: { acceptErrorRatio: 5 } } },
      /acceptErrorRatio must be <= 1/,
    ],
    [
      'a NetworkPolicy peer that is not one',
      { networkPolicy: { ingressFrom: [{ namespace: 'ingress' }] } },
      /\/networkPolicy\/ingressFrom\/0 must NOT have additional properties/,
    ],
    [
      'an extra volume mount without a path',
      { extraVolumeMounts: [{ name: 'x' }] },
      /\/extraVolumeMounts\/0 must have required property 'mountPath'/,
    ],
    [
      'an init container without an image',
      { api: { initContainers: [{ name: 'x' }] } },
      /\/api\/initContainers\/0 must have required property 'image'/,
    ],
    ['the metrics port as text', { metrics: { port: 'metrics' } }, /\/metrics\/port must be integer/],
    [
      'a CA bundle key with a slash',
      { caBundle: { configMap: 'ca', key: 'a/b' } },
      /\/caBundle\/key must match pattern/,
    ],
  ];

  it.each(broken)('rejects %s', (_what, patch, message) => {
    const errors = validate(overlay(overlay(defaultValues(), REQUIRED), patch));
    expect(errors.join('\n')).toMatch(message);
  });

  it('rejects a role without its required blocks', () => {
    const values = overlay(defaultValues(), REQUIRED);
    delete (values.api as Values).autoscaling;
    expect(validate(values).join('\n')).toMatch(/\/api must have required property 'autoscaling'/);
  });

  it('overlay() deletes a key set to null, as Helm does', () => {
    const merged = overlay({ a: { b: 1, c: 2 } }, { a: { b: null } });
    expect(merged).toEqual({ a: { c: 2 } });
    // keep the helper honest about not mutating its inputs
    const base = { a: { b: 1 } };
    overlay(base, { a: { b: 2 } });
    expect(base.a.b).toBe(1);
  });
});
