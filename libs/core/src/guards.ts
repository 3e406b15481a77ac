import {
  createParamDecorator,
  Injectable,
  type CanActivate,
  type ExecutionContext,
} from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import type { Agent } from '#domain';
import { requestContext } from '#http';
import { AuthService, type AdminScope } from './auth.service';
import { RateLimiter } from './rate-limiter';

type AuthedRequest = FastifyRequest & { agent?: Agent; admin?: AdminScope };

/** Agent routes: `Authorization: Bearer <agent token>` or 401. */
@Injectable()
export class AgentGuard implements CanActivate {
  constructor(
    private readonly auth: AuthService,
    private readonly rateLimiter: RateLimiter,
  ) {}

  /** Authenticate, then take a token from the agent's rate limit (429 RATE_LIMITED). */
  async canActivate(context: ExecutionContext): Promise<boolean> {
    const request = context.switchToHttp().getRequest<AuthedRequest>();
    request.agent = await this.auth.agentFromHeader(request.headers.authorization);
    const logContext = requestContext();
    if (logContext) logContext.agent = request.agent.handle;
    await this.rateLimiter.take(request.agent.id);
    return true;
  }
}

/** Admin routes: the operator admin token or an organization's admin token, or 401. */
@Injectable()
export class AdminGuard implements CanActivate {
  constructor(private readonly auth: AuthService) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const request = context.switchToHttp().getRequest<AuthedRequest>();
    request.admin = await this.auth.adminFromHeader(request.headers.authorization);
    return true;
  }
}

/** The authenticated agent (after `AgentGuard`). */
export const CurrentAgent = createParamDecorator(
  (_data: unknown, context: ExecutionContext): Agent => context.switchToHttp().getRequest<AuthedRequest>().agent!,
);

/** The authenticated admin scope (after `AdminGuard`). */
export const CurrentAdmin = createParamDecorator(
  (_data: unknown, context: ExecutionContext): AdminScope => context.switchToHttp().getRequest<AuthedRequest>().admin!,
);
