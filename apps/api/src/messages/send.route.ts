import { Injectable, type OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AcceptService, type Accepted } from '#core';
import { jsonBody, peekRecipientHandles, requestContext } from '#http';
import { AgentGuard } from '../auth/guards';

/**
 * `POST /messages` (ASMTP.md §3.2) as a plain Fastify route rather than a Nest controller method:
 * the one route every envelope goes through. Nest's pipeline (an execution context per guard and
 * per parameter, a promise per parameter, the guards consumer) cost the accept path about a fifth
 * of its allocations and a tenth of the main thread's CPU per envelope, for nothing this route
 * needs (docs/benchmarks.md, 2026-12-04 evening). The steps are those of the other agent routes,
 * in the same order: `AgentGuard.authenticate` (the recipients the body names load in the same
 * round trip, then a rate-limit token), then the body, then accept; the answer is 202 with the
 * `Accepted` JSON. An error goes through Fastify's error handler, which Nest points at the global
 * exception filter (AsmtpErrorFilter), as for every Nest route; the access line and metrics come
 * from the Fastify hooks every route has.
 */
@Injectable()
export class SendRoute implements OnModuleInit {
  constructor(
    private readonly adapterHost: HttpAdapterHost,
    private readonly accept: AcceptService,
    private readonly agents: AgentGuard,
  ) {}

  onModuleInit(): void {
    this.adapterHost.httpAdapter.getInstance<FastifyInstance>().post('/messages', async (request, reply) => {
      const accepted = await this.send(request);
      return reply.code(202).send(accepted);
    });
  }

  private async send(request: FastifyRequest): Promise<Accepted> {
    const { agent, recipients } = await this.agents.authenticate(request, peekRecipientHandles(request));
    const body = jsonBody(request);
    const logContext = requestContext(request);
    if (logContext && typeof body.id === 'string') logContext.envelope_id = body.id.slice(0, 26);
    return (await this.accept.accept(agent, body, { recipients })).accepted;
  }
}
