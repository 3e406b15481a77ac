import { Controller, Delete, Get, Header, Param, Patch, Req, Res, UseGuards } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AdminScope } from '#core';
import { AdminGuard, CurrentAdmin } from '../auth/guards';
import type { QueryPairs } from '#domain';
import { JSON_CONTENT_TYPE, JsonBody, Query } from '#http';
import { AdminRead } from './admin-access';
import { AdminService } from './admin.service';
import { EventsService } from './events.service';
import { ReadsService } from './reads.service';

/**
 * Admin reads of one agent (EXTENSIONS.md §5, docs/console-api.md), scoped as every
 * `/_admin/agents…` route: auth, then the path handle (400, then 404 outside the token's scope),
 * then the agent route's own checks. None changes the agent's read state.
 */
@Controller('/_admin/agents')
@UseGuards(AdminGuard)
export class AdminReadsController {
  constructor(
    private readonly admin: AdminService,
    private readonly reads: ReadsService,
    private readonly feeds: EventsService,
  ) {}

  @Get('/:handle/mailbox')
  @AdminRead('mailbox')
  @Header('content-type', JSON_CONTENT_TYPE)
  async mailbox(
    @CurrentAdmin() scope: AdminScope,
    @Param('handle') handle: string,
    @Query() query: QueryPairs,
  ): Promise<string> {
    return this.reads.mailboxPage(await this.admin.findAgent(scope, handle), query);
  }

  @Get('/:handle/messages/:id')
  @AdminRead('message')
  @Header('content-type', JSON_CONTENT_TYPE)
  async message(
    @CurrentAdmin() scope: AdminScope,
    @Param('handle') handle: string,
    @Param('id') id: string,
  ): Promise<string> {
    return this.reads.message(await this.admin.findAgent(scope, handle), id);
  }

  @Get('/:handle/receipts')
  @AdminRead('receipts')
  async receipts(@CurrentAdmin() scope: AdminScope, @Param('handle') handle: string, @Query() query: QueryPairs) {
    return this.reads.receiptsOf(await this.admin.findAgent(scope, handle), query);
  }

  @Get('/:handle/status')
  @AdminRead('status')
  async status(@CurrentAdmin() scope: AdminScope, @Param('handle') handle: string, @Query() query: QueryPairs) {
    return this.reads.statusOf(await this.admin.findAgent(scope, handle), query);
  }

  @Get('/:handle/files/:id')
  @AdminRead('file')
  async file(
    @CurrentAdmin() scope: AdminScope,
    @Param('handle') handle: string,
    @Param('id') id: string,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    const file = await this.reads.file(await this.admin.findAgent(scope, handle), id);
    await reply
      .code(200)
      .header('content-type', file.content_type)
      .header('content-disposition', `attachment; filename="${file.filename.replace(/"/g, '')}"`)
      .send(file.bytes);
  }

  @Get('/:handle/schedules')
  @AdminRead('schedules')
  async schedules(@CurrentAdmin() scope: AdminScope, @Param('handle') handle: string) {
    return this.reads.schedulesOf(await this.admin.findAgent(scope, handle));
  }

  @Patch('/:handle/schedules/:id')
  async updateSchedule(
    @CurrentAdmin() scope: AdminScope,
    @Param('handle') handle: string,
    @Param('id') id: string,
    @JsonBody() body: Record<string, unknown>,
  ) {
    return this.reads.updateSchedule(await this.admin.findAgent(scope, handle), id, body);
  }

  @Delete('/:handle/schedules/:id')
  async cancelSchedule(@CurrentAdmin() scope: AdminScope, @Param('handle') handle: string, @Param('id') id: string) {
    return this.reads.cancelSchedule(await this.admin.findAgent(scope, handle), id);
  }

  /** Server-Sent Events: `header` events as `/connect` pushes them, `: keepalive` every 15 s. */
  @Get('/:handle/events')
  @AdminRead('events')
  async events(
    @CurrentAdmin() scope: AdminScope,
    @Param('handle') handle: string,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    await this.feeds.open(await this.admin.findAgent(scope, handle), request, reply);
  }
}
