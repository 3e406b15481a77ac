import { Controller, Delete, Get, Header, HttpCode, Param, Patch, Post, UseGuards } from '@nestjs/common';
import { parseBlocksQuery, type Agent, type QueryPairs } from '#domain';
import { JsonBody, Query } from '#http';
import { AgentGuard, CurrentAgent } from '../auth/guards';
import { AgentsService } from './agents.service';

/** `/agents/me*` and discovery. Static `/agents/me/…` routes shadow discovery of `@me.*` (§3.8). */
@Controller('/agents')
@UseGuards(AgentGuard)
export class AgentsController {
  constructor(private readonly agents: AgentsService) {}

  @Get('/me')
  me(@CurrentAgent() agent: Agent) {
    return this.agents.me(agent);
  }

  @Patch('/me')
  updateMe(@CurrentAgent() agent: Agent, @JsonBody() body: Record<string, unknown>) {
    return this.agents.updateMe(agent, body);
  }

  @Get('/me/allowlist')
  allowlist(@CurrentAgent() agent: Agent) {
    return this.agents.allowlist(agent);
  }

  @Post('/me/allowlist')
  @HttpCode(200)
  addToAllowlist(@CurrentAgent() agent: Agent, @JsonBody() body: Record<string, unknown>) {
    return this.agents.addToAllowlist(agent, body);
  }

  @Delete('/me/allowlist/:entry')
  removeFromAllowlist(@CurrentAgent() agent: Agent, @Param('entry') entry: string) {
    return this.agents.removeFromAllowlist(agent, entry);
  }

  @Get('/me/blocks')
  blocks(@CurrentAgent() agent: Agent, @Query() query: QueryPairs) {
    return this.agents.blocks(agent, parseBlocksQuery(query));
  }

  @Post('/me/blocks')
  @HttpCode(201)
  block(@CurrentAgent() agent: Agent, @JsonBody() body: Record<string, unknown>) {
    return this.agents.block(agent, body);
  }

  @Delete('/me/blocks/:handle')
  unblock(@CurrentAgent() agent: Agent, @Param('handle') handle: string) {
    return this.agents.unblock(agent, handle);
  }

  @Get('/:owner/:name')
  profile(@CurrentAgent() agent: Agent, @Param('owner') owner: string, @Param('name') name: string) {
    return this.agents.profile(agent, owner, name);
  }

  @Get('/:owner/:name/card')
  @Header('content-type', 'text/markdown; charset=utf-8')
  card(@CurrentAgent() agent: Agent, @Param('owner') owner: string, @Param('name') name: string) {
    return this.agents.card(agent, owner, name);
  }
}
