import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ConsoleFiles, findConsoleDir, type ConsoleFile } from './console.files';

/**
 * Every console response carries these, errors included. No inline script or style anywhere, so
 * a hostile subject or body that slips past the sanitiser still cannot run or restyle the page.
 */
export const CONSOLE_SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "connect-src 'self'",
    "img-src 'self'",
    "font-src 'self'",
    "form-action 'none'",
    "frame-ancestors 'none'",
    "object-src 'none'",
    "base-uri 'none'",
  ].join('; '),
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
};

export interface ConsoleOptions {
  /** The built console (`dist/console`); found by walking up from the code when not given. */
  dir?: string;
}

function isConsolePath(url: string): boolean {
  return url === '/console' || url.startsWith('/console/') || url.startsWith('/console?');
}

function notFound(reply: FastifyReply, message: string): FastifyReply {
  return reply
    .code(404)
    .header('content-type', 'application/json; charset=utf-8')
    .header('cache-control', 'no-store')
    .send(JSON.stringify({ error: { code: 'NOT_FOUND', message } }));
}

/**
 * `/console` → `console/` (a relative redirect, so it also works behind an Ingress path prefix),
 * `/console/…` → the built files, with index.html for any page path (single-page app).
 */
export function registerConsole(fastify: FastifyInstance, options: ConsoleOptions = {}): void {
  let files: ConsoleFiles | null = null;
  // Loaded on first use: a node started before `npm run build` finished still serves it later.
  const load = (): ConsoleFiles | null => {
    if (files) return files;
    const dir = options.dir ?? findConsoleDir();
    if (dir && existsSync(join(dir, 'index.html'))) files = ConsoleFiles.load(dir);
    return files;
  };

  // Callback style, not async: this hook runs on every response of the process (POST /messages
  // included), and an async hook costs each one a promise and a microtask turn before the write.
  fastify.addHook('onSend', (request, reply, payload, done) => {
    if (isConsolePath(request.url)) reply.headers(CONSOLE_SECURITY_HEADERS);
    done(null, payload);
  });

  fastify.route({
    method: ['GET', 'HEAD'],
    url: '/console',
    handler: (request, reply) => {
      const search = request.url.slice('/console'.length);
      return reply.code(301).header('location', `console/${search}`).header('cache-control', 'no-store').send();
    },
  });

  fastify.route({
    method: ['GET', 'HEAD'],
    url: '/console/*',
    handler: (request: FastifyRequest<{ Params: { '*': string } }>, reply) => {
      const loaded = load();
      if (!loaded) return notFound(reply, 'the console is not built (npm run build)');
      const path = request.params['*'];
      if (path.split('/').some((segment) => segment === '..' || segment === '.')) return notFound(reply, 'not found');
      const file = path === '' ? loaded.index : loaded.lookup(path);
      if (!file) return notFound(reply, `no console file ${path}`);
      return send(request, reply, file);
    },
  });
}

function send(request: FastifyRequest, reply: FastifyReply, file: ConsoleFile): FastifyReply {
  reply
    .header('content-type', file.type)
    .header('etag', file.etag)
    .header('vary', 'accept-encoding')
    // index.html is revalidated each time so a deploy's new asset names are picked up at once.
    .header('cache-control', file.immutable ? 'public, max-age=31536000, immutable' : 'no-cache');
  if (request.headers['if-none-match'] === file.etag) return reply.code(304).send();
  const gzip = file.gzip !== null && /\bgzip\b/.test(String(request.headers['accept-encoding'] ?? ''));
  if (gzip) reply.header('content-encoding', 'gzip');
  return reply.code(200).send(gzip ? file.gzip : file.body);
}
