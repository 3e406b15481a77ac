import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

/** `libs/client` builds on its own and is importable by another project as `@roost/client`. */
it('publishes @roost/client with exports and types', () => {
  const root = resolve(__dirname, '../../..');
  const project = mkdtempSync(join(tmpdir(), 'roost-consumer-'));
  const target = join(project, 'node_modules', '@roost', 'client');
  mkdirSync(target, { recursive: true });
  cpSync(join(root, 'libs', 'client', 'package.json'), join(target, 'package.json'));
  execFileSync(process.execPath, [
    join(root, 'node_modules', 'typescript', 'bin', 'tsc'),
    '-p',
    join(root, 'libs', 'client', 'tsconfig.json'),
    '--outDir',
    join(target, 'dist'),
  ]);
  const pkg = JSON.parse(readFileSync(join(target, 'package.json'), 'utf8'));
  expect(pkg).toMatchObject({
    name: '@roost/client',
    types: './dist/index.d.ts',
    exports: { '.': { types: './dist/index.d.ts', default: './dist/index.js' } },
  });
  expect(readFileSync(join(target, 'dist', 'index.d.ts'), 'utf8')).toContain("export * from './listener'");
  const out = execFileSync(
    process.execPath,
    [
      '-e',
      "const c = require('@roost/client'); console.log([typeof c.RoostClient, typeof c.RoostAdminClient, typeof c.Listener, c.ulid().length].join(' '))",
    ],
    { cwd: project, env: { PATH: process.env.PATH ?? '', NODE_PATH: join(root, 'node_modules') } },
  ).toString();
  expect(out.trim()).toBe('function function function 26');
});
