import { Controller, Get, UseGuards } from '@nestjs/common';
import { AdminGuard, CurrentAdmin, type AdminScope } from '#core';
import { ConsoleService } from './console.service';

/** The console's own admin routes (docs/console-api.md); any admin token, scoped by it. */
@Controller('/_admin')
@UseGuards(AdminGuard)
export class AdminConsoleController {
  constructor(private readonly console: ConsoleService) {}

  @Get('/whoami')
  whoami(@CurrentAdmin() scope: AdminScope) {
    return this.console.whoami(scope);
  }

  @Get('/overview')
  overview(@CurrentAdmin() scope: AdminScope) {
    return this.console.overview(scope);
  }
}
