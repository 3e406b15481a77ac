import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, relative, resolve, sep } from 'node:path';
import ts from 'typescript';

/**
 * The import graph of the TypeScript sources and the layering rules of docs/architecture.md
 * ("Layers"). Built from the syntax alone (no type checking), so the check costs about a second.
 */

/** A top-level part of the tree: `lib:<name>`, `app:<name>`, or a tool folder (bench, chaos, …). */
export type Unit = string;

export interface Edge {
  from: string;
  to: string;
  specifier: string;
  /** Erased by the compiler (`import type`, `typeof import()`): cannot form a runtime cycle. */
  typeOnly: boolean;
}

export interface Graph {
  /** Source files, relative to the root, with `/` separators. */
  files: string[];
  /** Imports of other source files; `to` is a file for relative and `#` imports, a package name otherwise. */
  edges: Edge[];
}

/** What each lib and app may import besides itself (docs/architecture.md); tools are free. */
export const ALLOWED: Record<Unit, readonly Unit[]> = {
  'lib:client': [],
  'lib:domain': ['lib:client'],
  'lib:config': [],
  'lib:metrics': [],
  'lib:schemas': ['lib:domain', 'lib:config', 'lib:metrics'],
  'lib:db': ['lib:domain', 'lib:config', 'lib:metrics'],
  'lib:bus': ['lib:domain', 'lib:config', 'lib:metrics'],
  'lib:jobs': ['lib:domain', 'lib:config', 'lib:metrics'],
  'lib:http': ['lib:domain', 'lib:config', 'lib:metrics'],
  'lib:core': ['lib:db', 'lib:bus', 'lib:jobs', 'lib:schemas', 'lib:domain', 'lib:config', 'lib:metrics'],
  'lib:mcp': ['lib:client'],
  'lib:testcontainers': ['lib:client'],
  'app:api': [
    'lib:core',
    'lib:http',
    'lib:db',
    'lib:bus',
    'lib:jobs',
    'lib:schemas',
    'lib:domain',
    'lib:config',
    'lib:metrics',
    'lib:client',
    'lib:mcp',
  ],
  'app:gateway': ['lib:core', 'lib:http', 'lib:db', 'lib:bus', 'lib:domain', 'lib:config', 'lib:metrics'],
  'app:worker': ['lib:core', 'lib:db', 'lib:bus', 'lib:jobs', 'lib:domain', 'lib:config', 'lib:metrics'],
  'app:roost': [
    'app:api',
    'app:gateway',
    'app:worker',
    'lib:core',
    'lib:http',
    'lib:db',
    'lib:bus',
    'lib:jobs',
    'lib:schemas',
    'lib:domain',
    'lib:config',
    'lib:metrics',
  ],
  // `roost serve` loads the embedded operator (#roost, #config); the published package replaces it.
  'app:cli': ['lib:client', 'lib:mcp', 'app:roost', 'lib:config'],
  'tool:conformance': ['lib:client', 'lib:schemas'],
};

/** Packages a unit must not import (beyond the unit rules): HTTP types stay out of the accept path. */
export const FORBIDDEN_PACKAGES: Record<Unit, readonly string[]> = {
  'lib:domain': ['*'],
  'lib:client': ['*', '!ws'],
  'lib:core': ['fastify', '@nestjs/platform-fastify', 'ws', '@nestjs/platform-ws', '@nestjs/websockets'],
  'lib:http': ['pg', 'kysely', '@electric-sql/pglite', 'ioredis', 'bullmq'],
};

const SOURCE_ROOTS = ['apps', 'libs', 'conformance', 'bench', 'chaos', 'test'];
const EXTENSIONS = ['.ts', '/index.ts'];

export function unitOf(file: string): Unit {
  const [top, name] = file.split('/');
  if (top === 'libs' || top === 'apps') return `${top.slice(0, -1)}:${name}`;
  return `tool:${top}`;
}

/** The `#` aliases of package.json `imports`, to the source file each names for TypeScript. */
export function readAliases(root: string): Record<string, string> {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
    imports: Record<string, { types: string }>;
  };
  return Object.fromEntries(
    Object.entries(pkg.imports).map(([alias, target]) => [alias, target.types.replace(/^\.\//, '')]),
  );
}

function sourceFiles(root: string): string[] {
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
      if (entry.name === 'node_modules' || entry.name === 'dist' || entry.name.startsWith('.')) continue;
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) out.push(path);
    }
  };
  for (const top of SOURCE_ROOTS) if (existsSync(join(root, top))) walk(top);
  return out.sort();
}

/** Every module specifier in a file, with whether the compiler erases it. */
export function importsOf(text: string): Array<{ specifier: string; typeOnly: boolean }> {
  const source = ts.createSourceFile('x.ts', text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const found: Array<{ specifier: string; typeOnly: boolean }> = [];
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      const clause = node.importClause;
      const named =
        clause?.namedBindings && ts.isNamedImports(clause.namedBindings) ? clause.namedBindings.elements : undefined;
      const typeOnly =
        !!clause &&
        (clause.isTypeOnly || (!clause.name && !!named && named.length > 0 && named.every((e) => e.isTypeOnly)));
      found.push({ specifier: node.moduleSpecifier.text, typeOnly });
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      found.push({ specifier: node.moduleSpecifier.text, typeOnly: node.isTypeOnly });
    } else if (
      ts.isImportTypeNode(node) &&
      ts.isLiteralTypeNode(node.argument) &&
      ts.isStringLiteral(node.argument.literal)
    ) {
      found.push({ specifier: node.argument.literal.text, typeOnly: true });
    } else if (
      ts.isCallExpression(node) &&
      (node.expression.kind === ts.SyntaxKind.ImportKeyword ||
        (ts.isIdentifier(node.expression) && node.expression.text === 'require')) &&
      node.arguments.length === 1 &&
      ts.isStringLiteral(node.arguments[0])
    ) {
      found.push({ specifier: node.arguments[0].text, typeOnly: false });
    } else if (
      ts.isImportEqualsDeclaration(node) &&
      ts.isExternalModuleReference(node.moduleReference) &&
      ts.isStringLiteral(node.moduleReference.expression)
    ) {
      found.push({ specifier: node.moduleReference.expression.text, typeOnly: node.isTypeOnly });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

export function buildGraph(root: string): Graph {
  const aliases = readAliases(root);
  const files = sourceFiles(root);
  const known = new Set(files);
  const edges: Edge[] = [];
  for (const file of files) {
    for (const { specifier, typeOnly } of importsOf(readFileSync(join(root, file), 'utf8'))) {
      let to: string;
      if (specifier in aliases) to = aliases[specifier];
      else if (specifier.startsWith('.')) {
        const base = relative(root, resolve(root, dirname(file), specifier))
          .split(sep)
          .join('/');
        to = [base, ...EXTENSIONS.map((ext) => base + ext)].find((candidate) => known.has(candidate)) ?? base;
      } else to = specifier;
      edges.push({ from: file, to, specifier, typeOnly });
    }
  }
  return { files, edges };
}

const packageName = (specifier: string): string =>
  specifier
    .split('/')
    .slice(0, specifier.startsWith('@') ? 2 : 1)
    .join('/');

const isBuiltin = (specifier: string): boolean =>
  specifier.startsWith('node:') || builtinModules.includes(packageName(specifier));

/** Imports that break a layering rule, one readable line each. */
export function forbiddenEdges(graph: Graph, root: string): string[] {
  const problems: string[] = [];
  const files = new Set(graph.files);
  for (const { from, to, specifier } of graph.edges) {
    // A spec beside the code is a test: it may compare two units (e.g. the SDK's grammar with the domain's).
    const source = from.endsWith('.spec.ts') ? 'tool:spec' : unitOf(from);
    const rules = ALLOWED[source];
    if (files.has(to)) {
      const target = unitOf(to);
      if (target === source) {
        if (specifier.startsWith('#'))
          problems.push(
            `${from} imports its own unit through ${specifier} (a cycle through the index); use a relative path`,
          );
        continue;
      }
      if (!rules) continue; // bench, chaos and test may use anything
      if (!rules.includes(target)) problems.push(`${from} → ${to}: ${source} may not import ${target}`);
      else if (!specifier.startsWith('#'))
        problems.push(`${from} → ${to}: another unit is imported by its # alias, not by path (${specifier})`);
    } else if ((specifier.endsWith('.json') && existsSync(join(root, to))) || existsSync(join(root, `${to}.d.ts`))) {
      continue; // data, or a declaration file (generated types)
    } else if (specifier.startsWith('.') || specifier.startsWith('#')) {
      problems.push(`${from}: ${specifier} names no source file`);
    } else if (!isBuiltin(specifier)) {
      const banned = FORBIDDEN_PACKAGES[source] ?? [];
      const name = packageName(specifier);
      const allowedByException = banned.includes(`!${name}`);
      if (!allowedByException && (banned.includes(name) || banned.includes('*')))
        problems.push(`${from}: ${source} may not import the package ${name}`);
    }
  }
  return problems;
}

/** Strongly connected components of more than one file (or a file importing itself): import cycles. */
export function cycles(graph: Graph, { includeTypeOnly = false } = {}): string[][] {
  const next = new Map<string, string[]>();
  const files = new Set(graph.files);
  for (const edge of graph.edges) {
    if ((edge.typeOnly && !includeTypeOnly) || !files.has(edge.to)) continue;
    next.set(edge.from, [...(next.get(edge.from) ?? []), edge.to]);
  }
  // Tarjan's algorithm, iterative so a deep chain cannot overflow the stack.
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const found: string[][] = [];
  for (const start of graph.files) {
    if (index.has(start)) continue;
    const work: Array<{ node: string; i: number }> = [{ node: start, i: 0 }];
    index.set(start, counter);
    low.set(start, counter++);
    stack.push(start);
    onStack.add(start);
    while (work.length > 0) {
      const frame = work[work.length - 1];
      const targets = next.get(frame.node) ?? [];
      if (frame.i < targets.length) {
        const target = targets[frame.i++];
        if (!index.has(target)) {
          index.set(target, counter);
          low.set(target, counter++);
          stack.push(target);
          onStack.add(target);
          work.push({ node: target, i: 0 });
        } else if (onStack.has(target)) {
          low.set(frame.node, Math.min(low.get(frame.node)!, index.get(target)!));
        }
        continue;
      }
      work.pop();
      if (work.length > 0) {
        const parent = work[work.length - 1].node;
        low.set(parent, Math.min(low.get(parent)!, low.get(frame.node)!));
      }
      if (low.get(frame.node) === index.get(frame.node)) {
        const component: string[] = [];
        let member: string;
        do {
          member = stack.pop()!;
          onStack.delete(member);
          component.push(member);
        } while (member !== frame.node);
        if (component.length > 1 || targets.includes(frame.node)) found.push(component.sort());
      }
    }
  }
  return found;
}
