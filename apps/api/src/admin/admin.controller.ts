import { Controller, Delete, Get, HttpCode, Param, Patch, Post, Req, UseGuards } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { AdminGuard, CurrentAdmin, type AdminScope } from '#core';
import type { QueryPairs } from '#domain';
import { JsonBody, jsonBody, Query } from '#http';
import { OperatorOnly } from './admin-access';
import { AdminService } from './admin.service';
import { ConsoleService } from './console.service';
import { parseAgentListQuery } from './console-query';

/** `/_admin/agents…` (ASMTP.md §1.4): auth, then path handle, then 404, then the body. */
@Controller('/_admin/agents')
@UseGuards(AdminGuard)
export class AdminAgentsController {
  constructor(
    private readonly admin: AdminService,
    private readonly console: ConsoleService,
  ) {}

  @Post()
  @HttpCode(201)
  create(@CurrentAdmin() scope: AdminScope, @JsonBody() body: Record<string, unknown>) {
    return this.admin.createAgent(scope, body);
  }

  /** The reference listing (all agents), or with q/limit/after/include the console's paged search. */
  @Get()
  list(@CurrentAdmin() scope: AdminScope, @Query() query: QueryPairs) {
    const page = parseAgentListQuery(query);
    return page ? this.console.agents(scope, page) : this.admin.listAgents(scope);
  }

  @Get('/:handle')
  async show(@CurrentAdmin() scope: AdminScope, @Param('handle') handle: string) {
    return this.admin.showAgent(await this.admin.findAgent(scope, handle));
  }

  @Patch('/:handle')
  async update(@CurrentAdmin() scope: AdminScope, @Param('handle') handle: string, @Req() request: FastifyRequest) {
    const agent = await this.admin.findAgent(scope, handle);
    return this.admin.updateAgent(agent, jsonBody(request));
  }

  @Post('/:handle/rotate-token')
  @HttpCode(200)
  async rotate(@CurrentAdmin() scope: AdminScope, @Param('handle') handle: string) {
    return this.admin.rotateAgentToken(await this.admin.findAgent(scope, handle));
  }

  @Delete('/:handle')
  @HttpCode(204)
  async remove(@CurrentAdmin() scope: AdminScope, @Param('handle') handle: string): Promise<void> {
    await this.admin.deleteAgent(await this.admin.findAgent(scope, handle));
  }
}

/** `/_admin/orgs…` (EXTENSIONS.md §5): the operator admin token only. */
@Controller('/_admin/orgs')
@OperatorOnly()
export class AdminOrgsController {
  constructor(private readonly admin: AdminService) {}

  @Post()
  @HttpCode(201)
  create(@Req() request: FastifyRequest) {
    return this.admin.createOrg(jsonBody(request));
  }

  @Get()
  list() {
    return this.admin.listOrgs();
  }

  @Get('/:name')
  async show(@Param('name') name: string) {
    return this.admin.showOrg(await this.admin.findOrg(name));
  }

  @Patch('/:name')
  async update(@Param('name') name: string, @Req() request: FastifyRequest) {
    const org = await this.admin.findOrg(name);
    return this.admin.updateOrg(org, jsonBody(request));
  }

  @Post('/:name/rotate-token')
  @HttpCode(200)
  async rotate(@Param('name') name: string) {
    return this.admin.rotateOrgToken(await this.admin.findOrg(name));
  }

  @Delete('/:name')
  @HttpCode(204)
  async remove(@Param('name') name: string): Promise<void> {
    await this.admin.deleteOrg(await this.admin.findOrg(name));
  }
}
