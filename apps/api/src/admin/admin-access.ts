import {
  applyDecorators,
  Injectable,
  SetMetadata,
  UseGuards,
  UseInterceptors,
  type CallHandler,
  type CanActivate,
  type ExecutionContext,
  type NestInterceptor,
} from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { FastifyRequest } from 'fastify';
import { tap, type Observable } from 'rxjs';
import type { AdminScope } from '#core';
import { AdminGuard } from '../auth/guards';
import { AsmtpError } from '#domain';
import { requestContext } from '#http';
import { Metrics } from '#metrics';

type AdminRequest = FastifyRequest & { admin?: AdminScope };

/** `operator` or `org:<name>`, as log lines name an admin scope. */
export const scopeLabel = (scope: AdminScope): string => (scope.kind === 'operator' ? 'operator' : `org:${scope.org}`);

/**
 * Organization routes are the operator's; an organization admin gets the same 401 as a wrong token
 * (EXTENSIONS.md §5). Runs after `AdminGuard`, which set the scope.
 */
@Injectable()
export class OperatorOnlyGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const scope = context.switchToHttp().getRequest<AdminRequest>().admin;
    if (scope?.kind !== 'operator') throw new AsmtpError(401, 'UNAUTHORIZED', 'invalid admin bearer');
    return true;
  }
}

/** The operator admin token only: the admin bearer, then the operator check. */
export const OperatorOnly = () => UseGuards(AdminGuard, OperatorOnlyGuard);

export type AdminReadRoute = 'mailbox' | 'message' | 'receipts' | 'status' | 'file' | 'schedules' | 'events';
export const ADMIN_READ_ROUTES: readonly AdminReadRoute[] = [
  'mailbox',
  'message',
  'receipts',
  'status',
  'file',
  'schedules',
  'events',
];

const ADMIN_READ = Symbol('admin-read');

/**
 * An admin read of one agent's data (console): the request's access line carries the admin scope
 * and the agent read (`admin`, `target`, beside `req_id` and `route`), and each read that answered
 * is counted in `roost_admin_reads_total{route}`.
 */
export const AdminRead = (route: AdminReadRoute) =>
  applyDecorators(SetMetadata(ADMIN_READ, route), UseInterceptors(AdminReadInterceptor));

@Injectable()
export class AdminReadInterceptor implements NestInterceptor {
  constructor(
    private readonly reflector: Reflector,
    private readonly metrics: Metrics,
  ) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const route = this.reflector.get<AdminReadRoute | undefined>(ADMIN_READ, context.getHandler());
    const request = context.switchToHttp().getRequest<AdminRequest & { params?: Record<string, string> }>();
    const logContext = requestContext(request);
    if (logContext && request.admin) {
      logContext.admin = scopeLabel(request.admin);
      logContext.target = request.params?.handle;
    }
    return next.handle().pipe(tap(() => route && this.metrics.adminReads.inc({ route })));
  }
}
