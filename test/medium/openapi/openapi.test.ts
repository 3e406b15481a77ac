import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createConfig, lint } from '@redocly/openapi-core';
import { buildOpenApiDocument, openApiOperations } from '#api';
import { startOperator, type TestOperator } from '../../support/operator';
import { roundTrip, unknownMessage } from './typed-client';

/**
 * GET /openapi.json (docs/openapi.md): served without a token; valid OpenAPI 3.1 by two real
 * validators (the official 3.1 JSON Schema, and Redocly's recommended rules); every route Fastify
 * registers is described, and every described route (but the console API's, described from the
 * contract) is served; the committed generated types are what openapi-typescript makes of the
 * served document today; and a client written against them (typed-client.ts) does send → list →
 * read → receipt against this operator.
 */

const run = promisify(execFile);
const ROOT = join(__dirname, '..', '..', '..');
const TYPES = join(__dirname, 'roost-api.d.ts');

type Document = Record<string, any>;

let operator: TestOperator;
let dir: string;
let served: Document;
const registered: { method: string; url: string }[] = [];

beforeAll(async () => {
  operator = await startOperator({
    beforeListen: (app) => {
      app
        .getHttpAdapter()
        .getInstance()
        .addHook('onRoute', (route) => {
          for (const method of [route.method].flat()) registered.push({ method, url: route.url });
        });
    },
  });
  dir = mkdtempSync(join(tmpdir(), 'roost-openapi-test-'));
  const reply = await fetch(`${operator.url}/openapi.json`);
  expect(reply.status).toBe(200);
  expect(reply.headers.get('content-type')).toMatch(/^application\/json/);
  served = (await reply.json()) as Document;
  writeFileSync(join(dir, 'openapi.json'), JSON.stringify(served));
});

afterAll(async () => {
  await operator?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('served without a token: OpenAPI 3.1, the built document, the operator version', () => {
  expect(served.openapi).toBe('3.1.0');
  expect(served.info.version).toBe(operator.config.version);
  expect(served).toEqual(buildOpenApiDocument({ version: operator.config.version }));
});

test('bodies are the wire schemas the server validates with; every error is the ASMTP error body', () => {
  const sendOp = served.paths['/messages'].post;
  expect(sendOp.requestBody.content['application/json'].schema).toEqual({ $ref: '#/components/schemas/post-message' });
  expect(served.components.schemas['post-message'].required).toEqual(
    expect.arrayContaining(['id', 'to', 'date_ms', 'content_parts']),
  );
  expect(served.components.schemas['common.handle']).toEqual({
    type: 'string',
    pattern: '^@[a-z0-9_-]+\\.[a-z0-9_-]+$',
  });
  for (const [path, item] of Object.entries(served.paths as Record<string, Record<string, any>>)) {
    for (const [method, operation] of Object.entries(item)) {
      expect([path, method, operation.responses['4XX']]).toEqual([
        path,
        method,
        { $ref: '#/components/responses/ClientError' },
      ]);
    }
  }
  expect(served.components.responses.ClientError.content['application/json'].schema).toEqual({
    $ref: '#/components/schemas/error',
  });
  // No $ref is left pointing outside the document (the wire schemas' file refs were rewritten).
  expect(JSON.stringify(served)).not.toMatch(/"\$ref":"(?!#\/components\/)/);
});

test('valid against the official OpenAPI 3.1 schema (@seriousme/openapi-schema-validator)', async () => {
  const cli = join(ROOT, 'node_modules/@seriousme/openapi-schema-validator/bin/validate-api-cli.js');
  const { stdout } = await run(process.execPath, [cli, join(dir, 'openapi.json')]);
  // (It refuses a broken one, e.g. a parameter without `in`: checked by hand, not here, to keep one
  // validator process per run; the Redocly test below proves its linter on a broken document.)
  expect(JSON.parse(stdout)).toEqual({ valid: true });
});

test('no problem under Redocly lint with the recommended ruleset', async () => {
  const config = await createConfig({ extends: ['recommended'] });
  const problems = await lint({ ref: join(dir, 'openapi.json'), config });
  expect(problems.map((p) => `${p.severity} ${p.ruleId}: ${p.message} at ${p.location[0]?.pointer}`)).toEqual([]);
  const broken = structuredClone(served);
  delete broken.components.schemas['common.handle'];
  writeFileSync(join(dir, 'broken.json'), JSON.stringify(broken));
  const brokenProblems = await lint({ ref: join(dir, 'broken.json'), config });
  expect(brokenProblems.map((p) => p.ruleId)).toContain('no-unresolved-refs');
});

/** The console's static files (`/console`, `/console/*`) are a web page, not an API. */
const isConsoleAsset = (url: string) => url === '/console' || url.startsWith('/console/');

test('every route Fastify registers is described, and every described route is served', () => {
  const toOpenApi = (url: string) => url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
  const served = new Set(
    registered
      .filter((r) => !r.url.includes('*') && !isConsoleAsset(r.url) && r.method !== 'HEAD' && r.method !== 'OPTIONS')
      .map((r) => `${r.method} ${toOpenApi(r.url)}`),
  );
  expect(served.size).toBeGreaterThan(40);
  const described = openApiOperations();
  const describedKeys = new Set(described.map((o) => `${o.method} ${o.path}`));
  expect([...served].filter((route) => !describedKeys.has(route))).toEqual([]);
  expect(described.filter((o) => !served.has(`${o.method} ${o.path}`))).toEqual([]);
});

test('the committed generated types are what openapi-typescript makes of the served document', async () => {
  const cli = join(ROOT, 'node_modules/openapi-typescript/bin/cli.js');
  const out = join(dir, 'roost-api.d.ts');
  await run(process.execPath, [cli, join(dir, 'openapi.json'), '-o', out]);
  // A mismatch: run `npm run openapi:types` and commit test/medium/openapi/roost-api.d.ts.
  expect(readFileSync(out, 'utf8')).toBe(readFileSync(TYPES, 'utf8'));
});

test('a generated client (openapi-typescript + openapi-fetch) does send → list → read → receipt', async () => {
  const alice = { handle: '@acme.alice', token: await operator.agent('@acme.alice') };
  const bob = { handle: '@acme.bob', token: await operator.agent('@acme.bob') };
  const result = await roundTrip(operator.url, alice, bob);
  expect(result.listed.map((header) => header.id)).toEqual([result.accepted.id]);
  expect(result.listed[0]).toMatchObject({ from: '@acme.alice', to: ['@acme.bob'], subject: 'typed' });
  expect(result.read).toMatchObject({
    id: result.accepted.id,
    from: '@acme.alice',
    content_parts: [{ type: 'text', text: 'hello from a generated client' }],
  });
  expect(result.receipt).toMatchObject({
    envelope_id: result.accepted.id,
    from: '@acme.bob',
    status: 'applied',
    note: 'done',
  });
  expect(result.receipts.map((receipt) => receipt.id)).toEqual([result.receipt.id]);
  expect(result.status.recipients).toEqual([
    expect.objectContaining({ handle: '@acme.bob', read: true, status: 'applied' }),
  ]);
  const missing = await unknownMessage(operator.url, bob.token);
  expect(missing.status).toBe(404);
  expect(missing.error?.error.code).toBe('NOT_FOUND');
});
