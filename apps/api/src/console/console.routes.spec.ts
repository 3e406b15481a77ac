import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import Fastify, { type FastifyInstance } from 'fastify';
import { findConsoleDir } from './console.files';
import { CONSOLE_SECURITY_HEADERS, registerConsole } from './console.routes';

const INDEX = '<!doctype html><script type="module" src="./assets/index-AbCdEf12.js"></script>';
const SCRIPT = `console.log(${JSON.stringify('x'.repeat(2000))});`;

describe('console static serving', () => {
  let dir: string;
  let app: FastifyInstance;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'roost-console-'));
    mkdirSync(join(dir, 'assets'));
    writeFileSync(join(dir, 'index.html'), INDEX);
    writeFileSync(join(dir, 'assets', 'index-AbCdEf12.js'), SCRIPT);
    writeFileSync(join(dir, 'assets', 'index-ZyXwVu98.css'), 'body{}');
    writeFileSync(join(dir, 'robots.txt'), 'User-agent: *');
    app = Fastify({ exposeHeadRoutes: false });
    registerConsole(app, { dir });
    app.post('/console/echo', async () => ({ ok: true }));
    await app.ready();
  });

  afterAll(async () => {
    await app.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const expectSecurityHeaders = (headers: Record<string, unknown>) => {
    for (const [name, value] of Object.entries(CONSOLE_SECURITY_HEADERS)) expect(headers[name]).toBe(value);
  };

  it('redirects /console to the relative console/ so an Ingress path prefix survives', async () => {
    const res = await app.inject({ url: '/console?x=1' });
    expect(res.statusCode).toBe(301);
    expect(res.headers.location).toBe('console/?x=1');
    expectSecurityHeaders(res.headers);
  });

  it('serves index.html at /console/ with no-cache and every security header', async () => {
    const res = await app.inject({ url: '/console/' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(res.headers['cache-control']).toBe('no-cache');
    expect(res.body).toBe(INDEX);
    expectSecurityHeaders(res.headers);
    const csp = String(res.headers['content-security-policy']);
    for (const directive of [
      "script-src 'self'",
      "style-src 'self'",
      "connect-src 'self'",
      "frame-ancestors 'none'",
      "object-src 'none'",
      "base-uri 'none'",
    ]) {
      expect(csp).toContain(directive);
    }
    expect(csp).not.toContain('unsafe-inline');
  });

  it('serves hashed assets as immutable with their content type, gzipped when accepted', async () => {
    const plain = await app.inject({ url: '/console/assets/index-AbCdEf12.js' });
    expect(plain.statusCode).toBe(200);
    expect(plain.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(plain.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(plain.body).toBe(SCRIPT);
    const gzip = await app.inject({
      url: '/console/assets/index-AbCdEf12.js',
      headers: { 'accept-encoding': 'gzip, br' },
    });
    expect(gzip.headers['content-encoding']).toBe('gzip');
    expect(gunzipSync(gzip.rawPayload).toString()).toBe(SCRIPT);
    const css = await app.inject({ url: '/console/assets/index-ZyXwVu98.css' });
    expect(css.headers['content-type']).toBe('text/css; charset=utf-8');
    const txt = await app.inject({ url: '/console/robots.txt' });
    expect(txt.headers['cache-control']).toBe('no-cache');
  });

  it('answers 304 to a matching If-None-Match', async () => {
    const first = await app.inject({ url: '/console/' });
    const again = await app.inject({ url: '/console/', headers: { 'if-none-match': String(first.headers.etag) } });
    expect(again.statusCode).toBe(304);
    expectSecurityHeaders(again.headers);
  });

  it('falls back to index.html for client routes, and serves assets at any depth', async () => {
    const page = await app.inject({ url: '/console/agents/@acme.bot' });
    expect(page.statusCode).toBe(200);
    expect(page.body).toBe(INDEX);
    const deepAsset = await app.inject({ url: '/console/agents/assets/index-AbCdEf12.js' });
    expect(deepAsset.statusCode).toBe(200);
    expect(deepAsset.headers['content-type']).toBe('text/javascript; charset=utf-8');
  });

  it('answers 404 with the ASMTP error body for a missing file, never index.html', async () => {
    const res = await app.inject({ url: '/console/assets/missing-12345678.js' });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ error: { code: 'NOT_FOUND', message: expect.any(String) } });
    expectSecurityHeaders(res.headers);
    expect((await app.inject({ url: '/console/favicon.ico' })).statusCode).toBe(404);
  });

  it('never resolves a path outside the built folder', async () => {
    for (const url of [
      '/console/../package.json',
      '/console/%2e%2e/%2e%2e/package.json',
      '/console/assets/..%2f..%2findex.html',
    ]) {
      const res = await app.inject({ url });
      expect(res.body).not.toContain('"name"');
      expect([200, 404]).toContain(res.statusCode);
      if (res.statusCode === 200) expect(res.body).toBe(INDEX);
    }
  });

  it('puts the security headers on console responses of other routes too', async () => {
    const res = await app.inject({ method: 'POST', url: '/console/echo' });
    expectSecurityHeaders(res.headers);
    const outside = await app.inject({ method: 'GET', url: '/healthz' });
    expect(outside.headers['content-security-policy']).toBeUndefined();
  });

  it('answers 404 "not built" when there is no built console', async () => {
    const bare = Fastify();
    registerConsole(bare, { dir: join(dir, 'nowhere') });
    await bare.ready();
    try {
      const res = await bare.inject({ url: '/console/' });
      expect(res.statusCode).toBe(404);
    } finally {
      await bare.close();
    }
  });

  it('finds only a built dist/console, never the apps/console source', () => {
    const found = findConsoleDir(__dirname);
    if (found !== null) expect(found.replace(/\\/g, '/')).toMatch(/\/dist\/console$/);
  });
});
