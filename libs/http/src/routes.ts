import type { FastifyInstance } from 'fastify';

interface KnownRoute {
  method: string;
  pattern: RegExp;
}

/** Paths on which another method is a 404, not a 405 (ASMTP.md §3.10). */
const NO_405 = new Set(['/healthz', '/health', '/readyz', '/metrics']);

/**
 * Every route Fastify registers, so that a path known under another method answers
 * 405 METHOD_NOT_ALLOWED instead of 404 (ASMTP.md §3.0).
 */
export class RouteTable {
  private readonly routes: KnownRoute[] = [];

  attach(fastify: FastifyInstance): void {
    fastify.addHook('onRoute', (route) => {
      if (NO_405.has(route.url) || route.url === '*' || route.url.includes('*')) return;
      const methods = Array.isArray(route.method) ? route.method : [route.method];
      const source = route.url
        .split('/')
        .map((segment) => (segment.startsWith(':') ? '[^/]+' : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
        .join('/');
      for (const method of methods) this.routes.push({ method, pattern: new RegExp(`^${source}$`) });
    });
  }

  /** True when `path` is served under some method other than `method`. */
  knowsPathUnderOtherMethod(method: string, path: string): boolean {
    return this.routes.some((route) => route.method !== method && route.pattern.test(path));
  }
}
