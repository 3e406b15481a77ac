import { FastifyAdapter } from '@nestjs/platform-fastify';
import type { FastifyError, FastifyInstance, FastifyReply } from 'fastify';
import { AsmtpError } from '#domain';
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
    // Draining answers 503 with the ASMTP error body (refuseWhileClosing below), not Fastify's own.
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    logger: false,
    // Failures Fastify meets before routing (a malformed percent-escape in the path, an
    // over-long path parameter) still answer with the ASMTP error body.
    frameworkErrors: (error: FastifyError, _request: unknown, reply: FastifyReply) => {
      const refusal =
        error.code === 'FST_ERR_MAX_PARAM_LENGTH'
          ? new AsmtpError(414, 'BAD_REQUEST', 'a path segment is too long')
          : error.code === 'FST_ERR_BAD_URL'
            ? new AsmtpError(400, 'BAD_REQUEST', 'the path is not valid percent-encoded UTF-8')
            : new AsmtpError(500, 'INTERNAL_ERROR', 'internal error');
      void reply
        .code(refusal.status)
        .header('content-type', 'application/json; charset=utf-8')
        .send(JSON.stringify(refusal.body()));
    },
  });
  const fastify = adapter.getInstance();
  refuseWhileClosing(fastify);
  const routes = new RouteTable();
  routes.attach(fastify);
  registerRawBodyParser(fastify);
  return { adapter, routes };
}

/**
 * Once the server is closing (SIGTERM drain), a request still arriving on an open keep-alive
 * connection gets `503 UNAVAILABLE` with the ASMTP error body and `Connection: close`, so the
 * client retries on another node; requests already in flight finish. Fastify's built-in answer
 * (`return503OnClosing`) had the body `{"error":"Service Unavailable",...}`, which is not an ASMTP
 * error. A preParsing hook, so the request id and the access log still cover it.
 */
function refuseWhileClosing(fastify: FastifyInstance): void {
  let closing = false;
  fastify.addHook('preClose', (done) => {
    closing = true;
    done();
  });
  fastify.addHook('preParsing', (_request, reply, payload, done) => {
    if (!closing) return done(null, payload);
    const refusal = new AsmtpError(503, 'UNAVAILABLE', 'the server is shutting down, retry');
    void reply
      .code(503)
      .header('connection', 'close')
      .header('content-type', 'application/json; charset=utf-8')
      .send(JSON.stringify(refusal.body()));
  });
}
