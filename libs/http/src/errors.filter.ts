import { Catch, HttpException, type ArgumentsHost, type ExceptionFilter } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { AsmtpError, isUnavailable } from '#domain';
import { requestContext } from './logging';
import type { RouteTable } from './routes';

/** Maps every failure onto the ASMTP error body `{"error":{"code","message"}}` (ASMTP.md §4). */
@Catch()
export class AsmtpErrorFilter implements ExceptionFilter {
  constructor(
    private readonly routes: RouteTable,
    private readonly logger: Logger,
  ) {}

  catch(exception: unknown, host: ArgumentsHost): void {
    const context = host.switchToHttp();
    const request = context.getRequest<FastifyRequest>();
    const reply = context.getResponse<FastifyReply>();
    const error = this.toAsmtpError(exception, request);
    if (reply.sent) return;
    for (const [name, value] of Object.entries(error.headers ?? {})) reply.header(name, value);
    reply
      .code(error.status)
      .header('content-type', 'application/json; charset=utf-8')
      .send(JSON.stringify(error.body()));
  }

  private toAsmtpError(exception: unknown, request: FastifyRequest): AsmtpError {
    if (exception instanceof AsmtpError) return exception;
    if (exception instanceof HttpException) {
      const status = exception.getStatus();
      if (status === 404) {
        const path = (request.raw.url ?? '/').split('?')[0];
        if (this.routes.knowsPathUnderOtherMethod(request.method, path)) {
          return new AsmtpError(405, 'METHOD_NOT_ALLOWED', `method ${request.method} not allowed on ${path}`);
        }
        return new AsmtpError(404, 'NOT_FOUND', `no route matches ${request.method} ${path}`);
      }
      if (status === 413) return new AsmtpError(413, 'PAYLOAD_TOO_LARGE', 'request body is too large');
      if (status < 500) return new AsmtpError(status, 'BAD_REQUEST', exception.message);
    }
    const fastifyCode = (exception as { code?: unknown } | null)?.code;
    if (fastifyCode === 'FST_ERR_CTP_BODY_TOO_LARGE')
      return new AsmtpError(413, 'PAYLOAD_TOO_LARGE', 'request body is too large');
    if (typeof fastifyCode === 'string' && fastifyCode.startsWith('FST_ERR_CTP')) {
      return new AsmtpError(400, 'INVALID_JSON', 'request body could not be read');
    }
    if (isUnavailable(exception)) {
      this.logger.warn(
        { context: 'http', ...requestContext(request) },
        `dependency unavailable: ${(exception as Error).message}`,
      );
      return new AsmtpError(503, 'UNAVAILABLE', 'a dependency is unavailable, retry later');
    }
    const stack = exception instanceof Error ? (exception.stack ?? exception.message) : String(exception);
    this.logger.error({ context: 'http', ...requestContext(request), stack }, 'internal error');
    return new AsmtpError(500, 'INTERNAL_ERROR', 'internal error');
  }
}
