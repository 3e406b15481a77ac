import { Controller, Delete, Get, HttpCode, Param, Patch, Post, Req, UseGuards } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import type { AdminScope } from '#core';
import { AsmtpError } from '#domain';
import { JsonBody, jsonBody } from '#http';
import { AdminGuard, CurrentAdmin } from '../auth/guards';
import { AdminService } from './admin.service';

/** `/_admin/agents…` (ASMTP.md §1.4): auth, then path handle, then 404, then the body. */
@Controller('/_admin/agents')
@UseGuards(AdminGuard)
export class AdminAgentsController {
  constructor(private readonly admin: AdminService) {}

  @Post()
  @HttpCode(201)
  create(@CurrentAdmin() scope: AdminScope, @JsonBody() body: Record<string, unknown>) {
    return this.admin.createAgent(scope, body);
  }

  @Get()
  list(@CurrentAdmin() scope: AdminScope) {
    return this.admin.listAgents(scope);
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
@UseGuards(AdminGuard)
export class AdminOrgsController {
  constructor(private readonly admin: AdminService) {}

  @Post()
  @HttpCode(201)
  create(@CurrentAdmin() scope: AdminScope, @Req() request: FastifyRequest) {
    operatorOnly(scope);
    return this.admin.createOrg(jsonBody(request));
  }

  @Get()
  list(@CurrentAdmin() scope: AdminScope) {
    operatorOnly(scope);
    return this.admin.listOrgs();
  }

  @Get('/:name')
  async show(@CurrentAdmin() scope: AdminScope, @Param('name') name: string) {
    operatorOnly(scope);
    return this.admin.showOrg(await this.admin.findOrg(name));
  }

  @Patch('/:name')
  async update(@CurrentAdmin() scope: AdminScope, @Param('name') name: string, @Req() request: FastifyRequest) {
    operatorOnly(scope);
    const org = await this.admin.findOrg(name);
    return this.admin.updateOrg(org, jsonBody(request));
  }

  @Post('/:name/rotate-token')
  @HttpCode(200)
  async rotate(@CurrentAdmin() scope: AdminScope, @Param('name') name: string) {
    operatorOnly(scope);
    return this.admin.rotateOrgToken(await this.admin.findOrg(name));
  }

  @Delete('/:name')
  @HttpCode(204)
  async remove(@CurrentAdmin() scope: AdminScope, @Param('name') name: string): Promise<void> {
    operatorOnly(scope);
    await this.admin.deleteOrg(await this.admin.findOrg(name));
  }
}

/** Organization routes are the operator's; an organization admin gets the same 401 as a wrong token. */
function operatorOnly(scope: AdminScope): void {
  if (scope.kind !== 'operator') throw new AsmtpError(401, 'UNAUTHORIZED', 'invalid admin bearer');
}
