import { Controller, Post, Req, Res, UseGuards } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { bearerFrom, type Agent } from '#domain';
import { JsonBody } from '#http';
import { AgentGuard, CurrentAgent } from '../auth/guards';
import { McpService } from './mcp.service';

/**
 * `POST /mcp`: MCP over Streamable HTTP, stateless (EXTENSIONS.md §8); the bearer is an agent
 * token. GET and DELETE answer 405 like any other method a known path lacks: there is no
 * server-initiated stream and no session to end.
 */
@Controller('/mcp')
export class McpController {
  constructor(private readonly mcp: McpService) {}

  @Post()
  @UseGuards(AgentGuard)
  post(
    @CurrentAgent() agent: Agent,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
    @JsonBody() body: Record<string, unknown>,
  ): Promise<void> {
    return this.mcp.handle(agent, bearerFrom(request.headers.authorization)!, request, reply, body);
  }
}
