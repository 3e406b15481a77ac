import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { CHART, configEnvNames, defaultValues, read, type Values } from './support';

/**
 * Checks of the chart's template sources that need no renderer. They catch unbalanced actions and
 * blocks, includes of undefined templates and values paths that values.yaml does not have; they
 * do not prove the templates render (chart-render.test.ts does, where Go is installed).
 */
const templates = readdirSync(join(CHART, 'templates')).sort();
const source = (name: string) => read(join(CHART, 'templates', name));

/** The actions of a template ({{ ... }} bodies, trim markers and comments kept), strings respected. */
function actions(text: string): string[] {
  const out: string[] = [];
  let i = 0;
  for (;;) {
    const open = text.indexOf('{{', i);
    if (open < 0) return out;
    let j = open + 2;
    let body = '';
    // A comment runs to "*/" whatever it contains, then must close the action.
    const comment = /-?\s*\/\*/y;
    comment.lastIndex = j;
    if (comment.exec(text)) {
      const close = text.indexOf('*/', j);
      const after = /\*\/\s*-?\}\}/y;
      after.lastIndex = close;
      if (close < 0 || !after.exec(text)) throw new Error(`unterminated comment at offset ${open}`);
      out.push('/* */');
      i = after.lastIndex;
      continue;
    }
    for (;;) {
      if (j >= text.length) throw new Error(`unterminated action at offset ${open}`);
      const c = text[j];
      if (text.startsWith('}}', j)) break;
      if (c === '"' || c === '`') {
        const end = c === '"' ? /"(?:[^"\\\n]|\\.)*"/y : /`[^`]*`/y;
        end.lastIndex = j;
        const m = end.exec(text);
        if (!m) throw new Error(`unterminated string at offset ${j}`);
        body += c + c; // keep the string's place, not its content
        j += m[0].length;
        continue;
      }
      body += c;
      j++;
    }
    out.push(body.trim());
    i = j + 2;
  }
}

describe.each(templates)('templates/%s', (name) => {
  const text = source(name);

  it('has balanced actions and blocks', () => {
    const list = actions(text);
    let depth = 0;
    for (const action of list) {
      const body = action.replace(/^-\s*/, '').replace(/\s*-$/, '');
      if (body.startsWith('/*')) {
        expect(body.endsWith('*/')).toBe(true);
        continue;
      }
      if (/^(if|range|with|define|block)\b/.test(body)) depth++;
      if (/^end\b/.test(body)) depth--;
      expect(depth).toBeGreaterThanOrEqual(0);
    }
    expect(depth).toBe(0);
  });

  it('includes only templates the chart defines', () => {
    const defined = new Set(templates.flatMap((t) => [...source(t).matchAll(/define "([^"]+)"/g)].map((m) => m[1])));
    const included = [...text.matchAll(/include "([^"]+)"/g)].map((m) => m[1]);
    expect(included.filter((n) => !defined.has(n))).toEqual([]);
  });

  it('reads only values paths that values.yaml has', () => {
    const values = defaultValues();
    const has = (root: unknown, path: string[]): boolean => {
      let node = root;
      for (const key of path) {
        if (typeof node !== 'object' || node === null || !(key in (node as Values))) return false;
        node = (node as Values)[key];
      }
      return true;
    };
    const missing: string[] = [];
    for (const [, path] of text.matchAll(/\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)/g)) {
      if (!has(values, path.slice(1).split('.'))) missing.push(`.Values${path}`);
    }
    // $values is one role's block (api, gateway or worker): the path must exist in each
    for (const [, path] of text.matchAll(/\$values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)/g)) {
      for (const role of ['api', 'gateway', 'worker']) {
        if (!has(values[role], path.slice(1).split('.'))) missing.push(`${role}${path}`);
      }
    }
    for (const [, path] of text.matchAll(/\$rule((?:\.[A-Za-z_][A-Za-z0-9_]*)+)/g)) {
      if (!has(values, ['metrics', 'prometheusRule', ...path.slice(1).split('.')]))
        missing.push(`metrics.prometheusRule${path}`);
    }
    expect(missing).toEqual([]);
  });
});

describe('chart settings', () => {
  it('every environment variable the chart sets is one the config loader reads', () => {
    const known = configEnvNames();
    const named = new Set<string>();
    for (const name of templates) {
      for (const [, env] of source(name).matchAll(/"(ROOST_[A-Z0-9_]+|DATABASE_URL|REDIS_URL|PORT)"/g)) named.add(env);
      for (const [, env] of source(name).matchAll(
        /^\s*-?\s*(?:name: |)(ROOST_[A-Z0-9_]+|DATABASE_URL|REDIS_URL|PORT):?\s/gm,
      ))
        named.add(env);
    }
    expect(named.size).toBeGreaterThan(10);
    expect([...named].filter((env) => !known.has(env))).toEqual([]);
  });

  it('the config block and the ConfigMap map the same keys', () => {
    const config = defaultValues().config as Values;
    const mapped = [...source('configmap.yaml').matchAll(/^\s+"([a-zA-Z]+)" "ROOST_[A-Z_]+"$/gm)].map((m) => m[1]);
    expect(mapped.sort()).toEqual(
      Object.keys(config)
        .filter((key) => key !== 'publicUrl')
        .sort(),
    );
  });
});
