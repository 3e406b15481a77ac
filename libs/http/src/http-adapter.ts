import { FastifyAdapter } from '@nestjs/platform-fastify';
import { registerRawBodyParser } from './body';
import { RouteTable } from './routes';

export interface HttpAdapterOptions {
  requestTimeoutMs: number;
}

/**
 * Fastify tuned to ASMTP's routing rules: exact paths (no trailing-slash tolerance), case-
 * sensitive, no automatic HEAD routes, raw bodies read by Roost, long handle segments allowed.
 */
export function createHttpAdapter(options: HttpAdapterOptions): { adapter: FastifyAdapter; routes: RouteTable } {
  const adapter = new FastifyAdapter({
    routerOptions: { ignoreTrailingSlash: false, ignoreDuplicateSlashes: false, caseSensitive: true, maxParamLength: 2048 },
    exposeHeadRoutes: false,
    bodyLimit: 64 * 1024 * 1024,
    requestTimeout: options.requestTimeoutMs,
    connectionTimeout: options.requestTimeoutMs,
    keepAliveTimeout: 65_000,
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    logger: false,
  });
  const fastify = adapter.getInstance();
  const routes = new RouteTable();
  routes.attach(fastify);
  registerRawBodyParser(fastify);
  return { adapter, routes };
}
