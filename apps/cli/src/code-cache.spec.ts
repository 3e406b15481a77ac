import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { transformSync } from 'esbuild';
import { codeCacheDir } from './code-cache';

/**
 * The cache hooks how Node itself loads a `.js` file, which jest's module registry stands in for:
 * each case runs code-cache.ts (as CommonJS) in a real `node` process, as main.ts does.
 */

let dir: string;
let cacheDir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'roost-code-cache-'));
  cacheDir = join(dir, 'cache');
  const source = readFileSync(join(__dirname, 'code-cache.ts'), 'utf8');
  writeFileSync(join(dir, 'code-cache.js'), transformSync(source, { loader: 'ts', format: 'cjs' }).code);
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const BODY = [
  "const { sep } = require('node:path');",
  'function add(a, b) { return a + b; }',
  "module.exports = { sum: add(2, 3), base: require('path').basename(__filename), sep };",
  '',
].join('\n');

function chunk(name: string, body: string): string {
  const file = join(dir, name);
  writeFileSync(file, body);
  return file;
}

/** A process that installs the cache for `file`, requires it (and `other`), then exits (which writes the cache). */
function run(file: string, cache = cacheDir, other?: string): { sum: number; base: string; outcome?: string } {
  const script = `
    const { installChunkCache } = require(${JSON.stringify(join(dir, 'code-cache.js'))});
    const cache = installChunkCache(${JSON.stringify(cache)}, (f) => f === ${JSON.stringify(file)});
    const m = require(${JSON.stringify(file)});
    if (${JSON.stringify(other ?? '')}) require(${JSON.stringify(other ?? '')});
    if (cache.loads.size !== 1) throw new Error('loaded through the cache: ' + [...cache.loads.keys()]);
    console.log(JSON.stringify({ sum: m.sum, base: m.base, outcome: cache.loads.get(${JSON.stringify(file)}) }));`;
  return JSON.parse(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' })) as {
    sum: number;
    base: string;
    outcome?: string;
  };
}

describe('the CLI bundle code cache (Node 20)', () => {
  it('compiles a chunk from the cache written at the exit of its first run; other files load as usual', () => {
    const file = chunk('cli.js', BODY);
    const other = chunk('other.js', 'module.exports = 1;\n');
    expect(run(file, cacheDir, other)).toEqual({ sum: 5, base: 'cli.js', outcome: 'miss' });
    expect(readdirSync(cacheDir)).toHaveLength(1);
    expect(run(file, cacheDir, other)).toEqual({ sum: 5, base: 'cli.js', outcome: 'hit' });
  });

  it('never uses the cache of other text; refuses corrupt data and writes it anew', () => {
    const file = chunk('mcp.js', BODY);
    run(file);
    chunk('mcp.js', BODY.replace('add(2, 3)', 'add(2, 4)'));
    expect(run(file)).toMatchObject({ sum: 6, outcome: 'miss' });
    // Replaced, not added to: the folder never grows with upgrades.
    expect(readdirSync(cacheDir)).toHaveLength(1);
    expect(run(file)).toMatchObject({ sum: 6, outcome: 'hit' });
    // Corrupt data after a valid text hash: V8 refuses it.
    for (const name of readdirSync(cacheDir)) {
      const stored = readFileSync(join(cacheDir, name));
      writeFileSync(join(cacheDir, name), Buffer.concat([stored.subarray(0, 32), Buffer.from('not a code cache')]));
    }
    expect(run(file)).toMatchObject({ sum: 6, outcome: 'rejected' });
    expect(run(file)).toMatchObject({ sum: 6, outcome: 'hit' });
  });

  it('runs without a cache when its folder cannot be written', () => {
    const blocked = join(dir, 'file');
    writeFileSync(blocked, '');
    const file = chunk('hook.js', BODY);
    expect(run(file, join(blocked, 'cache'))).toMatchObject({ sum: 5, outcome: 'miss' });
    expect(run(file, join(blocked, 'cache'))).toMatchObject({ sum: 5, outcome: 'miss' });
  });

  it('lives in the user cache folder', () => {
    expect(codeCacheDir({ XDG_CACHE_HOME: '/x/cache' })).toBe(join('/x/cache', 'roost', 'code-cache'));
  });
});
