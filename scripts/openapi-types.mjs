// Regenerates test/medium/openapi/roost-api.d.ts (the typed client's types) from the built
// document with openapi-typescript's CLI, the same way test/medium/openapi/openapi.test.ts checks it.
// Usage: npm run openapi:types
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const require = createRequire(import.meta.url);
const { buildOpenApiDocument } = require('../dist/apps/api/src/openapi/openapi.document.js');
const root = new URL('..', import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), 'roost-openapi-'));
try {
  const document = join(dir, 'openapi.json');
  writeFileSync(document, JSON.stringify(buildOpenApiDocument({ version: 'dev' })));
  const cli = join(root, 'node_modules/openapi-typescript/bin/cli.js');
  execFileSync(process.execPath, [cli, document, '-o', join(root, 'test/medium/openapi/roost-api.d.ts')], {
    stdio: 'inherit',
  });
} finally {
  rmSync(dir, { recursive: true, force: true });
}
