import { Controller, Get, Header, HttpCode, Param, Post, UseGuards } from '@nestjs/common';
import { AcceptService, type Accepted, type Recipients } from '#core';
import { parseIdsQuery, parsePeek, type Agent, type QueryPairs } from '#domain';
import { JSON_CONTENT_TYPE, JsonBody, LogContext, Query, type RequestContext } from '#http';
import { AgentGuard, CurrentAgent, PrefetchedRecipients, SenderGuard } from '../auth/guards';
import { MessagesService } from './messages.service';

@Controller('/messages')
export class MessagesController {
  constructor(
    private readonly accept: AcceptService,
    private readonly messages: MessagesService,
  ) {}

  /** ASMTP.md §3.2. */
  @Post()
  @HttpCode(202)
  @UseGuards(SenderGuard)
  async send(
    @CurrentAgent() agent: Agent,
    @PrefetchedRecipients() recipients: Recipients | undefined,
    @JsonBody() body: Record<string, unknown>,
    @LogContext() logContext: RequestContext | undefined,
  ): Promise<Accepted> {
    if (logContext && typeof body.id === 'string') logContext.envelope_id = body.id.slice(0, 26);
    return (await this.accept.accept(agent, body, { recipients })).accepted;
  }

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
