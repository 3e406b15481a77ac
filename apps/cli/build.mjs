// Builds the publishable `@roost/cli` package (apps/cli/package.json): esbuild bundles of
// src/main.ts in dist/ (split in four, see CHUNKS). Inside the repository the CLI imports the SDK as `#client`;
// here that becomes the `@roost/client` package. Third-party packages
// (this package's dependencies and theirs) are bundled too: `roost mcp` loads ~280 modules
// (MCP SDK, zod, ajv) otherwise, and resolving and reading them one by one is most of its start-up.
// The MCP server the CLI shares with the operator (`#mcp`, libs/mcp) is bundled; any other `#`
// alias is server code. The build fails when the bundle would pull in anything else (server code, a package no
// declared dependency needs), import an SDK module that @roost/client does not export, or need a
// package apps/cli/package.json does not declare.
import { build } from 'esbuild';
import { readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, relative, resolve, sep } from 'node:path';
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
      return {
        errors: [
          {
            text: `${args.path} (imported by ${relative(root, args.importer)}) is server code; the CLI package may import only #client and #mcp`,
          },
        ],
      };
    });
  },
};

/** `roost serve` runs the operator, which is not in this package: it gets a module saying so. */
const noOperator = {
  name: 'roost-no-operator',
  setup(b) {
    b.onResolve({ filter: /^\.\/commands\/serve$/ }, (args) =>
      args.importer === join(root, 'apps', 'cli', 'src', 'cli.ts')
        ? { path: join(root, 'apps', 'cli', 'src', 'commands', 'serve-unavailable.ts') }
        : undefined,
    );
  },
};

/**
 * Four bundles, each loaded only when needed: main.js (argv dispatch), hook.js (`roost hook`, run
 * on every tool call), cli.js (every other command) and mcp.js (`roost mcp`: the MCP SDK, zod and
 * ajv, ~1 MB). One bundle of everything made `hook` and `send` parse that megabyte on every run.
 */
const CHUNKS = {
  'apps/cli/src/main.ts': { './hook': './hook.js', './cli': './cli.js' },
  'apps/cli/src/cli.ts': { './commands/mcp': './mcp.js' },
};
const splitChunks = {
  name: 'roost-split-chunks',
  setup(b) {
    b.onResolve({ filter: /^\.\/(hook|cli|commands\/mcp)$/ }, (args) => {
      const target = CHUNKS[relative(root, args.importer).split(sep).join('/')]?.[args.path];
      return target ? { path: target, external: true } : undefined;
    });
  },
};

const problems = [];
const result = await build({
  absWorkingDir: root,
  entryPoints: {
    main: 'apps/cli/src/main.ts',
    hook: 'apps/cli/src/hook.ts',
    cli: 'apps/cli/src/cli.ts',
    mcp: 'apps/cli/src/commands/mcp.ts',
  },
  outdir: join(here, 'dist'),
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node20',
  // main.ts compiles the chunks with V8's code cache when it runs as this bundle (code-cache.ts).
  define: { ROOST_CLI_BUNDLE: 'true' },
  // ws's optional native add-ons: required inside try/catch, absent is fine. marked (a dependency)
  // stays a package: only the worktree mailbox's slow path needs it, and inlined it was 80 kB of
  // the 110 kB every `roost hook` parses.
  external: ['bufferutil', 'utf-8-validate', 'marked'],
  plugins: [splitChunks, noOperator, aliases],
  metafile: true,
  logLevel: 'warning',
});

/** Packages the declared dependencies need, transitively (node_modules is flat here). */
const reachable = new Set();
const visit = (name) => {
  if (reachable.has(name) || name === client.name) return;
  reachable.add(name);
  const manifest = join(root, 'node_modules', name, 'package.json');
  for (const dep of Object.keys(readJson(manifest).dependencies ?? {})) visit(dep);
};
for (const dep of Object.keys(pkg.dependencies ?? {})) visit(dep);
const bundledPackage = (input) => {
  const match = /(?:^|\/)node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(input);
  return match ? match[1] : undefined;
};

for (const input of Object.keys(result.metafile.inputs)) {
  const name = bundledPackage(input);
  if (name !== undefined) {
    if (!reachable.has(name))
      problems.push(`${input} would be bundled; ${name} is not needed by apps/cli/package.json's dependencies`);
    continue;
  }
  if (!BUNDLED.some((allowed) => input === allowed || (allowed.endsWith('/') && input.startsWith(allowed)))) {
    problems.push(`${input} would be bundled; only ${BUNDLED.join(', ')} may be (no server code in the CLI package)`);
  }
}
const builtins = new Set(builtinModules);
const packageOf = (spec) =>
  spec
    .split('/')
    .slice(0, spec.startsWith('@') ? 2 : 1)
    .join('/');
for (const output of Object.values(result.metafile.outputs)) {
  for (const { path, external } of output.imports) {
    if (
      !external ||
      path.startsWith('node:') ||
      builtins.has(path) ||
      path === 'bufferutil' ||
      path === 'utf-8-validate' ||
      path.startsWith('./')
    )
      continue;
    const name = packageOf(path);
    const range = pkg.dependencies?.[name];
    if (!range) problems.push(`the bundle imports ${path} but apps/cli/package.json does not depend on ${name}`);
    else if (name === client.name ? range !== client.version : range !== rootPkg.dependencies[name]) {
      problems.push(
        `apps/cli/package.json has ${name}@${range}; the repository uses ${name === client.name ? client.version : rootPkg.dependencies[name]}`,
      );
    }
  }
}
if (problems.length > 0) {
  console.error(`apps/cli build failed:\n  ${problems.join('\n  ')}`);
  process.exit(1);
}
