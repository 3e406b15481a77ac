import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import Module, { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { constants as vmConstants, Script } from 'node:vm';

/**
 * V8 code cache for the CLI. Compiling is a large part of a short `roost` process: `roost mcp`
 * parses ~1.2 MB of bundle (the MCP SDK, zod, ajv) before it can answer `initialize`.
 *
 * - Node ≥ 22.1: `module.enableCompileCache()`, Node's own cache (every module loaded after it).
 * - Older Node (20): the packed bundle's chunks (cli.js, mcp.js, hook.js) are compiled with
 *   `vm.Script` and V8's cached data, which is written at exit after the first run, so it also
 *   holds the functions compiled while running. One cache file per chunk path, Node version and
 *   architecture, which starts with a hash of the chunk's text: data compiled from another text
 *   (an upgrade) is never used but replaced, and V8 itself refuses data it cannot use (then the
 *   file is written anew too).
 *
 * The cache lives in `$XDG_CACHE_HOME/roost/code-cache` (default `~/.cache/...`). Any failure
 * (unreadable, unwritable, corrupt) only means compiling as usual. `NODE_DISABLE_COMPILE_CACHE=1`
 * (Node's own switch) turns both off.
 */

export function codeCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'roost', 'code-cache');
}

interface CompileCacheModule {
  enableCompileCache?: (dir?: string) => unknown;
}

/**
 * Turns the cache on for what main.ts loads next. `chunks`: the bundle's files, cached by
 * `installChunkCache` where Node has no compile cache of its own (none: the repository's build).
 */
export function enableCodeCache(chunks?: (filename: string) => boolean): void {
  if (process.env.NODE_DISABLE_COMPILE_CACHE) return;
  try {
    const dir = codeCacheDir();
    const node = Module as unknown as CompileCacheModule;
    if (typeof node.enableCompileCache === 'function') node.enableCompileCache(dir);
    else if (chunks) installChunkCache(dir, chunks);
  } catch {
    // no cache: compile as usual
  }
}

export interface ChunkCache {
  /** Per file: whether V8 accepted the cached data ('hit'), had none ('miss') or refused it ('rejected'). */
  readonly loads: Map<string, 'hit' | 'miss' | 'rejected'>;
  /** Writes the cache of every file loaded without usable data (run at process exit). */
  save(): void;
  /** Restores the previous `.js` loader (tests). */
  uninstall(): void;
}

type Loader = (module: Module, filename: string) => void;

const hash = (text: string) => createHash('sha256').update(text).digest();

/** Compiles the matching `.js` files through `vm.Script` with cached data from `dir`. */
export function installChunkCache(dir: string, chunks: (filename: string) => boolean): ChunkCache {
  // Module._extensions is require.extensions: how a file extension is loaded.
  const extensions = Module as unknown as { _extensions: Record<string, Loader> };
  const previous = extensions._extensions['.js'];
  const pending: Array<{ script: Script; file: string; digest: Buffer }> = [];
  const loads = new Map<string, 'hit' | 'miss' | 'rejected'>();

  const load: Loader = function (this: unknown, module, filename) {
    if (!chunks(filename)) return previous.call(this, module, filename);
    const text = readFileSync(filename, 'utf8');
    const file = join(
      dir,
      `${hash(`${process.version} ${process.arch} ${filename}`).toString('hex').slice(0, 32)}.bin`,
    );
    const digest = hash(text);
    let cachedData: Buffer | undefined;
    try {
      const stored = readFileSync(file);
      // The data of another text of this file (the bundle was rebuilt or upgraded) is never used.
      if (stored.length > digest.length && digest.equals(stored.subarray(0, digest.length)))
        cachedData = stored.subarray(digest.length);
    } catch {
      cachedData = undefined;
    }
    const body = text.startsWith('#!') ? `//${text.slice(2)}` : text;
    const script = new Script(`(function (exports, require, module, __filename, __dirname) {${body}\n})`, {
      filename,
      cachedData,
      importModuleDynamically: vmConstants?.USE_MAIN_CONTEXT_DEFAULT_LOADER,
    });
    const outcome = cachedData === undefined ? 'miss' : script.cachedDataRejected ? 'rejected' : 'hit';
    loads.set(filename, outcome);
    if (outcome !== 'hit') pending.push({ script, file, digest });
    const wrapper = script.runInThisContext({ displayErrors: true }) as (...args: unknown[]) => void;
    wrapper.call(module.exports, module.exports, createRequire(filename), module, filename, dirname(filename));
  };
  extensions._extensions['.js'] = load;

  const save = () => {
    for (const { script, file, digest } of pending.splice(0)) {
      try {
        mkdirSync(dir, { recursive: true });
        const temp = `${file}.${process.pid}.tmp`;
        writeFileSync(temp, Buffer.concat([digest, script.createCachedData()]));
        renameSync(temp, file);
      } catch {
        // unwritable cache: the next run compiles again
      }
    }
  };
  process.once('exit', save);
  return {
    loads,
    save,
    uninstall: () => {
      process.removeListener('exit', save);
      if (extensions._extensions['.js'] === load) extensions._extensions['.js'] = previous;
    },
  };
}
