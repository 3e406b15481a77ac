import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { buildGraph, cycles, forbiddenEdges, importsOf } from './import-graph';

const ROOT = resolve(__dirname, '..', '..');

describe('the layering of docs/architecture.md', () => {
  const graph = buildGraph(ROOT);

  it('sees the whole tree', () => {
    expect(graph.files.length).toBeGreaterThan(300);
    expect(graph.files).toContain('libs/domain/src/ids.ts');
  });

  it('has no forbidden import', () => {
    expect(forbiddenEdges(graph, ROOT)).toEqual([]);
  });

  // Type-only imports are erased, so they cannot cycle at run time (conformance's assert ↔ http do).
  it('has no import cycle', () => {
    expect(cycles(graph)).toEqual([]);
  });
});

describe('the check itself', () => {
  let root: string;
  const write = (files: Record<string, string>): void => {
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(root, path)), { recursive: true });
      writeFileSync(join(root, path), text);
    }
  };
  const aliases = {
    imports: {
      '#db': { types: './libs/db/src/index.ts' },
      '#http': { types: './libs/http/src/index.ts' },
      '#core': { types: './libs/core/src/index.ts' },
    },
  };

  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'roost-layers-'));
    write({
      'package.json': JSON.stringify(aliases),
      'libs/db/src/index.ts': 'export const db = 1;\n',
      'libs/http/src/index.ts': 'export const http = 1;\n',
      'libs/core/src/index.ts': "import { db } from '#db';\nexport const core = db;\n",
    });
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('passes an allowed edge', () => {
    expect(forbiddenEdges(buildGraph(root), root)).toEqual([]);
  });

  it('fails on a lib importing one it may not (http → db)', () => {
    write({ 'libs/http/src/probe.ts': "import { db } from '#db';\nexport const probe = db;\n" });
    expect(forbiddenEdges(buildGraph(root), root)).toEqual([
      'libs/http/src/probe.ts → libs/db/src/index.ts: lib:http may not import lib:db',
    ]);
  });

  it('fails on a package a lib may not use (fastify in core)', () => {
    write({
      'libs/core/src/guard.ts': "import type { FastifyRequest } from 'fastify';\nexport type R = FastifyRequest;\n",
    });
    expect(forbiddenEdges(buildGraph(root), root)).toEqual([
      'libs/core/src/guard.ts: lib:core may not import the package fastify',
    ]);
  });

  it('fails on another unit reached by relative path instead of its alias', () => {
    write({ 'libs/core/src/x.ts': "import { db } from '../../db/src/index';\nexport const x = db;\n" });
    expect(forbiddenEdges(buildGraph(root), root)).toEqual([
      'libs/core/src/x.ts → libs/db/src/index.ts: another unit is imported by its # alias, not by path (../../db/src/index)',
    ]);
  });

  it('finds a cycle, and one made only of type imports only when asked', () => {
    write({
      'libs/db/src/a.ts': "import { b } from './b';\nexport const a = () => b;\n",
      'libs/db/src/b.ts': "import { a } from './a';\nexport const b = () => a;\n",
      'libs/db/src/c.ts': "import type { D } from './d';\nexport interface C { d?: D }\n",
      'libs/db/src/d.ts': "import type { C } from './c';\nexport interface D { c?: C }\n",
    });
    const graph = buildGraph(root);
    expect(cycles(graph)).toEqual([['libs/db/src/a.ts', 'libs/db/src/b.ts']]);
    expect(cycles(graph, { includeTypeOnly: true })).toEqual(
      expect.arrayContaining([
        ['libs/db/src/a.ts', 'libs/db/src/b.ts'],
        ['libs/db/src/c.ts', 'libs/db/src/d.ts'],
      ]),
    );
  });

  it('reads static, re-exported, lazily required and type-position imports', () => {
    const text = [
      "import a from 'a';",
      "import type { B } from 'b';",
      "import { type C } from 'c';",
      "export * from 'd';",
      "const e = () => require('e') as typeof import('f');",
      "void import('g');",
    ].join('\n');
    expect(importsOf(text)).toEqual([
      { specifier: 'a', typeOnly: false },
      { specifier: 'b', typeOnly: true },
      { specifier: 'c', typeOnly: true },
      { specifier: 'd', typeOnly: false },
      { specifier: 'e', typeOnly: false },
      { specifier: 'f', typeOnly: true },
      { specifier: 'g', typeOnly: false },
    ]);
  });
});
