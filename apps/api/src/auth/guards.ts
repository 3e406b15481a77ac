import { createParamDecorator, Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { AuthFailLimiter, AuthService, RateLimiter, type AdminScope, type Recipients } from '#core';
import type { Agent } from '#domain';
import { requestContext } from '#http';

// The HTTP side of authentication (Fastify requests, request logs) lives with the REST app, so
// libs/core keeps no HTTP types (docs/architecture.md, Layers).
type AuthedRequest = FastifyRequest & { agent?: Agent; admin?: AdminScope };

/** The address a request's failed authentications count against. */
const addressOf = (limiter: AuthFailLimiter, request: FastifyRequest): string =>
  limiter.addressOf(request.raw.socket.remoteAddress, request.headers['x-forwarded-for']);

/** Agent routes: `Authorization: Bearer <agent token>` or 401, then the agent's rate limit. */
@Injectable()
export class AgentGuard implements CanActivate {
  constructor(
    private readonly auth: AuthService,
    private readonly rateLimiter: RateLimiter,
    private readonly authFail: AuthFailLimiter,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    await this.authenticate(context.switchToHttp().getRequest<FastifyRequest>(), []);
    return true;
  }

  /**
   * Authenticate (failures limited per client address), loading the recipients `handles` names in
   * the same round trip, then take a token from the agent's rate limit (429 RATE_LIMITED either
   * way). Leaves the agent on the request and in its log context. `POST /messages` (send.route.ts,
   * not a Nest route) calls it directly.
   */
  async authenticate(
    request: FastifyRequest,
    handles: readonly string[],
  ): Promise<{ agent: Agent; recipients: Recipients }> {
    const { agent, recipients } = await this.authFail.guard(addressOf(this.authFail, request), () =>
      this.auth.senderFromHeader(request.headers.authorization, handles),
    );
    (request as AuthedRequest).agent = agent;
    const logContext = requestContext(request);
    if (logContext) logContext.agent = agent.handle;
    try {
      await this.rateLimiter.take(agent.id);
    } catch (error) {
      // A send admitted by a kept lookup: a token revoked since answers 401, not 429.
      if (recipients.kept && recipients.reload) await recipients.reload();
      throw error;
    }
    return { agent, recipients };
  }
}

/** Admin routes: the operator admin token or an organization's admin token, or 401. */
@Injectable()
export class AdminGuard implements CanActivate {
  constructor(
    private readonly auth: AuthService,
    private readonly authFail: AuthFailLimiter,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const request = context.switchToHttp().getRequest<AuthedRequest>();
    request.admin = await this.authFail.guard(addressOf(this.authFail, request), () =>
      this.auth.adminFromHeader(request.headers.authorization),
    );
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
