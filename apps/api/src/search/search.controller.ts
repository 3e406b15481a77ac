import { Controller, Get, UseGuards } from '@nestjs/common';
import { parseSearchQuery, type Agent, type QueryPairs } from '#domain';
import { Query } from '#http';
import { AgentGuard, CurrentAgent } from '../auth/guards';
import { SearchService } from './search.service';

@Controller('/search')
@UseGuards(AgentGuard)
export class SearchController {
  constructor(private readonly search: SearchService) {}

  @Get()
  everything(@CurrentAgent() agent: Agent, @Query() query: QueryPairs) {
    return this.search.everything(agent, parseSearchQuery(query));
  }

  @Get('/agents')
  agents(@CurrentAgent() agent: Agent, @Query() query: QueryPairs) {
    return this.search.agentsPage(agent, parseSearchQuery(query));
  }

  @Get('/messages')
  messages(@CurrentAgent() agent: Agent, @Query() query: QueryPairs) {
    return this.search.messages(agent, parseSearchQuery(query));
  }
}
