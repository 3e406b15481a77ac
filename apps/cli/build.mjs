// Builds the publishable `@roost/cli` package (apps/cli/package.json): one esbuild bundle of
// src/main.ts in dist/main.js. Inside the repository the CLI imports the SDK as `#client`; here that
// becomes the `@roost/client` package, third-party packages stay external (they are this package's
// dependencies), and the MCP server it shares with the operator (libs/mcp) is bundled. The build
// fails when the bundle would pull in anything else (server code) or need a package
// apps/cli/package.json does not declare.
import { build } from 'esbuild';
import { readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..', '..');
const readJson = (file) => JSON.parse(readFileSync(file, 'utf8'));
const pkg = readJson(join(here, 'package.json'));
const client = readJson(join(root, 'libs', 'client', 'package.json'));
const rootPkg = readJson(join(root, 'package.json'));

/** Source folders the bundle may contain: the CLI and pure code with no server dependency. */
const BUNDLED = ['apps/cli/src/', 'libs/mcp/src/'];

/**
 * `#client` (the SDK's index) becomes the `@roost/client` package; `#mcp` is bundled from source.
 * Any other `#` alias is server code and fails the build.
 */
const aliases = {
  name: 'roost-aliases',
  setup(b) {
    b.onResolve({ filter: /^#/ }, (args) => {
      if (args.path === '#client') return { path: client.name, external: true };
      if (args.path === '#mcp') return { path: join(root, 'libs', 'mcp', 'src', 'index.ts') };
      return { errors: [{ text: `${args.path} (imported by ${relative(root, args.importer)}) is server code; the CLI package may import only #client and #mcp` }] };
    });
  },
};

/** `roost serve` runs the operator, which is not in this package: it gets a module saying so. */
const noOperator = {
  name: 'roost-no-operator',
  setup(b) {
    b.onResolve({ filter: /^\.\/commands\/serve$/ }, (args) =>
      args.importer === join(root, 'apps', 'cli', 'src', 'cli.ts') ? { path: join(root, 'apps', 'cli', 'src', 'commands', 'serve-unavailable.ts') } : undefined,
    );
  },
};

const problems = [];
const result = await build({
  absWorkingDir: root,
  entryPoints: ['apps/cli/src/main.ts'],
  outfile: join(here, 'dist', 'main.js'),
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node20',
  packages: 'external',
  plugins: [noOperator, aliases],
  metafile: true,
  logLevel: 'warning',
});

for (const input of Object.keys(result.metafile.inputs)) {
  if (!BUNDLED.some((allowed) => input === allowed || (allowed.endsWith('/') && input.startsWith(allowed)))) {
    problems.push(`${input} would be bundled; only ${BUNDLED.join(', ')} may be (no server code in the CLI package)`);
  }
}
const builtins = new Set(builtinModules);
const packageOf = (spec) => spec.split('/').slice(0, spec.startsWith('@') ? 2 : 1).join('/');
for (const output of Object.values(result.metafile.outputs)) {
  for (const { path, external } of output.imports) {
    if (!external || path.startsWith('node:') || builtins.has(path)) continue;
    const name = packageOf(path);
    const range = pkg.dependencies?.[name];
    if (!range) problems.push(`the bundle imports ${path} but apps/cli/package.json does not depend on ${name}`);
    else if (name === client.name ? range !== client.version : range !== rootPkg.dependencies[name]) {
      problems.push(`apps/cli/package.json has ${name}@${range}; the repository uses ${name === client.name ? client.version : rootPkg.dependencies[name]}`);
    }
  }
}
if (problems.length > 0) {
  console.error(`apps/cli build failed:\n  ${problems.join('\n  ')}`);
  process.exit(1);
}
