import { Controller, Get, Header, Param, UseGuards } from '@nestjs/common';
import { parseIdsQuery, parsePeek, type Agent, type QueryPairs } from '#domain';
import { JSON_CONTENT_TYPE, Query } from '#http';
import { AgentGuard, CurrentAgent } from '../auth/guards';
import { MessagesService } from './messages.service';

/** `GET /messages` and `GET /messages/:id`; `POST /messages` is send.route.ts. */
@Controller('/messages')
export class MessagesController {
  constructor(private readonly messages: MessagesService) {}

  /** Batch fetch, ASMTP.md §3.4. */
  @Get()
  @UseGuards(AgentGuard)
  @Header('content-type', JSON_CONTENT_TYPE)
  async batch(@CurrentAgent() agent: Agent, @Query() query: QueryPairs): Promise<string> {
    const bodies = await this.messages.fetch(agent, parseIdsQuery(query), parsePeek(query));
    return `{"envelopes":[${bodies.join(',')}]}`;
  }

  /** ASMTP.md §3.3. */
  @Get('/:id')
  @UseGuards(AgentGuard)
  @Header('content-type', JSON_CONTENT_TYPE)
  one(@CurrentAgent() agent: Agent, @Param('id') id: string, @Query() query: QueryPairs): Promise<string> {
    return this.messages.fetchOne(agent, id, parsePeek(query));
  }
}
