import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, dirname, extname, join, relative, sep } from 'node:path';
import { gzipSync } from 'node:zlib';

export interface ConsoleFile {
  body: Buffer;
  gzip: Buffer | null;
  type: string;
  etag: string;
  /** Vite names hashed assets `assets/<name>-<hash>.<ext>`: those never change under one name. */
  immutable: boolean;
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
};

const FILE_EXTENSION = /\.(?:html|js|mjs|css|map|json|svg|png|jpe?g|webp|gif|ico|woff2?|txt)$/i;

const COMPRESSIBLE = new Set(['.html', '.js', '.mjs', '.css', '.json', '.svg', '.txt']);

/** `dist/console` of this checkout or image, found by walking up from the running code. */
export function findConsoleDir(from: string = __dirname): string | null {
  let dir = from;
  for (;;) {
    // Only a `dist/console`: `apps/console` beside the code is the unbuilt source.
    const candidates = basename(dir) === 'dist' ? [join(dir, 'console')] : [join(dir, 'dist', 'console')];
    for (const candidate of candidates) {
      if (existsSync(join(candidate, 'index.html'))) return candidate;
    }
    const parent = dirname(dir);
    if (parent === dir) return null;
    dir = parent;
  }
}

/**
 * The built console held in memory (about 150 KB): every file with its gzip form and ETag, read
 * once, so a request never touches the disk or resolves a path the client chose.
 */
export class ConsoleFiles {
  private constructor(private readonly files: ReadonlyMap<string, ConsoleFile>) {}

  static load(dir: string): ConsoleFiles {
    const files = new Map<string, ConsoleFile>();
    const walk = (folder: string) => {
      for (const name of readdirSync(folder)) {
        const path = join(folder, name);
        if (statSync(path).isDirectory()) walk(path);
        else files.set(relative(dir, path).split(sep).join('/'), fileOf(path));
      }
    };
    walk(dir);
    if (!files.has('index.html')) throw new Error(`${dir} has no index.html`);
    return new ConsoleFiles(files);
  }

  get index(): ConsoleFile {
    return this.files.get('index.html') as ConsoleFile;
  }

  /**
   * The file for a path under `/console/`: an exact file; else, for a page path, index.html (the
   * app turns the path into its route); `null` for a missing file (a web file extension).
   * `assets/…` at any depth is the asset itself, so index.html works when served at a deep path.
   */
  lookup(path: string): ConsoleFile | null {
    const exact = this.files.get(path);
    if (exact) return exact;
    const asset = /(?:^|\/)(assets\/[^/]+)$/.exec(path);
    if (asset) return this.files.get(asset[1]) ?? null;
    // Handles hold dots (`@acme.bot`): only a file-type extension makes a path a missing file.
    return FILE_EXTENSION.test(path) ? null : this.index;
  }
}

function fileOf(path: string): ConsoleFile {
  const body = readFileSync(path);
  const ext = extname(path).toLowerCase();
  const gzip = COMPRESSIBLE.has(ext) && body.length > 512 ? gzipSync(body, { level: 9 }) : null;
  return {
    body,
    gzip,
    type: TYPES[ext] ?? 'application/octet-stream',
    etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`,
    immutable: /(^|[/\\])assets[/\\][^/\\]+-[A-Za-z0-9_-]{8,}\.[a-z0-9]+$/.test(path),
  };
}
